"""Does any XLA CPU flag give XLA's matmuls oneDNN's speed? (issue 42)

  python benchmarks/xla_cpu_flags.py [--size 2048] [--reps 5]

XLA (TensorFlow's jit_compile and JAX) would fuse the step's element-wise
work, but on the CPU its dots are its own, not oneDNN's. This prints, in
one run and on this CPU: TensorFlow's eager oneDNN matmul (the non-XLA
step's), then jax.jit's matmul under each XLA_FLAGS setting that names
oneDNN or XNNPACK (each in a subprocess: XLA reads its flags once). A
flag pays only if it brings the JAX figure near TensorFlow's.
"""

import argparse
import os
import subprocess
import sys
import time

FLAGS = ("", "--xla_cpu_use_onednn=true",
         "--xla_cpu_experimental_onednn_custom_call=true",
         "--xla_cpu_experimental_onednn_fusion_type=dot",
         "--xla_cpu_use_xnnpack=true",
         "--xla_cpu_experimental_xnn_fusion_type=dot")

JAX_MATMUL = """
import sys, time, jax, jax.numpy as jnp
n, reps = int(sys.argv[1]), int(sys.argv[2])
f = jax.jit(lambda a, b: a @ b)
for dtype in (jnp.float32, jnp.bfloat16):
  a = jnp.ones((n, n), dtype)
  f(a, a).block_until_ready()
  best = float("inf")
  for _ in range(reps):
    start = time.perf_counter()
    f(a, a).block_until_ready()
    best = min(best, time.perf_counter() - start)
  print(dtype.__name__, 2 * n ** 3 / best / 1e12)
"""


def tensorflow_peaks(n, reps):
  from util.tf_quiet import import_tensorflow  # pylint: disable=g-import-not-at-top
  tf = import_tensorflow()
  peaks = {}
  for dtype in ("float32", "bfloat16"):
    a = tf.cast(tf.random.normal((n, n)), dtype)
    tf.matmul(a, a).numpy()
    best = float("inf")
    for _ in range(reps):
      start = time.perf_counter()
      tf.matmul(a, a).numpy()
      best = min(best, time.perf_counter() - start)
    peaks[dtype] = 2 * n ** 3 / best / 1e12
  return peaks


def jax_peaks(flags, n, reps):
  env = dict(os.environ, XLA_FLAGS=flags, JAX_PLATFORMS="cpu")
  out = subprocess.run([sys.executable, "-c", JAX_MATMUL, str(n), str(reps)],
                       capture_output=True, text=True, env=env, check=False)
  if out.returncode:
    return None
  return {line.split()[0]: float(line.split()[1])
          for line in out.stdout.splitlines()}


def main():
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--size", type=int, default=2048)
  p.add_argument("--reps", type=int, default=5)
  args = p.parse_args()
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  sys.path.insert(0, root)
  from util.machine import cpu_kind  # pylint: disable=g-import-not-at-top
  print(f"{cpu_kind()}; {args.size}^3 matmuls, best of {args.reps}, TFLOP/s")
  tf = tensorflow_peaks(args.size, args.reps)
  print(f"{'TensorFlow eager (oneDNN)':56s} fp32 {tf['float32']:.3f}  "
        f"bf16 {tf['bfloat16']:.3f}")
  for flags in FLAGS:
    got = jax_peaks(flags, args.size, args.reps)
    name = f"jax.jit {flags or '(no flags)'}"
    if got is None:
      print(f"{name:56s} refused")
      continue
    print(f"{name:56s} fp32 {got['float32']:.3f}  bf16 {got['bfloat16']:.3f}"
          f"  ({got['bfloat16'] / tf['bfloat16']:.2f}x TF's bf16)")


if __name__ == "__main__":
  main()
