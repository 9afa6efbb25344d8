"""mixed_precision "auto" on the two CPU kinds this project runs on: bf16
where the CPU has native bf16 matmuls (AVX512-BF16 or AMX), fp32 elsewhere
(on AVX2-only and plain AVX512 machines emulated bf16 is slower); the CPU
kind printed beside every figure says which kind a figure came from."""

import pytest

from configure_pretraining import PretrainingConfig
from training.distribution import resolve_precision
from util import machine

AVX2 = {"fpu", "sse4_2", "avx", "avx2", "fma"}


@pytest.mark.parametrize("flags,precision,kind", [
    (AVX2, "float32", "AVX2 (no AVX512)"),
    (AVX2 | {"avx512f", "avx512bw"}, "float32", "AVX512 (no native bf16)"),
    (AVX2 | {"avx512f", "avx512_bf16"}, "bfloat16", "AVX512-BF16"),
    (AVX2 | {"avx512f", "amx_bf16", "amx_tile"}, "bfloat16", "AVX512-BF16"),
])
def test_auto_precision_follows_the_cpu_kind(monkeypatch, flags, precision,
                                             kind):
  monkeypatch.setattr(machine, "cpu_flags", lambda: set(flags))
  assert resolve_precision(PretrainingConfig()) == precision
  assert machine.cpu_kind().endswith(kind)
  for chosen in ("float32", "bfloat16"):  # an explicit setting stays
    assert resolve_precision(
        PretrainingConfig(mixed_precision=chosen)) == chosen
