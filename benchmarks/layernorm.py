"""LayerNorm three ways at a pretraining step's shape, forward alone and
forward plus gradient, in float32 and bfloat16 (interleaved in one
process; each row's outputs or gradients checked against Keras'):
  keras  Keras' LayerNormalization (ops.layer_normalization: moments, then
         x * inv + (beta - mean * inv));
  ours   model.encoder.LayerNorm: (x - mean) * (rsqrt(var + eps) * gamma)
         + beta;
  fused  TensorFlow's one fused CPU normalization kernel, FusedBatchNormV3
         with the rows as the channels of an NCHW tensor, gamma and beta
         applied after (as tf.keras once did).
Prints each one's best time and its speed relative to Keras'.

  python benchmarks/layernorm.py [--batch 32] [--seq-len 128]
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

from util.machine import cpu_kind  # noqa: E402
from util.tf_quiet import import_tensorflow  # noqa: E402

tf = import_tensorflow()
import keras  # noqa: E402

from model.encoder import LayerNorm  # noqa: E402

EPS = 1e-12


class Fused(keras.layers.LayerNormalization):
  def call(self, x):
    shape, hidden = tf.shape(x), x.shape[-1]
    rows = tf.reshape(tf.cast(x, tf.float32), [1, -1, hidden, 1])
    n = tf.shape(rows)[1]
    y, _, _ = tf.compat.v1.nn.fused_batch_norm(
        rows, tf.ones([n]), tf.zeros([n]), epsilon=EPS, data_format="NCHW")
    y = tf.reshape(y, shape) * self.gamma + self.beta
    return tf.cast(y, self.compute_dtype)


def step_of(layer, gradient):
  @tf.function
  def step(x):
    with tf.GradientTape() as tape:
      tape.watch(x)
      y = tf.cast(layer(x), tf.float32)
      loss = tf.reduce_sum(y * tf.cast(x, tf.float32))
    if not gradient:
      return [y]
    return tape.gradient(loss, [x] + layer.trainable_weights)
  return step


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--batch", type=int, default=32)
  p.add_argument("--seq-len", type=int, default=128)
  p.add_argument("--hidden", type=int, default=256)
  p.add_argument("--repeats", type=int, default=7)
  args = p.parse_args()
  rng = np.random.default_rng(0)
  x0 = rng.normal(1.0, 3.0, (args.batch, args.seq_len, args.hidden))
  weights = [rng.uniform(0.5, 1.5, args.hidden), rng.normal(size=args.hidden)]
  print(f"[{cpu_kind()}] shape {x0.shape}, best of {args.repeats} x 10")
  for policy in ("float32", "mixed_bfloat16"):
    layers = {"keras": keras.layers.LayerNormalization(epsilon=EPS,
                                                       dtype=policy),
              "ours": LayerNorm(epsilon=EPS, dtype=policy),
              "fused": Fused(epsilon=EPS, dtype=policy)}
    for layer in layers.values():
      layer.build((None, None, args.hidden))
      layer.set_weights([w.astype(np.float32) for w in weights])
    x = tf.cast(tf.constant(x0, tf.float32), layers["keras"].compute_dtype)
    for gradient in (False, True):
      steps = {k: step_of(layer, gradient) for k, layer in layers.items()}
      want = [t.numpy().astype(np.float32) for t in steps["keras"](x)]
      diffs = {k: max(float(np.abs(w - g.numpy().astype(np.float32)).max() /
                            np.abs(w).max()) for w, g in zip(want, step(x)))
               for k, step in steps.items()}
      times = {k: [] for k in steps}
      for _ in range(args.repeats):
        for name, step in steps.items():
          start = time.perf_counter()
          for _ in range(10):
            step(x)[0].numpy()
          times[name].append((time.perf_counter() - start) / 10)
      best = {k: min(v) * 1e3 for k, v in times.items()}
      what = "forward + gradient" if gradient else "forward"
      cells = ", ".join(
          f"{k} {best[k]:.2f} ms ({best['keras'] / best[k]:.2f}x, "
          f"differs {diffs[k]:.0e})" for k in steps)
      print(f"{policy:15s} {what:18s} {cells}")


if __name__ == "__main__":
  main()
