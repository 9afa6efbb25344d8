"""What CPU a figure was measured on (TF-free): its model name and whether
it runs bf16 natively, printed beside every benchmark or experiment figure."""

import os
import platform
import time


def cpu_flags():
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("flags"):
          return set(line.split(":", 1)[1].split())
  except OSError:
    pass
  return set()


BF16_FLAGS = frozenset(("avx512_bf16", "amx_bf16"))


def cpu_has_bf16():
  """x86 CPUs with AVX512-BF16 or AMX run bf16 matmuls natively (oneDNN);
  elsewhere bf16 is emulated and slower than fp32."""
  return bool(cpu_flags() & BF16_FLAGS)


def cpu_kind():
  """e.g. 'AMD EPYC, 2 cores, AVX512-BF16' or '..., AVX2 (no AVX512)'."""
  name = platform.processor() or platform.machine()
  try:
    with open("/proc/cpuinfo") as f:
      names = [l.split(":", 1)[1].strip() for l in f
               if l.startswith("model name")]
    name = names[0] if names else name
  except OSError:
    pass
  flags = cpu_flags()
  if flags & BF16_FLAGS:
    isa = "AVX512-BF16"
  elif "avx512f" in flags:
    isa = "AVX512 (no native bf16)"
  elif "avx2" in flags:
    isa = "AVX2 (no AVX512)"
  else:
    isa = "no AVX2"
  return f"{name}, {os.cpu_count()} cores, {isa}"


def jax_matmul_peak_tflops(n, dtype, reps=10):
  """Best of `reps` n^3 products under JAX on its default device, TFLOP/s:
  the hardware limit MFU is read against. Random data (all-ones or zeros
  draw less power and run faster: a peak no model step sees)."""
  import jax  # only here: the rest of this module imports nothing heavy
  a = jax.random.normal(jax.random.PRNGKey(0), (n, n), dtype)
  f = jax.jit(lambda a: a @ a)
  f(a).block_until_ready()
  best = float("inf")
  for _ in range(reps):
    start = time.perf_counter()
    f(a).block_until_ready()
    best = min(best, time.perf_counter() - start)
  return 2 * n ** 3 / best / 1e12
