"""Fine-tuning throughput: our GLUE and SQuAD train steps and dev-set
evaluation beside Hugging Face transformers on PyTorch CPU, in one process.

  python benchmarks/finetune_throughput.py [--size small] [--tasks glue,squad]
      [--batch-size 32] [--seq-len 128] [--squad-seq-len 384] [--steps 2]
      [--squad-steps 1] [--loops 3] [--precisions float32,bfloat16]
      [--eval-examples 128] [--squad-eval-examples 32] [--torch-threads 0]
      [--tf-threads 0] [--json out.json]

  quick check:  --steps 1 --loops 1 --batch-size 4 --seq-len 32
                --squad-seq-len 96 --eval-examples 16 --squad-eval-examples 4

Both sides start from the same randomly initialised encoder (speed does not
depend on the weights): a transformers `ElectraForPreTraining` of the
preset's sizes (model/config.py; small = ELECTRA-Small, 12 x 256) saved
with `save_pretrained`, which ours loads through its own transformers
import (`--init-checkpoint DIR`, loading/sources.py).

ours  finetune/trainer.py as run_finetuning.py runs it: FinetuningRunner
      (config, tokenizer, task, model + head built and the encoder loaded
      by `_build`), create_optimizer (layer-wise AdamW, warmup + decay),
      the runner's own compiled `_train_step` (loss, gradients, clipping,
      optimizer) fed by its `_batches` (tf.data); evaluation is the
      runner's `predict` on the dev split (the task's scorer fed, as in a
      run; SQuAD: its head's beam search included). Precision is the
      `mixed_precision` hparam (float32 / bfloat16).
hf    `ElectraForSequenceClassification` / `ElectraForQuestionAnswering`
      loaded from that directory, torch AdamW + clip_grad_norm_(1.0) + a
      linear warmup schedule, as transformers' Trainer steps; bfloat16 is
      torch.autocast. Evaluation: forward under inference_mode, logits to
      NumPy (argmax for GLUE), nothing else.

Train batches: random ids, every position real (input_mask all ones), the
task's other inputs from its real featurized rows, the same arrays for both
sides. Evaluation: the real dev rows (GLUE: SST-2 dev, padded to --seq-len
as the task featurizes; SQuAD 1.1 dev, windows of --squad-seq-len) for both.
Both sides of a (task, precision) are built, warmed up (untimed steps and
one forward pass: tracing, compiling), then timed alternately loop by loop
(ours, transformers, ours, ...), so that a change in a shared machine's
load falls on both; each figure is the best of --loops. Each side's best
precision is its figure, and the summary prints ours / transformers per
step with the CPU kind (util.machine.cpu_kind), and per precision the
median over loops of the paired ratio (the two sides' timings of one loop,
taken back to back), the steadier figure on a loaded machine. Three
figures per task:
  train         steps/s of the train step
  eval          examples/s of a dev-set evaluation as each side runs it;
                ours is Predictor.predict, timed once, as a run's first
                evaluation: its step is traced then, once per run (later
                trials reuse it; benchmarks/eval_per_trial.py)
                (transformers: = eval_forward)
  eval_forward  the dev rows' forward passes alone, warm (ours: predict's
                step function traced once; transformers: = eval)
`--json` writes {"machine", "summary": {task: {train|eval|eval_forward:
{ours, hf: {value, precision}, ratio, paired_ratio_median: {precision:
ratio}}}}, "entries": [...], "settings"}.
"""

import argparse
import contextlib
import os
import platform
import shutil
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run as a script: make the repo importable
  sys.path.insert(0, ROOT)

from benchmarks import OMP_WAIT_POLICIES  # noqa: E402
from benchmarks import scratch  # noqa: E402
from benchmarks import set_omp_wait_policy  # noqa: E402
from benchmarks import write_json  # noqa: E402

import numpy as np  # noqa: E402
from util.machine import cpu_kind  # noqa: E402
from util.tf_quiet import import_tensorflow  # noqa: E402

tf = import_tensorflow(with_text=True)

SHARED = os.path.join(os.path.dirname(ROOT), "shared", "data")
TASKS = {"glue": "sst", "squad": "squadv1"}  # --tasks -> our task name
SQUAD_DEV = os.path.join(SHARED, "squad", "dev-v1.1.json")
TRAIN_ROWS = 4  # batches of distinct random rows the train steps cycle over


# ------------------------------------------------------------- set-up
def hf_config(size, vocab_size):
  """A transformers ElectraConfig of our preset's sizes."""
  import transformers
  from interop import hf
  from model import config as model_config
  return transformers.ElectraConfig(**hf.config_fields(
      model_config.get_model_config(size, vocab_size)))


def write_pretrained(work_dir, args):
  """A random ElectraForPreTraining saved as transformers saves it, with
  the BERT vocabulary: the one starting point of both sides."""
  import torch
  import transformers
  torch.manual_seed(0)
  path = os.path.join(work_dir, "pretrained")
  transformers.ElectraForPreTraining(hf_config(args.size, args.vocab_size)
                                     ).save_pretrained(path)
  shutil.copy(args.vocab_file, os.path.join(path, "vocab.txt"))
  return path


def prepare(args, work_dir):
  """`args` with both sides' one starting point written to `work_dir`: the
  random pretrained model and the raw task data."""
  args.work_dir = work_dir
  args.pretrained = write_pretrained(work_dir, args)
  args.raw_dir = write_raw_data(work_dir)
  return args


def write_raw_data(work_dir):
  """DATA/finetuning_data-style folder: SST-2 (the shared GLUE copy) and
  SQuAD 1.1 (no train set is shared: its dev file serves as both)."""
  raw = os.path.join(work_dir, "raw")
  os.makedirs(os.path.join(raw, "squadv1"))
  os.symlink(os.path.join(SHARED, "glue", "SST-2"), os.path.join(raw, "sst"))
  for split in ("train", "dev"):
    os.symlink(SQUAD_DEV, os.path.join(raw, "squadv1", f"{split}.json"))
  return raw


def task_settings(kind, args):
  seq = args.seq_len if kind == "glue" else args.squad_seq_len
  hp = dict(max_seq_length=seq, eval_examples_limit=(
      args.eval_examples if kind == "glue" else args.squad_eval_examples))
  if kind == "squad":
    hp.update(max_query_length=min(64, seq // 4), doc_stride=min(128,
                                                                  seq // 3))
    if getattr(args, "qa_head", ""):  # default: the config's (the beam's)
      hp.update(qa_head=args.qa_head)
  return seq, hp


def make_runner(kind, precision, args):
  """Our FinetuningRunner, configured as run_finetuning.py would be."""
  from finetune.config import FinetuningConfig
  from finetune.trainer import FinetuningRunner
  seq, hp = task_settings(kind, args)
  config = FinetuningConfig(
      init_checkpoint=args.pretrained, task_names=TASKS[kind],
      raw_data_dir=args.raw_dir, output_dir=os.path.join(args.work_dir,
                                                         "out"),
      vocab_file=args.vocab_file, mixed_precision=precision,
      train_batch_size=args.batch_size, eval_batch_size=args.batch_size,
      learning_rate=3e-4, layerwise_lr_decay=0.8, overwrite=True,
      train_examples_limit=args.batch_size * TRAIN_ROWS, **hp)
  return FinetuningRunner(config)


def train_features(runner, args):
  """The task's real train rows (model inputs only), tiled to TRAIN_ROWS
  batches, with random ids at every position and input_mask all ones."""
  from finetune.featurization import model_inputs
  task = runner.tasks[0]
  _, rows = runner.data.examples_and_features(task, "train")
  rows = model_inputs(rows)
  n = args.batch_size * TRAIN_ROWS
  take = np.arange(n) % len(rows["input_ids"])
  out = {k: v[take] for k, v in rows.items()}
  rng = np.random.default_rng(0)
  out["input_ids"] = rng.integers(1000, args.vocab_size, out["input_ids"].shape
                                  ).astype(np.int32)
  out["input_mask"] = np.ones_like(out["input_mask"])
  return out


# ------------------------------------------------------------- sides
# A side is a dict of callables: train(steps) -> (seconds, loss),
# evaluate() -> seconds (a dev-set evaluation as the side runs it) and
# forward() -> seconds (the dev rows' forward passes alone, warm), plus
# its dev counts. Both sides of a (task, precision) are built first and
# then timed alternately, loop by loop, so that a change in the shared
# machine's load falls on both.


def build_ours(kind, precision, args, features):
  """Our fine-tuning code path, built as run_finetuning.py builds it."""
  import keras
  from finetune.optimization import create_optimizer
  from finetune.featurization import model_inputs
  keras.backend.clear_session()
  runner = make_runner(kind, precision, args)  # sets the dtype policy
  task = runner.tasks[0]
  model = runner._build(runner.config.seed)  # noqa: SLF001
  config = runner.config
  # The encoder's TransformerConfig (named encoder_config before).
  shape = getattr(runner, "model_config", None) or runner.encoder_config
  optimizer = create_optimizer(  # as FinetuningRunner.train
      config, model.trainable_variables, shape.num_hidden_layers, 10_000,
      shape.share_layers)
  batches = runner.data.batches(features, config.train_batch_size,
                                config.seed)
  step = runner._train_step(model, optimizer, task.name,  # noqa: SLF001
                            batches.element_spec)
  # The dev split is featurized once per run (untimed here).
  examples, rows = runner.data.examples_and_features(task, "dev")
  inputs = model_inputs(rows)
  n, b = len(inputs["input_ids"]), config.eval_batch_size

  def train(steps):
    start = time.perf_counter()
    for _ in range(steps):
      loss = float(step(next(batches)))  # as FinetuningRunner.train
    return time.perf_counter() - start, loss

  def evaluate():
    """runner.predictor.predict, as each dev-set evaluation of a run: its
    step is traced once per run (here by the warm-up call), then reused."""
    with contextlib.redirect_stdout(open(os.devnull, "w")):
      start = time.perf_counter()
      scorer, _ = runner.predictor.predict(model, task, "dev")
      seconds = time.perf_counter() - start
    assert len(next(iter(scorer.collected().values()))) == n
    return seconds

  @tf.function(reduce_retracing=True)
  def eval_step(batch):  # predict's own step, traced once
    loss, outputs = model(batch, task_name=task.name, training=False)
    return dict(outputs, loss=loss)

  def forward():
    start = time.perf_counter()
    for begin in range(0, n, b):
      {k: v.numpy() for k, v in eval_step({k: v[begin:begin + b] for k, v in
                                            inputs.items()}).items()}
    return time.perf_counter() - start

  return dict(train=train, evaluate=evaluate, forward=forward,
              eval_examples=len(examples), eval_rows=n, runner=runner,
              model=model, task=task)


def hf_model_class(kind):
  import transformers
  return (transformers.ElectraForSequenceClassification if kind == "glue"
          else transformers.ElectraForQuestionAnswering)


def hf_inputs(rows, begin, end):
  import torch
  return dict(
      input_ids=torch.from_numpy(rows["input_ids"][begin:end].astype(
          np.int64)),
      attention_mask=torch.from_numpy(rows["input_mask"][begin:end].astype(
          np.int64)),
      token_type_ids=torch.from_numpy(rows["segment_ids"][begin:end].astype(
          np.int64)))


def hf_labels(kind, rows, begin, end):
  import torch
  if kind == "glue":
    return dict(labels=torch.from_numpy(
        rows["label_ids"][begin:end].astype(np.int64)))
  return dict(
      start_positions=torch.from_numpy(
          rows["start_positions"][begin:end].astype(np.int64)),
      end_positions=torch.from_numpy(
          rows["end_positions"][begin:end].astype(np.int64)))


def build_hf(kind, precision, args, features, dev_rows, dev_examples):
  """The same step and evaluation in transformers on PyTorch CPU."""
  import torch
  import transformers
  torch.set_num_threads(args.torch_threads or os.cpu_count())
  torch.manual_seed(0)
  model = hf_model_class(kind).from_pretrained(
      args.pretrained, **({"num_labels": 2} if kind == "glue" else {}))
  optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4,
                                weight_decay=0.0, eps=1e-6)
  schedule = transformers.get_linear_schedule_with_warmup(optimizer, 1000,
                                                          10_000)
  autocast = (torch.autocast("cpu", dtype=torch.bfloat16)
              if precision == "bfloat16" else contextlib.nullcontext())
  n, b = len(features["input_ids"]), args.batch_size
  batches = [(dict(hf_inputs(features, i, i + b),
                   **hf_labels(kind, features, i, i + b)))
             for i in range(0, n, b)]
  counter = [0]

  def train(steps):
    model.train()
    start = time.perf_counter()
    for _ in range(steps):
      batch = batches[counter[0] % len(batches)]
      counter[0] += 1
      with autocast:
        loss = model(**batch).loss
      optimizer.zero_grad(set_to_none=True)
      loss.backward()
      torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
      optimizer.step()
      schedule.step()
      value = float(loss.detach())
    return time.perf_counter() - start, value

  rows = len(dev_rows["input_ids"])

  def evaluate():
    model.eval()
    out = []
    start = time.perf_counter()
    with torch.inference_mode(), autocast:
      for i in range(0, rows, b):
        o = model(**hf_inputs(dev_rows, i, i + b))
        if kind == "glue":
          out.append(o.logits.float().argmax(-1).numpy())
        else:
          out.append((o.start_logits.float().numpy(),
                      o.end_logits.float().numpy()))
    return time.perf_counter() - start

  # Its evaluation is its forward passes: nothing to trace.
  return dict(train=train, evaluate=evaluate, forward=evaluate,
              eval_examples=dev_examples, eval_rows=rows, model=model,
              autocast=autocast)


def release_memory():
  """Hands freed heap back to the system between the sides' timings (not
  inside them): TensorFlow's and PyTorch's activations of a SQuAD step
  (GBs each) would otherwise both stay resident in this one process."""
  import ctypes
  import gc
  gc.collect()
  try:
    ctypes.CDLL("libc.so.6").malloc_trim(0)
  except (OSError, AttributeError):
    pass


def time_sides(kind, sides, args):
  """{impl: figures}: warmup, then train loops and forward loops
  alternating between the sides (ours, transformers, ours, ...); the best
  loop of each counts, and ours also gets the median over loops of the
  paired ratio (transformers' seconds / ours in the same loop)."""
  steps = args.steps if kind == "glue" else args.squad_steps
  out = {impl: {} for impl in sides}
  for impl, side in sides.items():
    out[impl]["warmup_s"] = side["train"](args.warmup_steps)[0]
    side["forward"]()  # traces ours' eval step; warms transformers'
    release_memory()
  times = {impl: dict(train=[], evaluate=[], forward=[]) for impl in sides}
  for _ in range(args.loops):
    for impl, side in sides.items():
      seconds, out[impl]["loss"] = side["train"](steps)
      times[impl]["train"].append(seconds)
      release_memory()
  for impl, side in sides.items():  # ours: a run's first evaluation
    if side["evaluate"] is not side["forward"]:
      times[impl]["evaluate"].append(side["evaluate"]())
  for _ in range(args.loops):
    for impl, side in sides.items():
      times[impl]["forward"].append(side["forward"]())
  for impl, side in sides.items():
    t = times[impl]
    t["evaluate"] = t["evaluate"] or t["forward"]
    best = {k: min(v) for k, v in t.items()}
    ex, rows = side["eval_examples"], side["eval_rows"]
    out[impl].update(
        train_steps_per_s=steps / best["train"],
        train_examples_per_s=steps * args.batch_size / best["train"],
        train_s=t["train"], eval_examples=ex, eval_rows=rows,
        eval_examples_per_s=ex / best["evaluate"],
        eval_rows_per_s=rows / best["evaluate"],
        eval_forward_examples_per_s=ex / best["forward"],
        eval_s=t["evaluate"], forward_s=t["forward"])
  if "ours" in sides:
    out["ours"]["eval_predict_overhead_s"] = (
        min(times["ours"]["evaluate"]) - min(times["ours"]["forward"]))
  if len(sides) == 2:
    for phase in ("train", "forward"):
      paired = [h / o for o, h in zip(times["ours"][phase],
                                      times["hf"][phase])]
      out["ours"][f"{phase}_paired_ratios"] = paired
      out["ours"][f"{phase}_paired_ratio_median"] = float(np.median(paired))
  return out


# ------------------------------------------------------------------ main
def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--size", default="small", help="model preset (tiny, "
                 "small = ELECTRA-Small, base, large)")
  p.add_argument("--tasks", default="glue,squad",
                 help="comma list of glue (SST-2), squad (SQuAD 1.1)")
  p.add_argument("--batch-size", type=int, default=32)
  p.add_argument("--seq-len", type=int, default=128, help="GLUE")
  p.add_argument("--squad-seq-len", type=int, default=384)
  p.add_argument("--steps", type=int, default=2,
                 help="train steps per timed loop (GLUE)")
  p.add_argument("--squad-steps", type=int, default=1,
                 help="train steps per timed loop (SQuAD)")
  p.add_argument("--loops", type=int, default=3,
                 help="timed loops (train and forward), alternating "
                      "between the sides; the fastest counts")
  p.add_argument("--warmup-steps", type=int, default=1)
  p.add_argument("--precisions", default="float32,bfloat16")
  p.add_argument("--implementations", default="ours,hf")
  p.add_argument("--eval-examples", type=int, default=128,
                 help="GLUE dev examples evaluated (0 = all 872)")
  p.add_argument("--squad-eval-examples", type=int, default=32,
                 help="SQuAD dev questions evaluated (0 = all 10,570)")
  p.add_argument("--torch-threads", type=int, default=0,
                 help="PyTorch intra-op threads (0 = os.cpu_count())")
  p.add_argument("--tf-threads", type=int, default=0,
                 help="TensorFlow intra-op threads (0 = TF's default)")
  p.add_argument("--omp-wait-policy", default="passive",
                 choices=OMP_WAIT_POLICIES,
                 help="PyTorch's OpenMP wait policy (benchmarks/__init__.py;"
                      " passive: its best on a loaded machine, where these "
                      "figures were measured; default: on a quiet one)")
  p.add_argument("--vocab-size", type=int, default=30522)
  p.add_argument("--vocab-file", default=os.path.join(
      SHARED, "vocab", "bert-base-uncased-vocab.txt"))
  p.add_argument("--json", default="")
  return p.parse_args(argv)


def split(text):
  return [t.strip() for t in text.split(",") if t.strip()]


def summarize(entries, tasks):
  """Per task and phase: each side's best precision and ours / hf."""
  summary = {}
  for kind in tasks:
    summary[kind] = {}
    for phase, key in (("train", "train_steps_per_s"),
                       ("eval", "eval_examples_per_s"),
                       ("eval_forward", "eval_forward_examples_per_s")):
      best = {}
      for impl in ("ours", "hf"):
        found = [e for e in entries if e["task"] == kind and
                 e["impl"] == impl and key in e]
        if found:
          top = max(found, key=lambda e: e[key])
          best[impl] = dict(value=top[key], precision=top["precision"])
      if best:
        summary[kind][phase] = dict(
            metric=key, **{k: v for k, v in best.items()},
            ratio=(best["ours"]["value"] / best["hf"]["value"]
                   if len(best) == 2 else None))
      # Same precision both sides, loop by loop: the median paired ratio.
      paired = {e["precision"]: e[f"{PAIRED[phase]}_paired_ratio_median"]
                for e in entries if e["task"] == kind and
                e["impl"] == "ours" and
                f"{PAIRED[phase]}_paired_ratio_median" in e}
      if paired and phase in summary[kind]:
        summary[kind][phase]["paired_ratio_median"] = paired
  return summary


PAIRED = {"train": "train", "eval": "forward", "eval_forward": "forward"}


def print_summary(summary, entries, args, machine):
  print(f"\n{'task':<6} {'impl':<5} {'precision':<9} {'train steps/s':>13} "
        f"{'train ex/s':>10} {'eval ex/s':>10} {'eval rows/s':>11} "
        f"{'fwd ex/s':>9}   "
        f"[{machine}]")
  for e in entries:
    if "error" in e:
      print(f"{e['task']:<6} {e['impl']:<5} {e['precision']:<9} error: "
            f"{e['error']}")
      continue
    print(f"{e['task']:<6} {e['impl']:<5} {e['precision']:<9} "
          f"{e['train_steps_per_s']:13.3f} {e['train_examples_per_s']:10.2f} "
          f"{e['eval_examples_per_s']:10.2f} {e['eval_rows_per_s']:11.2f} "
          f"{e['eval_forward_examples_per_s']:9.2f}")
  print(f"\nsummary: ours / transformers (PyTorch CPU), each side's best "
        f"precision; {args.size} preset, batch {args.batch_size}; "
        f"CPU: {machine}\n  (train: steps/s of the train step; eval: "
        "examples/s of a dev-set evaluation as the runner does it, ours "
        "incl. its step's one trace per run; eval_forward: the "
        "forward passes alone, warm)")
  for kind, phases in summary.items():
    seq = args.seq_len if kind == "glue" else args.squad_seq_len
    for phase, s in phases.items():
      unit = "steps/s" if phase == "train" else "examples/s"
      ours, hf = s.get("ours"), s.get("hf")
      fmt = lambda b: (f"{b['value']:.3f} {unit} ({b['precision']})"  # noqa
                       if b else "-")
      ratio = f"{s['ratio']:.2f}x" if s["ratio"] else "-"
      paired = ""
      if phase != "eval" and s.get("paired_ratio_median"):
        paired = "; paired, median over loops: " + ", ".join(
            f"{p} {r:.2f}x" for p, r in s["paired_ratio_median"].items())
      print(f"  {kind:<5} seq {seq:<4} {phase:<12}: ours {fmt(ours)}, "
            f"transformers {fmt(hf)}, ours/transformers {ratio}{paired}  "
            f"[{machine}]")


def fmt_ratios(ratios):
  return (" ".join(f"{r:.2f}x" for r in ratios) +
          f" (median {np.median(ratios):.2f}x)")


def trace_note(entry):
  """Ours: the seconds a run's first predict() spends beyond its forward
  passes (mostly its step's trace, once per run)."""
  if entry["impl"] != "ours":
    return ""
  return (f"; the first evaluation's trace etc. "
          f"~{entry['eval_predict_overhead_s']:.1f} s")


def main(argv=None):
  args = parse_args(argv)
  policy = set_omp_wait_policy(args.omp_wait_policy)
  if args.tf_threads:
    tf.config.threading.set_intra_op_parallelism_threads(args.tf_threads)
  import transformers
  import torch
  transformers.logging.set_verbosity_error()
  machine = cpu_kind()
  print(f"{machine}; TensorFlow {tf.__version__}, torch {torch.__version__}, "
        f"transformers {transformers.__version__}, Python "
        f"{platform.python_version()}; threads: TF "
        f"{args.tf_threads or 'default'}, torch "
        f"{args.torch_threads or os.cpu_count()} (OMP_WAIT_POLICY "
        f"{policy})", flush=True)
  tasks = split(args.tasks)
  for kind in tasks:
    if kind not in TASKS:
      sys.exit(f"error: unknown task {kind} (known: {', '.join(TASKS)})")
  entries = []
  with scratch("finetune_throughput_") as work_dir:
    prepare(args, work_dir)
    for kind in tasks:
      seq, _ = task_settings(kind, args)
      # The rows both sides train and evaluate on, from our featurization.
      runner = make_runner(kind, "float32", args)
      features = train_features(runner, args)
      dev_examples, dev_rows = runner.data.examples_and_features(
          runner.tasks[0], "dev")
      del runner
      print(f"{kind} ({TASKS[kind]}): seq {seq}, batch {args.batch_size}, "
            f"dev {len(dev_examples)} examples = {len(dev_rows['input_ids'])}"
            f" rows", flush=True)
      for precision in split(args.precisions):
        impls = split(args.implementations)
        unknown = [i for i in impls if i not in ("ours", "hf")]
        if unknown:
          sys.exit(f"error: unknown implementation {unknown[0]}")
        base = dict(task=kind, precision=precision, seq_len=seq,
                    batch=args.batch_size, size=args.size)
        try:
          sides = {}
          if "ours" in impls:
            sides["ours"] = build_ours(kind, precision, args, features)
          if "hf" in impls:
            sides["hf"] = build_hf(kind, precision, args, features,
                                   dev_rows, len(dev_examples))
          figures = time_sides(kind, sides, args)
          del sides
        except Exception as e:  # one failed setting keeps the others
          error = f"{type(e).__name__}: {str(e)[:300]}"
          print(f"  {precision}: {error}", flush=True)
          entries += [dict(base, impl=i, error=error) for i in impls]
          continue
        for impl in impls:
          entry = dict(base, impl=impl, **figures[impl])
          entries.append(entry)
          print(f"  {impl:<4} {precision:<8}: train "
                f"{entry['train_steps_per_s']:.3f} steps/s (warmup "
                f"{entry['warmup_s']:.0f}s, loss {entry['loss']:.3f}), eval "
                f"{entry['eval_examples_per_s']:.2f} examples/s (forward "
                f"alone {entry['eval_forward_examples_per_s']:.2f}"
                f"{trace_note(entry)})  [{machine}]", flush=True)
        ours = figures.get("ours", {})
        if "train_paired_ratios" in ours:
          print(f"  paired ours/transformers ({precision}), loop by loop: "
                f"train {fmt_ratios(ours['train_paired_ratios'])}, "
                f"forward {fmt_ratios(ours['forward_paired_ratios'])}  "
                f"[{machine}]", flush=True)
    summary = summarize(entries, tasks)
    print_summary(summary, entries, args, machine)
    result = dict(machine=machine, summary=summary, entries=entries,
                  settings={k: v for k, v in vars(args).items()
                            if k not in ("work_dir", "pretrained",
                                         "raw_dir")})
    write_json(args.json, result)
    return result


if __name__ == "__main__":
  main()
