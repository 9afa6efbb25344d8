"""LayerNorm: Keras' ops.layer_normalization vs TensorFlow's one fused CPU
normalization kernel (FusedBatchNormV3 with the rows as the channels of an
NCHW tensor, gamma and beta applied after, as tf.keras once did), forward
plus gradient, at a pretraining step's shape. Interleaved in one process;
prints the gradients' largest relative difference and the time ratio.

  python benchmarks/layernorm_fused.py [--batch 32] [--seq-len 128]
      [--hidden 256] [--repeats 7]
"""

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run as a script: make the repo importable
  sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

from util.machine import cpu_kind  # noqa: E402
from util.tf_quiet import import_tensorflow  # noqa: E402

tf = import_tensorflow()


def plain(x, gamma, beta):
  return ops.layer_normalization(x, gamma, beta, -1, 1e-12)


def fused(x, gamma, beta):
  shape, hidden = tf.shape(x), x.shape[-1]
  rows = tf.reshape(tf.cast(x, tf.float32), [1, -1, hidden, 1])
  n = tf.shape(rows)[1]
  y, _, _ = tf.compat.v1.nn.fused_batch_norm(
      rows, tf.ones([n]), tf.zeros([n]), epsilon=1e-12, data_format="NCHW")
  return tf.reshape(y, shape) * gamma + beta


def step_of(norm, gamma, beta):
  @tf.function
  def step(x):
    with tf.GradientTape() as tape:
      tape.watch(x)
      y = tf.cast(norm(x, gamma, beta), tf.float32)
      loss = tf.reduce_sum(y * tf.cast(x, tf.float32))
    return tape.gradient(loss, [x, gamma, beta])
  return step


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--batch", type=int, default=32)
  p.add_argument("--seq-len", type=int, default=128)
  p.add_argument("--hidden", type=int, default=256)
  p.add_argument("--repeats", type=int, default=7)
  args = p.parse_args()
  x0 = tf.random.normal([args.batch, args.seq_len, args.hidden])
  gamma = tf.Variable(tf.random.normal([args.hidden]))
  beta = tf.Variable(tf.random.normal([args.hidden]))
  print(f"[{cpu_kind()}] shape {tuple(x0.shape)}, forward + gradient")
  for dtype in (tf.float32, tf.bfloat16):
    x = tf.cast(x0, dtype)
    steps = {name: step_of(f, gamma, beta)
             for name, f in (("plain", plain), ("fused", fused))}
    want, got = ([g.numpy().astype(np.float32) for g in steps[k](x)]
                 for k in ("plain", "fused"))
    diff = max(float(np.abs(w - g).max() / np.abs(w).max())
               for w, g in zip(want, got))
    times = {k: [] for k in steps}
    for _ in range(args.repeats):
      for name, step in steps.items():
        start = time.perf_counter()
        for _ in range(10):
          step(x)[0].numpy()
        times[name].append((time.perf_counter() - start) / 10)
    best = {k: min(v) * 1e3 for k, v in times.items()}
    print(f"{dtype.name:9s} plain {best['plain']:.2f} ms, fused "
          f"{best['fused']:.2f} ms: fused is {best['plain'] / best['fused']:.2f}x"
          f" the plain speed; gradients differ by {diff:.1e} (relative)"
          f"  [{cpu_kind()}]")


if __name__ == "__main__":
  main()
