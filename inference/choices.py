"""The inference engine's settings (TF-free, so configs check them before
TensorFlow loads): the engines, the precisions, and "auto"'s rules."""

from util.machine import cpu_has_bf16

ENGINES = ("auto", "openvino", "tensorflow")
PRECISIONS = ("auto", "float32", "bfloat16")
# engine "auto": a workload of fewer model rows than this runs on
# TensorFlow, where converting and compiling the model would cost more than
# it saves. Measured (Small, AMD EPYC, docs/performance.md): the engine's
# 2.1 s to convert and compile against TensorFlow's 0.67 s trace pays back
# after ~600 rows on a run's first evaluation, ~880 on a later trial's
# (TensorFlow's trace is reused, the engine compiles each trial's weights).
AUTO_MIN_ROWS = 1024


def resolve_precision(precision):
  """Like training's (training/distribution.py resolve_precision): "auto"
  = bfloat16 where the CPU runs it natively (AVX512-BF16 or AMX), else
  float32."""
  if precision not in PRECISIONS:
    raise ValueError(f"unknown inference precision {precision}")
  if precision != "auto":
    return precision
  return "bfloat16" if cpu_has_bf16() else "float32"
