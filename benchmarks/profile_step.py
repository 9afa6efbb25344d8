"""Where one ELECTRA train step's time goes: a per-op profile by category.

  python benchmarks/profile_step.py [--size small] [--batch 32]
      [--precision bfloat16] [--top 20] [--json out.json]
      [--hparams configs/electric_tiny.json]  # another objective's step
      [--forward]  # instead: a fine-tuned model's GLUE dev forward
      [--finetune]  # instead: the GLUE fine-tuning train step

Runs our Trainer's compiled train loop (as benchmarks/pretrain_throughput.py
does) under the TensorFlow profiler with one inter-op thread, so ops run one
at a time and their times add up to the step (each still uses every core).
Every op is put in one category (matmul, dropout, GELU, LayerNorm, ...) by
its name in the graph; the table shows ms per step and share. Run the
throughput benchmark beside it for the step time without the profiler.
`--forward` profiles the SST-2 dev rows' forward passes instead, as
benchmarks/finetune_throughput.py times them ("step" = one batch);
`--finetune` run_finetuning.py's train step on SST-2 rows at --seq-len
(benchmarks/finetune_levers.py's default; --precision float32 there).
"""

import collections
import glob
import json
import os
import re
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

from benchmarks import step_parser  # noqa: E402
from benchmarks import write_json  # noqa: E402
from util.machine import cpu_kind  # noqa: E402
from util.tf_quiet import import_tensorflow  # noqa: E402

tf = import_tensorflow()

# First match wins; patterns see "graph/name/of/op:OpType".
CATEGORIES = (
    # A fused MatMul (float32's remapper: + BiasAdd, GELU) is named by the
    # last op it absorbed, so it is matched by its type.
    ("matmul (fused: + bias, GELU)", r":_Mkl(Native)?Fused(Batch)?MatMul"),
    ("matmul", r":_Mkl(Batch)?MatMul|:(Batch)?MatMul"),
    ("dropout", r"dropout"),
    ("GELU", r"intermediate(_\d+)?/(Gelu|Cast)"),
    ("LayerNorm", r"LayerNorm"),
    ("attention softmax/mask", r"/attention(_\d+)?/"),
    ("bias add + grad", r":BiasAdd"),
    ("MLM loss + sampling", r"Multinomial|SparseSoftmax|ArgMax|categorical"),
    ("optimizer", r"adam_w|lamb|AssignVariable|AssignSub|AssignAdd"),
    ("residual/grad sums", r":(AddN|AddV2)$"),
)
NOT_OPS = ("ThreadpoolListener", "ExecutorState", "ParallelFor")


def profile_trainer(args, work_dir):
  """Writes a profile of `args.steps` steps; returns (xplane, step_s)."""
  from pretrain import config as configure_pretraining
  from benchmarks import pretrain_throughput as throughput
  from pretrain.trainer import Trainer

  tfrecords = throughput.write_synthetic_data(work_dir, args.seq_len,
                                              args.vocab_size)
  hparams = [a for h in args.hparams for a in ("--hparams", h)]
  config = configure_pretraining.load_config([
      "--hparams", os.path.join(ROOT, "configs", f"electra_{args.size}.json"),
      *hparams, "--pretrain-tfrecords", tfrecords,
      "--model-dir", work_dir + "/model",
      "--max-seq-length", str(args.seq_len),
      "--train-batch-size", str(args.batch),
      "--mixed-precision", args.precision,
      "--iterations-per-loop", str(args.steps)])
  trainer = Trainer(config)
  iterator = iter(trainer._distributed_dataset(args.batch, True))
  loop = trainer._build_train_loop()

  def run():
    start = time.perf_counter()
    float(loop(iterator, tf.constant(args.steps, tf.int32))["loss"])
    return (time.perf_counter() - start) / args.steps

  run()  # trace
  step_s = min(run() for _ in range(2))
  logdir = os.path.join(work_dir, "profile")
  tf.profiler.experimental.start(
      logdir, options=tf.profiler.experimental.ProfilerOptions(
          host_tracer_level=3))  # level 3 keeps each op's graph name
  run()
  tf.profiler.experimental.stop()
  return glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)[0], step_s


def profile_forward(args, work_dir):
  """Writes a profile of the GLUE dev forward (finetune_throughput.py's
  `forward`: --batch rows a batch, --steps batches); returns (xplane,
  seconds a batch)."""
  from benchmarks import finetune_throughput as throughput
  ft = throughput.prepare(throughput.parse_args([
      "--size", args.size, "--batch-size", str(args.batch), "--seq-len",
      str(args.seq_len), "--vocab-size", str(args.vocab_size),
      "--eval-examples", str(args.batch * args.steps)]), work_dir)
  runner = throughput.make_runner("glue", args.precision, ft)
  side = throughput.build_ours("glue", args.precision, ft,
                               throughput.train_features(runner, ft))
  side["forward"]()  # trace
  batch_s = min(side["forward"]() for _ in range(2)) / args.steps
  logdir = os.path.join(work_dir, "profile")
  tf.profiler.experimental.start(
      logdir, options=tf.profiler.experimental.ProfilerOptions(
          host_tracer_level=3))
  side["forward"]()
  tf.profiler.experimental.stop()
  return glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)[0], batch_s


def profile_finetune(args, work_dir):
  """Writes a profile of `args.steps` GLUE fine-tuning train steps
  (finetune_levers.py's default: run_finetuning.py's step on SST-2 rows at
  --seq-len); returns (xplane, step_s)."""
  from benchmarks import finetune_levers as levers
  from benchmarks import finetune_throughput as throughput
  ft = levers.parse_args(["--size", args.size, "--batch-size",
                          str(args.batch), "--steps", str(args.steps),
                          "--vocab-size", str(args.vocab_size)])
  ft.seq_len = args.seq_len
  throughput.prepare(ft, work_dir)
  train, _ = levers.build(
      "bfloat16" if args.precision == "bfloat16" else "default", ft)
  step_s = min(train()[0] for _ in range(2)) / args.steps
  logdir = os.path.join(work_dir, "profile")
  tf.profiler.experimental.start(
      logdir, options=tf.profiler.experimental.ProfilerOptions(
          host_tracer_level=3))
  train()
  tf.profiler.experimental.stop()
  return glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)[0], step_s


def op_times(xplane):
  """{(graph name, op type): total microseconds} from the trace."""
  from tensorflow.python.profiler.internal import _pywrap_profiler_plugin
  data, _ = _pywrap_profiler_plugin.xspace_to_tools_data(
      [xplane], "trace_viewer@", {})
  trace = json.loads(data)
  frames = trace.get("stackFrames", {})
  times = collections.Counter()
  for event in trace["traceEvents"]:
    if (event.get("ph") != "X" or "sf" not in event or
        event["name"].startswith(NOT_OPS)):
      continue
    name = frames.get(str(event["sf"]), {}).get("name", "?").split(":")[0]
    times[(name, event["name"])] += event["dur"]
  return times


def categorise(times):
  by_category = collections.Counter()
  for (name, op), us in times.items():
    key = f"{name}:{op}"
    category = next((c for c, pattern in CATEGORIES
                     if re.search(pattern, key)), "other elementwise")
    by_category[category] += us
  return by_category


def short(name):
  """layer_7_1/... -> layer_#/...: one row per op across layers."""
  name = re.sub(r"_\d+(?=/|$)", "", name)
  name = re.sub(r"layer_\d+", "layer_#", name)
  return name.split("StatefulPartitionedCall/")[-1]


def main(argv=None):
  p = step_parser(__doc__)
  p.add_argument("--steps", type=int, default=2)
  p.add_argument("--top", type=int, default=20, help="ops listed by name")
  p.add_argument("--hparams", action="append", default=[],
                 help="more hparams (JSON file or string), e.g. another "
                 "objective's config; later ones win")
  p.add_argument("--json", help="write the categories here")
  p.add_argument("--forward", action="store_true",
                 help="the GLUE dev forward of a fine-tuned model instead")
  p.add_argument("--finetune", action="store_true",
                 help="the GLUE fine-tuning train step instead")
  args = p.parse_args(argv)
  tf.config.threading.set_inter_op_parallelism_threads(1)
  with tempfile.TemporaryDirectory() as work_dir:
    profile = (profile_forward if args.forward else profile_finetune
               if args.finetune else profile_trainer)
    xplane, step_s = profile(args, work_dir)
    times = op_times(xplane)
  total = sum(times.values()) / args.steps
  what = "dev forward batch" if args.forward else "step"
  print(f"{args.size} batch {args.batch} {args.precision}, one inter-op "
        f"thread, {cpu_kind()}: {step_s * 1e3:.0f} ms/{what} unprofiled, "
        f"{total / 1e3:.0f} ms/{what} of ops profiled")
  table = {}
  for category, us in categorise(times).most_common():
    ms = us / args.steps / 1e3
    table[category] = ms
    print(f"  {category:<24} {ms:8.1f} ms/{what} "
          f"{us / args.steps / total:6.1%}")
  rows = collections.Counter()
  for (name, op), us in times.items():
    rows[f"{op}  {short(name)}"] += us / args.steps / 1e3
  print(f"top {args.top} ops (summed over layers):")
  for row, ms in rows.most_common(args.top):
    print(f"  {ms:7.1f} ms  {row[:110]}")
  write_json(args.json, dict(step_ms=step_s * 1e3, profiled_ms=total / 1e3,
                             categories_ms=table, setting=vars(args)))


if __name__ == "__main__":
  main()
