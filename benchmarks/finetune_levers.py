"""Levers for our GLUE train step at the data's short lengths (issue 67),
each beside today's step in one process, timed alternately.

  python benchmarks/finetune_levers.py [--size small] [--seq-lens 32,64]
      [--batch-size 32] [--steps 5] [--loops 5]
      [--levers full_last_layer,bfloat16,xla] [--json out.json]

`default` is the step run_finetuning.py runs (benchmarks/finetune_throughput.py
builds it: FinetuningRunner, layer-wise AdamW, float32, the [CLS] head's
last layer on the first token only). Each lever changes one thing:
  full_last_layer  the last layer on every token (Task.first_token_only
                   off): what the [CLS]-only last layer saves
  bfloat16         mixed_precision bfloat16 (oneDNN's AVX512-BF16/AMX paths)
  xla              the same step compiled with jit_compile=True (one
                   program per length, as under JAX)
SST-2's train rows at --seq-len with random ids and every position real,
as finetune_throughput.py feeds them. Per loop each variant runs --steps
steps, in turn; the figure is the median over loops of the paired ratio
(default's seconds / the lever's in the same loop: > 1 is faster), beside
each variant's best steps/s and what its first call costs beyond its
steps (the trace; xla: the compile, once per length a run meets), with the
CPU kind. A lever is worth taking
only where its paired ratio is above 1 at every length.
"""

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from benchmarks import finetune_throughput as ft  # noqa: E402
from benchmarks import scratch, write_json  # noqa: E402
from util.machine import cpu_kind  # noqa: E402

tf = ft.tf
LEVERS = ("full_last_layer", "bfloat16", "xla")


def build(lever, args):
  """() -> (seconds, loss) for --steps of the variant's train step."""
  import keras
  from finetune.optimization import create_optimizer
  keras.backend.clear_session()
  precision = "bfloat16" if lever == "bfloat16" else "float32"
  runner = ft.make_runner("glue", precision, args)
  task = runner.tasks[0]
  if lever == "full_last_layer":
    task.first_token_only = False  # read when the step is traced
  features = ft.train_features(runner, args)
  model = runner._build(runner.config.seed)  # noqa: SLF001
  config = runner.config
  shape = runner.model_config
  optimizer = create_optimizer(config, model.trainable_variables,
                               shape.num_hidden_layers, 10_000,
                               shape.share_layers)
  batches = runner.data.batches(features, config.train_batch_size,
                                config.seed)
  step = runner._train_step(model, optimizer, task.name,  # noqa: SLF001
                            batches.element_spec)
  if lever == "xla":
    step = tf.function(step.python_function, jit_compile=True)
  keras.mixed_precision.set_dtype_policy("float32")

  def train():
    start = time.perf_counter()
    for _ in range(args.steps):
      loss = float(step(next(batches)))
    return time.perf_counter() - start, loss

  first = train()[0]  # the trace (xla: the compile) and --steps steps
  return train, first


def measure(seq, args):
  args.seq_len = seq
  variants = {name: build(name, args) for name in ("default",) + args.levers}
  times = {name: [] for name in variants}
  for _ in range(args.loops):
    for name, (train, _) in variants.items():
      times[name].append(train()[0])
  out = {}
  for name, t in times.items():
    paired = [d / s for d, s in zip(times["default"], t)]
    # What the first call costs beyond its steps: once per length a run
    # meets (TensorFlow's default traces once for every length).
    first = variants[name][1] - min(t)
    out[name] = dict(steps_per_s=args.steps / min(t), seconds=t,
                     first_call_extra_s=first,
                     paired_ratio_median=float(np.median(paired)))
  return out


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--size", default="small")
  p.add_argument("--seq-lens", default="32,64")
  p.add_argument("--batch-size", type=int, default=32)
  p.add_argument("--steps", type=int, default=5)
  p.add_argument("--loops", type=int, default=5)
  p.add_argument("--levers", default=",".join(LEVERS))
  p.add_argument("--vocab-size", type=int, default=30522)
  p.add_argument("--vocab-file", default=os.path.join(
      ft.SHARED, "vocab", "bert-base-uncased-vocab.txt"))
  p.add_argument("--json", default="")
  args = p.parse_args(argv)
  args.levers = tuple(ft.split(args.levers))
  for lever in args.levers:
    if lever not in LEVERS:
      p.error(f"unknown lever {lever} (known: {', '.join(LEVERS)})")
  # What make_runner reads beyond these.
  args.eval_examples, args.squad_eval_examples = 32, 4
  return args


def main(argv=None):
  args = parse_args(argv)
  machine = cpu_kind()
  print(f"{machine}; TensorFlow {tf.__version__}; {args.size}, batch "
        f"{args.batch_size}, {args.steps} steps a loop, {args.loops} loops",
        flush=True)
  results = {}
  with scratch("finetune_levers_") as work_dir:
    ft.prepare(args, work_dir)
    for seq in (int(s) for s in ft.split(args.seq_lens)):
      results[seq] = measure(seq, args)
      for name, r in results[seq].items():
        print(f"seq {seq:<4} {name:<16} {r['steps_per_s']:7.3f} steps/s  "
              f"default/this paired median {r['paired_ratio_median']:.3f}x"
              f"; first call +{r['first_call_extra_s']:.1f} s  [{machine}]",
              flush=True)
  write_json(args.json, dict(machine=machine, settings=dict(
      size=args.size, batch=args.batch_size, steps=args.steps,
      loops=args.loops), results={str(k): v for k, v in results.items()}))


if __name__ == "__main__":
  main()
