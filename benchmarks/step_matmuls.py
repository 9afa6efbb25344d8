"""The matmuls of one ELECTRA train step alone, at the step's own shapes.

  python benchmarks/step_matmuls.py [--size small] [--batch 32]
      [--precision bfloat16]

Runs every matmul the step runs (forward, and the two of each backward:
dX and dW; attention scores and context) back to back in one tf.function,
beside a 2048^3 matmul. How close they come to the peak is the ceiling on
MFU for these shapes; the rest of a real step's time is everything else.
Counts match pretrain/flops.model_flops_per_step.
"""

import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

from benchmarks import step_parser  # noqa: E402
from util.tf_quiet import import_tensorflow  # noqa: E402

tf = import_tensorflow()


def step_shapes(size, batch, seq_len, vocab_size, predictions):
  """(dense [(m, k, n)], attention [(batch*heads, t, head_size)])."""
  from model import config as model_config
  disc = model_config.get_model_config(size, vocab_size)
  gen = model_config.scale_config(disc, model_config.GENERATOR_MULTIPLIER[size])
  n = batch * seq_len
  dense, attention = [], []
  for c in (disc, gen):
    if c.embedding_size != c.hidden_size:
      dense.append((n, c.embedding_size, c.hidden_size))
    for _ in range(c.num_hidden_layers):
      dense += [(n, c.hidden_size, c.hidden_size)] * 4
      dense += [(n, c.hidden_size, c.intermediate_size),
                (n, c.intermediate_size, c.hidden_size)]
      attention.append((batch * c.num_attention_heads, seq_len, c.head_size))
  m = batch * predictions  # heads: discriminator everywhere, MLM at masks
  dense += [(n, disc.hidden_size, disc.hidden_size), (n, disc.hidden_size, 1),
            (m, gen.hidden_size, gen.embedding_size),
            (m, gen.embedding_size, vocab_size)]
  return dense, attention


def main(argv=None):
  p = step_parser(__doc__)
  p.add_argument("--predictions", type=int, default=19)  # (0.15+.005)*128
  args = p.parse_args(argv)
  dtype = getattr(tf, args.precision)
  dense, attention = step_shapes(args.size, args.batch, args.seq_len,
                                 args.vocab_size, args.predictions)

  def rand(*shape):
    return tf.cast(tf.random.normal(shape), dtype)
  dense_t = [(rand(m, k), rand(k, n), rand(m, n)) for m, k, n in dense]
  attention_t = [(rand(b, t, d), rand(b, d, t), rand(b, t, t))
                 for b, t, d in attention]

  @tf.function
  def step():
    out = []
    for a, w, g in dense_t:  # forward, dX, dW
      out += [tf.matmul(a, w), tf.matmul(g, w, transpose_b=True),
              tf.matmul(a, g, transpose_a=True)]
    for q, k, probs in attention_t:  # scores and context, x3 each
      for _ in range(3):
        out += [tf.matmul(q, k), tf.matmul(probs, k, transpose_b=True)]
    return tf.add_n([tf.reduce_sum(o[..., :1, :1]) for o in out])

  flops = (sum(6 * m * k * n for m, k, n in dense) +
           sum(12 * b * t * d * t for b, t, d in attention))
  a, b = rand(2048, 2048), rand(2048, 2048)
  peak_fn = tf.function(lambda: tf.reduce_sum(tf.matmul(a, b)[:1, :1]))

  def best(fn, reps):
    fn().numpy()
    times = []
    for _ in range(reps):
      start = time.perf_counter()
      fn().numpy()
      times.append(time.perf_counter() - start)
    return min(times)
  step_s, peak_s = best(step, 5), best(peak_fn, 10)
  peak = 2 * 2048 ** 3 / peak_s
  print(f"{args.size} batch {args.batch} {args.precision}: the step's "
        f"matmuls, {flops / 1e9:.1f} GFLOP, take {step_s * 1e3:.0f} ms = "
        f"{flops / step_s / 1e12:.3f} TFLOP/s, {flops / step_s / peak:.1%} "
        f"of the {peak / 1e12:.3f} TFLOP/s 2048^3 peak")


if __name__ == "__main__":
  main()
