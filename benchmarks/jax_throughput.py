"""ELECTRA pretraining throughput and MFU under KERAS_BACKEND=jax.

  KERAS_BACKEND=jax python benchmarks/jax_throughput.py [--sizes small,base]
      [--batch-sizes 32] [--seq-lens 128,512] [--precision bfloat16]
      [--json out.json]

For the GPU machines, which carry JAX but not TensorFlow: nothing here
imports TensorFlow. The model is the same Keras code (pretrain/objectives);
the step is the JAX driver's (pretrain/jax_trainer.py: jax.jit of `--steps`
steps, each masking its batch with pretrain/masking.py, value_and_grad of
model.stateless_call, global-norm clipping and the Keras AdamW's
stateless_apply), all on device. Examples are random token ids
(pretrain/arrays.py `synthetic`) kept on the device: this times the step,
not an input pipeline. MFU =
pretrain/flops.model_flops_per_step x steps/s / a bf16 matmul peak measured in
the same process.
"""

import argparse
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

from benchmarks import write_json  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import keras  # noqa: E402

from pretrain import flops  # noqa: E402
from util.machine import jax_matmul_peak_tflops  # noqa: E402

CLS, SEP, MASK, FIRST = 101, 102, 103, 1000


def time_step(size, batch, seq_len, precision, args):
  """The JAX driver's compiled step (pretrain/jax_trainer.py) on random
  examples kept on the device: `loops` timings of `steps` steps."""
  from pretrain import arrays
  from pretrain.config import PretrainingConfig
  from pretrain.jax_trainer import JaxTrainer
  hp = PretrainingConfig(model_size=size, vocab_size=args.vocab_size,
                         max_seq_length=seq_len, train_batch_size=batch,
                         eval_batch_size=batch, mixed_precision=precision,
                         pretrain_tfrecords="synthetic", model_dir="unused",
                         model_hparam_overrides={
                             "max_position_embeddings": max(512, seq_len)})
  hp.validate()
  data = arrays.synthetic(4 * batch, seq_len, args.vocab_size)
  trainer = JaxTrainer(hp, data, log=lambda *_: None)
  m = trainer.measure(args.steps, args.loops)
  return dict(seq_per_s=m["seq_per_s"], step_ms=m["step_s"] * 1e3,
              flops_per_step=flops.model_flops_per_step(hp),
              compile_s=m["first_call_s"], loss=m["loss"])


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
  peak = jax_matmul_peak_tflops(n, jnp.bfloat16)
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
