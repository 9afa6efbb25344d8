"""The inference engine's settings (TF-free, so configs check them before
TensorFlow loads): the engines, the precisions, and "auto"'s rules."""

from util.machine import cpu_has_bf16

ENGINES = ("auto", "openvino", "tensorflow")
PRECISIONS = ("auto", "float32", "bfloat16")
# engine "auto": a workload of fewer model rows than this runs on
# TensorFlow, where converting and compiling the model (seconds for Small)
# would cost more than it saves (docs/performance.md).
AUTO_MIN_ROWS = 2048


def resolve_precision(precision):
  """Like training's (training/distribution.py resolve_precision): "auto"
  = bfloat16 where the CPU runs it natively (AVX512-BF16 or AMX), else
  float32."""
  if precision not in PRECISIONS:
    raise ValueError(f"unknown inference precision {precision}")
  if precision != "auto":
    return precision
  return "bfloat16" if cpu_has_bf16() else "float32"
