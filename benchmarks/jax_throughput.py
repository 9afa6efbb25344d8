"""ELECTRA pretraining throughput and MFU under KERAS_BACKEND=jax.

  KERAS_BACKEND=jax python benchmarks/jax_throughput.py [--sizes small,base]
      [--batch-sizes 32] [--seq-lens 128,512] [--precision bfloat16]
      [--json out.json]

For the GPU machines, which carry JAX but not TensorFlow: nothing here
imports TensorFlow. The model is the same Keras code (pretrain/objectives);
the step is jax.jit(value_and_grad(model.stateless_call) + global-norm
clipping + the Keras AdamW's stateless_apply), all on device. Batches are
random token ids masked here in NumPy (ELECTRA's scheme), made once and
cycled: this times the step, not an input pipeline. MFU =
pretrain/flops.model_flops_per_step x steps/s / a bf16 matmul peak measured in
the same process.
"""

import argparse
import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "jax")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

from benchmarks import write_json  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

from pretrain import flops  # noqa: E402

CLS, SEP, MASK, FIRST = 101, 102, 103, 1000


def matmul_peak_tflops(n, dtype, reps=10):
  a = jnp.ones((n, n), dtype)
  f = jax.jit(lambda a: a @ a)
  f(a).block_until_ready()
  best = float("inf")
  for _ in range(reps):
    start = time.perf_counter()
    f(a).block_until_ready()
    best = min(best, time.perf_counter() - start)
  return 2 * n ** 3 / best / 1e12


def masked_batches(hp, batch, count, seed=0):
  """`count` batches of random ids with ELECTRA's masking (15% of the
  tokens, 85% of those [MASK]), at most max_predictions_per_seq a row."""
  rng = np.random.default_rng(seed)
  t, p = hp.max_seq_length, hp.max_predictions_per_seq
  out = []
  for _ in range(count):
    ids = rng.integers(FIRST, hp.vocab_size, (batch, t)).astype(np.int32)
    ids[:, 0], ids[:, -1] = CLS, SEP
    positions = np.stack([np.sort(rng.choice(np.arange(1, t - 1), p, False))
                          for _ in range(batch)]).astype(np.int32)
    masked = ids.copy()
    rows = np.arange(batch)[:, None]
    to_mask = rng.random((batch, p)) < hp.mask_replace_prob
    masked[rows, positions] = np.where(to_mask, MASK, ids[rows, positions])
    segments = np.zeros_like(ids)
    segments[:, t // 2:] = 1
    scoring = np.ones((batch, t), np.float32)
    scoring[:, [0, -1]] = 0
    out.append({
        "input_ids": ids, "input_mask": np.ones_like(ids),
        "segment_ids": segments, "masked_input_ids": masked,
        "scoring_mask": scoring, "masked_lm_positions": positions,
        "masked_lm_ids": ids[rows, positions],
        "masked_lm_weights": np.ones((batch, p), np.float32),
        "masked_lm_denominator": np.float32(batch * p),
        "input_mask_denominator": np.float32(batch * t)})
  return out


def time_step(size, batch, seq_len, precision, args):
  from pretrain.config import PretrainingConfig
  from pretrain.objectives import build_model
  from training import optimization
  keras.mixed_precision.set_dtype_policy(
      "mixed_bfloat16" if precision == "bfloat16" else "float32")
  hp = PretrainingConfig(model_size=size, vocab_size=args.vocab_size,
                         max_seq_length=seq_len, train_batch_size=batch,
                         model_hparam_overrides={
                             "max_position_embeddings": max(512, seq_len)})
  hp.resolve()
  model = build_model(hp)
  model.build_variables()
  optimizer = optimization.create_optimizer(hp)
  optimization.build_optimizer(optimizer, model.trainable_variables)
  trainable = [v.value for v in model.trainable_variables]
  fixed = [v.value for v in model.non_trainable_variables]
  slots = [v.value for v in optimizer.variables]

  def loss_fn(trainable, fixed, features):
    outputs, fixed = model.stateless_call(trainable, fixed, features,
                                          training=True)
    return outputs["loss"], fixed

  grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

  @jax.jit
  def step(state, features):
    trainable, fixed, slots = state
    (loss, fixed), grads = grad_fn(trainable, fixed, features)
    norm = jnp.sqrt(sum(jnp.sum(jnp.square(g.astype(jnp.float32)))
                        for g in grads))
    scale = jnp.minimum(1.0, hp.clip_norm / jnp.maximum(norm, 1e-6))
    grads = [g * scale.astype(g.dtype) for g in grads]
    trainable, slots = optimizer.stateless_apply(slots, grads, trainable)
    return (trainable, fixed, slots), loss

  batches = [jax.device_put(b) for b in masked_batches(hp, batch, 4)]
  state = (trainable, fixed, slots)
  start = time.perf_counter()
  state, loss = step(state, batches[0])
  loss.block_until_ready()
  compile_s = time.perf_counter() - start
  times = []
  for _ in range(args.loops):
    start = time.perf_counter()
    for i in range(args.steps):
      state, loss = step(state, batches[i % len(batches)])
    loss.block_until_ready()
    times.append((time.perf_counter() - start) / args.steps)
  step_s = min(times)
  return dict(seq_per_s=batch / step_s, step_ms=step_s * 1e3,
              flops_per_step=flops.model_flops_per_step(hp),
              compile_s=compile_s, loss=float(loss))


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--sizes", default="small,base")
  p.add_argument("--batch-sizes", default="32")
  p.add_argument("--seq-lens", default="128,512")
  p.add_argument("--precision", default="bfloat16")
  p.add_argument("--vocab-size", type=int, default=flops.PAPER_VOCAB_SIZE)
  p.add_argument("--steps", type=int, default=10)
  p.add_argument("--loops", type=int, default=3)
  p.add_argument("--matmul-size", type=int, default=0,
                 help="0: 8192 on GPU, 2048 on CPU")
  p.add_argument("--json", help="write the results here")
  args = p.parse_args(argv)
  assert keras.backend.backend() == "jax", "run with KERAS_BACKEND=jax"
  device = jax.devices()[0]
  n = args.matmul_size or (8192 if device.platform == "gpu" else 2048)
  peak = matmul_peak_tflops(n, jnp.bfloat16)
  print(f"{device.device_kind} ({device.platform}); bf16 matmul peak "
        f"{peak:.1f} TFLOP/s ({n}^3)", flush=True)
  entries = []
  for size in args.sizes.split(","):
    for seq_len in [int(s) for s in args.seq_lens.split(",")]:
      for batch in [int(b) for b in args.batch_sizes.split(",")]:
        e = dict(size=size, seq_len=seq_len, batch=batch,
                 precision=args.precision)
        e.update(time_step(size, batch, seq_len, args.precision, args))
        e["mfu"] = e["flops_per_step"] * e["seq_per_s"] / batch / (
            peak * 1e12)
        entries.append(e)
        print(f"{size:<6} seq {seq_len:>4} batch {batch:>4} "
              f"{args.precision}: {e['step_ms']:8.1f} ms/step "
              f"{e['seq_per_s']:9.1f} seq/s  MFU {e['mfu']:.1%}  "
              f"(compile {e['compile_s']:.0f}s, loss {e['loss']:.2f})",
              flush=True)
  result = {"device": device.device_kind, "peak_bf16_tflops": peak,
            "entries": entries}
  write_json(args.json, result)
  return result


if __name__ == "__main__":
  main()
