"""End-to-end fine-tuning: one epoch plus the dev evaluation, wall time from
a fresh process's start to its results file, ours (run_finetuning.py)
against transformers' Trainer at its best, GLUE task by task.

  python benchmarks/finetune_e2e.py [--tasks cola,sst,mrpc,sts,rte]
      [--size small] [--train-examples 0] [--limit sst=2000]
      [--eval-examples 0] [--batch-size 32] [--learning-rate 3e-4]
      [--epochs 1] [--hf-precisions float32,bfloat16]
      [--omp-wait-policy default] [--ours-variants '{"grouped":
      {"group_by_length": 50}}'] [--json out.json] [--md out.md]

  quick check:  --size tiny --tasks cola,rte --train-examples 64
                --eval-examples 64 --hf-precisions float32

Both sides start from one random transformers `ElectraForPreTraining` of
the preset's shape (model/config.py; small = ELECTRA-Small), saved with
`save_pretrained` beside the BERT uncased vocabulary (no download), and
read the shared GLUE TSVs: the first --train-examples train rows (0: all;
--limit task=N per task) and the first --eval-examples dev rows.

ours  `python run_finetuning.py --init-checkpoint DIR` in a subprocess, as
      a user runs it: its defaults (float32, batches padded to their
      longest row, pad_to_multiple 16; evaluation by its inference
      engine), one trial, no kept model, double_unordered false (the
      same rows as transformers'), its own layer-wise lr decay.
hf    this script in a subprocess (`--side hf`): BertTokenizerFast, an
      `ElectraForSequenceClassification`, `Trainer` with
      DataCollatorWithPadding (each batch padded to its longest row),
      AdamW, linear warmup (10%: warmup_steps 0.1) and decay, weight decay 0.01, clipping
      1.0; `trainer.predict` on dev; its faster of float32 and bfloat16
      autocast (--hf-precisions: each is run on the first task, the faster
      runs the rest).

The sides alternate (ours, hf, per task), with libgomp's own OpenMP
policy by default (--omp-wait-policy). Each side's time is from its
process's start to its results file's last write; the dev scores of both
are printed beside the times (the model is random: near chance, but a
fast run that learned nothing worse than the other is visible). The
ceiling: the FLOPs of the encoder's matmuls over transformers' own
batches (train: forward and its two backward products, 3x; dev: forward)
at TensorFlow's measured 2048^3 matmul peak, and what transformers' time
is over it: the most any side could lead by. And the same products each
timed at its own shape, at the fastest of TensorFlow's and PyTorch's
matmuls in float32 and bfloat16 (ShapeTimer: a short batch's products run
far below the peak): the floor of any side that multiplies at those
shapes. Beside it, the optimizer both sides run every step (clipping to
global norm 1.0, then AdamW over the classifier's parameters), timed in
this process at PyTorch's fastest (fused, foreach or per-tensor): with the
shape floor, what no side doing this arithmetic can go under. The record
keeps both sides' batches ([rows, length]), the floors' inputs.
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

from benchmarks import OMP_WAIT_POLICIES  # noqa: E402
from benchmarks import scratch  # noqa: E402
from benchmarks import set_omp_wait_policy  # noqa: E402
from benchmarks import write_json  # noqa: E402

SHARED = os.path.join(os.path.dirname(ROOT), "shared", "data")
VOCAB = os.path.join(SHARED, "vocab", "bert-base-uncased-vocab.txt")
GLUE = {"cola": "CoLA", "sst": "SST-2", "mrpc": "MRPC", "sts": "STS-B",
        "rte": "RTE"}
# (text_a, text_b, label) columns; None: no header (CoLA).
COLUMNS = {"cola": (3, None, 1, False),
           "sst": ("sentence", None, "label", True),
           "mrpc": ("#1 String", "#2 String", "Quality", True),
           "sts": ("sentence1", "sentence2", "score", True),
           "rte": ("sentence1", "sentence2", "label", True)}
LABELS = {"cola": ["0", "1"], "sst": ["0", "1"], "mrpc": ["0", "1"],
          "sts": None, "rte": ["entailment", "not_entailment"]}
METRICS = {"cola": ("mcc",), "sst": ("accuracy",),
           "mrpc": ("accuracy", "f1"), "sts": ("pearson", "spearman"),
           "rte": ("accuracy",)}


# What each side prints as it trains (ours: run_finetuning.py's lines).
PHASES = {"training": ("fine-tuning ", "hf: training"),
          "scored": ("median over ", "hf: scored")}
TRAINED = ("step ", "hf: trained")

# ------------------------------------------------------------- data
def read_glue(task, split, limit):
  """[(text_a, text_b, label)] of the first `limit` rows (0: all), read as
  ours reads them (tab-split, no quoting, blank lines skipped)."""
  a, b, label, header = COLUMNS[task]
  path = os.path.join(SHARED, "glue", GLUE[task], f"{split}.tsv")
  with open(path, encoding="utf-8-sig") as f:
    rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
  names = rows.pop(0) if header else []
  col = lambda key: names.index(key) if isinstance(key, str) else key  # noqa: E731
  rows = rows[:limit] if limit else rows
  return [(r[col(a)], r[col(b)] if b is not None else None, r[col(label)])
          for r in rows]


def hf_config(size):
  """transformers' ElectraConfig of our preset's shape."""
  import transformers
  from interop import hf
  from model import config as model_config
  return transformers.ElectraConfig(**hf.config_fields(
      model_config.get_model_config(size, 30522)))


def write_pretrained(work_dir, size):
  """A random ElectraForPreTraining of our preset's shape, with the BERT
  vocabulary: both sides' one starting point."""
  import shutil
  import torch
  import transformers
  torch.manual_seed(0)
  path = os.path.join(work_dir, "pretrained")
  transformers.ElectraForPreTraining(hf_config(size)).save_pretrained(path)
  shutil.copy(VOCAB, os.path.join(path, "vocab.txt"))
  return path


def raw_data(work_dir):
  raw = os.path.join(work_dir, "raw")
  os.makedirs(raw)
  for task, folder in GLUE.items():
    os.symlink(os.path.join(SHARED, "glue", folder), os.path.join(raw, task))
  return raw


# ------------------------------------------------------------- sides
def run_side(command, results, env):
  """(seconds from the process's start to its results file's last write,
  {phase: seconds from the start}: when its training began and ended, by
  its output's lines)."""
  start = time.time()
  phases, lines = {}, []
  with subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, text=True) as process:
    for line in process.stdout:
      lines.append(line)
      for phase, marks in PHASES.items():
        if any(line.startswith(m) for m in marks):
          phases.setdefault(phase, time.time() - start)
      if line.startswith(TRAINED):
        phases["trained"] = time.time() - start
  if process.returncode or not results():
    raise SystemExit(f"{' '.join(command[:3])} failed:\n"
                     f"{''.join(lines)[-3000:]}")
  return os.path.getmtime(results()) - start, phases


def ours(task, args, out_dir, env, extra=None):
  hparams = dict(
      train_examples_limit=args.limits[task],
      eval_examples_limit=args.eval_examples, train_batch_size=args.batch_size,
      eval_batch_size=args.batch_size, learning_rate=args.learning_rate,
      num_train_epochs=args.epochs, double_unordered=False, keep_model="none",
      max_seq_length=args.max_seq_length, seed=args.seed,
      log_every_steps=10 ** 6)
  if args.pad_to_multiple is not None:
    hparams["pad_to_multiple"] = args.pad_to_multiple
  hparams.update(extra or {})
  command = [sys.executable, os.path.join(ROOT, "run_finetuning.py"),
             "--init-checkpoint", args.pretrained, "--raw-data-dir", args.raw,
             "--vocab-file", os.path.join(args.pretrained, "vocab.txt"),
             "--task-names", task, "--output-dir", out_dir,
             "--hparams", json.dumps(hparams)]

  def results():
    found = [f for f in os.listdir(out_dir) if f.startswith("results_")] if (
        os.path.isdir(out_dir)) else []
    return os.path.join(out_dir, found[0]) if found else None
  seconds, phases = run_side(command, results, env)
  with open(results()) as f:
    summary = json.load(f)["summary"][task]
  return seconds, {m: summary[m]["median"] for m in METRICS[task]}, phases


def hf(task, precision, args, out_dir, env):
  path = os.path.join(out_dir, "results.json")
  command = [sys.executable, os.path.abspath(__file__), "--side", "hf",
             "--task", task, "--precision", precision, "--out", path,
             "--pretrained", args.pretrained,
             "--train-examples", str(args.limits[task]),
             "--eval-examples", str(args.eval_examples),
             "--batch-size", str(args.batch_size),
             "--learning-rate", str(args.learning_rate),
             "--epochs", str(args.epochs), "--seed", str(args.seed),
             "--max-seq-length", str(args.max_seq_length)]
  seconds, phases = run_side(command, lambda: path if os.path.exists(path)
                             else None, env)
  with open(path) as f:
    result = json.load(f)
  return seconds, dict(result, phases=phases)


def hf_main(args):
  """The transformers side, in its own process: tokenize, Trainer.train
  one epoch, Trainer.predict on dev, write the scores."""
  import numpy as np
  import torch
  import transformers
  task = args.task
  tokenizer = transformers.BertTokenizerFast(
      os.path.join(args.pretrained, "vocab.txt"), do_lower_case=True)
  labels = LABELS[task]

  def encode(rows):
    texts = tokenizer([r[0] for r in rows],
                      [r[1] for r in rows] if rows[0][1] is not None
                      else None, truncation=True,
                      max_length=args.max_seq_length)
    gold = [float(r[2]) if labels is None else labels.index(r[2])
            for r in rows]
    return [dict({k: v[i] for k, v in texts.items()}, labels=gold[i])
            for i in range(len(rows))]
  train = encode(read_glue(task, "train", args.train_examples))
  dev = encode(read_glue(task, "dev", args.eval_examples))
  model = transformers.ElectraForSequenceClassification.from_pretrained(
      args.pretrained, num_labels=1 if labels is None else len(labels))
  settings = transformers.TrainingArguments(
      output_dir=os.path.join(os.path.dirname(args.out), "trainer"),
      per_device_train_batch_size=args.batch_size,
      per_device_eval_batch_size=args.batch_size,
      learning_rate=args.learning_rate, num_train_epochs=args.epochs,
      warmup_steps=0.1, weight_decay=0.01, max_grad_norm=1.0,
      adam_epsilon=1e-6, lr_scheduler_type="linear",
      bf16=args.precision == "bfloat16", use_cpu=True, report_to=[],
      save_strategy="no", eval_strategy="no", logging_strategy="no",
      disable_tqdm=True, seed=args.seed, dataloader_num_workers=0)
  trainer = transformers.Trainer(
      model=model, args=settings, train_dataset=train,
      data_collator=transformers.DataCollatorWithPadding(tokenizer))
  print("hf: training", flush=True)
  trainer.train()
  print("hf: trained", flush=True)
  logits = trainer.predict(dev).predictions
  logits = logits[0] if isinstance(logits, tuple) else logits
  gold = np.array([r["labels"] for r in dev])
  scores = score(task, gold, np.asarray(logits, np.float32))
  print("hf: scored", flush=True)
  # The batches' lengths it ran (for the ceiling): train in its own
  # sampler's order is not kept; random batches of its rows, as drawn.
  rng = np.random.default_rng(args.seed)
  train_lengths = np.array([len(r["input_ids"]) for r in train])
  order = rng.permutation(len(train))
  batches = [train_lengths[order[i:i + args.batch_size]]
             for i in range(0, len(order), args.batch_size)]
  dev_lengths = np.array([len(r["input_ids"]) for r in dev])
  dev_batches = [dev_lengths[i:i + args.batch_size]
                 for i in range(0, len(dev), args.batch_size)]
  with open(args.out, "w") as f:
    json.dump(dict(scores=scores, torch=torch.__version__,
                   transformers=transformers.__version__,
                   train_batches=[[len(b), int(b.max())] for b in batches],
                   dev_batches=[[len(b), int(b.max())] for b in dev_batches]),
              f)


def score(task, gold, logits):
  """The dev metrics as ours reports them (x100)."""
  from scipy import stats
  from sklearn import metrics
  if task == "sts":
    pred = logits[:, 0]
    return {"pearson": 100 * stats.pearsonr(gold, pred)[0],
            "spearman": 100 * stats.spearmanr(gold, pred)[0]}
  pred = logits.argmax(-1)
  out = {"accuracy": 100 * metrics.accuracy_score(gold, pred)}
  if task == "cola":
    out = {"mcc": 100 * metrics.matthews_corrcoef(gold, pred)}
  if task == "mrpc":
    out["f1"] = 100 * metrics.f1_score(gold, pred)
  return out


# ------------------------------------------------------------- ceiling
def matmul_flops(size, batches, backward):
  """FLOPs of the encoder's matmuls over batches [(rows, length)]: dense
  layers and attention's two products; x3 with the backward pass."""
  from model.config import get_model_config
  config = get_model_config(size, 30522)
  return sum(2.0 * b * m * k * n for rows, t in batches
             for b, m, k, n in step_matmuls(config, rows, t, backward))


def step_matmuls(config, rows, t, backward):
  """(batch, m, k, n) of each matmul of the encoder on a [rows, t] batch
  (what matmul_flops and shape_floor sum); backward adds each product's two
  gradients (dA = dC B^T, dB = A^T dC)."""
  h, heads = config.hidden_size, config.num_attention_heads
  n = rows * t
  layer = [(1, n, h, h)] * 4 + [(1, n, h, config.intermediate_size),
                                (1, n, config.intermediate_size, h),
                                (rows * heads, t, h // heads, t),
                                (rows * heads, t, t, h // heads)]
  shapes = layer * config.num_hidden_layers
  if config.embedding_size != h:
    shapes.append((1, n, config.embedding_size, h))
  if backward:
    shapes += [g for b, m, k, nn in shapes
               for g in ((b, m, nn, k), (b, k, m, nn))]
  return shapes


class ShapeTimer:
  """Seconds of one matmul of each (batch, m, k, n) in this process, at
  the fastest of TensorFlow's and PyTorch's, each in float32 and
  bfloat16 (a side may run any of them): best of 5 calls of REPEAT
  products (distinct right operands, none folded), over REPEAT."""

  REPEAT = 4
  KINDS = ("tf float32", "tf bfloat16", "torch float32", "torch bfloat16")

  def __init__(self):
    import torch
    from util.tf_quiet import import_tensorflow
    self.tf = tf = import_tensorflow()
    self.torch = torch
    self.seconds = {}  # shape -> {kind: seconds}
    self._fns = {(rank, dtype): tf.function(
        lambda a, *bs: tf.add_n([tf.matmul(a, b)[..., :1, :1] for b in bs]),
        input_signature=[tf.TensorSpec([None] * rank, dtype)] *
        (1 + self.REPEAT)) for rank in (2, 3)
                 for dtype in ("float32", "bfloat16")}

  def __call__(self, shape):
    if shape not in self.seconds:
      self.seconds[shape] = {kind: self._time(shape, kind)
                             for kind in self.KINDS}
    return min(self.seconds[shape].values())

  def _time(self, shape, kind):
    b, m, k, n = shape
    lead = () if b == 1 else (b,)
    library, dtype = kind.split()
    sizes = [lead + (m, k)] + [lead + (k, n)] * self.REPEAT
    if library == "tf":
      tf = self.tf
      args = [tf.cast(tf.random.normal(s), dtype) for s in sizes]
      fn = self._fns[(len(lead) + 2, dtype)]
      call = lambda: fn(*args).numpy()  # noqa: E731
    else:
      torch = self.torch
      args = [torch.randn(s, dtype=getattr(torch, dtype)) for s in sizes]

      def call():
        with torch.no_grad():
          for right in args[1:]:
            torch.matmul(args[0], right)
    call()
    best = float("inf")
    for _ in range(5):
      start = time.perf_counter()
      call()
      best = min(best, time.perf_counter() - start)
    return best / self.REPEAT

  def share(self):
    """{kind: the share of the shapes timed at which it was the fastest}."""
    wins = [min(t, key=t.get) for t in self.seconds.values()]
    return {kind: wins.count(kind) / max(len(wins), 1) for kind in self.KINDS}


def shape_floor(size, batches, backward, timer):
  """Seconds of the encoder's matmuls over batches [(rows, length)], each
  at its own shape's measured speed (matmul_flops' products, not at the
  2048^3 peak: a 23-token CoLA batch's [736, 256] x [256, 256] runs far
  below it)."""
  from model.config import get_model_config
  config = get_model_config(size, 30522)
  return sum(timer(shape) for rows, t in batches
             for shape in step_matmuls(config, rows, t, backward))


def optimizer_step_seconds(size):
  """Seconds of one optimizer step on ELECTRA's classifier of this shape
  (clip to global norm 1.0, then AdamW), at the fastest of PyTorch's
  implementations (best of 20 steps each, random gradients)."""
  import torch
  import transformers
  params = list(transformers.ElectraForSequenceClassification(
      hf_config(size)).parameters())
  for p in params:
    p.grad = torch.randn_like(p)
  best = float("inf")
  for kind in ({"fused": True}, {"foreach": True}, {"foreach": False}):
    adam = torch.optim.AdamW(params, lr=1e-4, eps=1e-6, weight_decay=0.01,
                             **kind)
    for i in range(23):
      start = time.perf_counter()
      torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
      adam.step()
      if i >= 3:  # the first steps allocate the moments
        best = min(best, time.perf_counter() - start)
  return best


def matmul_peak():
  """TensorFlow's FLOP/s on a 2048^3 float32 matmul (best of 10)."""
  from util.tf_quiet import import_tensorflow
  tf = import_tensorflow()
  a, b = tf.random.normal((2048, 2048)), tf.random.normal((2048, 2048))
  fn = tf.function(lambda: tf.reduce_sum(tf.matmul(a, b)[:1, :1]))
  fn()
  best = float("inf")
  for _ in range(10):
    start = time.perf_counter()
    fn().numpy()
    best = min(best, time.perf_counter() - start)
  return 2 * 2048 ** 3 / best


# ------------------------------------------------------------- main
def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--tasks", default="cola,sst,mrpc,sts,rte")
  p.add_argument("--size", default="small")
  p.add_argument("--train-examples", type=int, default=0)
  p.add_argument("--limit", default="",
                 help="per task, e.g. sst=2000,cola=4000")
  p.add_argument("--eval-examples", type=int, default=0)
  p.add_argument("--batch-size", type=int, default=32)
  p.add_argument("--learning-rate", type=float, default=3e-4)
  p.add_argument("--epochs", type=float, default=1.0)
  p.add_argument("--max-seq-length", type=int, default=128)
  p.add_argument("--seed", type=int, default=1234)
  p.add_argument("--pad-to-multiple", type=int, default=None,
                 help="ours' pad_to_multiple (default: its own)")
  p.add_argument("--hf-precisions", default="float32,bfloat16")
  p.add_argument("--omp-wait-policy", default="default",
                 choices=OMP_WAIT_POLICIES)
  p.add_argument("--ours-variants", default="",
                 help='JSON {name: hparams}: ours again per task with each '
                 '(e.g. {"grouped": {"group_by_length": 50}}), timed right '
                 'after ours')
  p.add_argument("--json", default="")
  p.add_argument("--md", default="")
  # The transformers side's own process (internal).
  p.add_argument("--side", default="", help=argparse.SUPPRESS)
  p.add_argument("--task", default="", help=argparse.SUPPRESS)
  p.add_argument("--precision", default="float32", help=argparse.SUPPRESS)
  p.add_argument("--out", default="", help=argparse.SUPPRESS)
  p.add_argument("--pretrained", default="", help=argparse.SUPPRESS)
  return p.parse_args(argv)


def fmt_phases(phases):
  return "/".join(f"{phases[k]:.1f}" if k in phases else "?"
                  for k in ("training", "trained", "scored"))


def table(result):
  lines = ["| task | train rows | dev rows | ours s | transformers s "
           "(precision) | ours / transformers speed | ours dev | "
           "transformers dev | training began/ended/scored, ours s | "
           "the same, transformers s | matmul floor s | transformers / floor | "
           "matmul floor at its shapes s | transformers / that floor | "
           "optimizer floor s | transformers / both floors |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
  for task, r in result["tasks"].items():
    fmt = lambda s: ", ".join(f"{k} {v:.1f}" for k, v in s.items())  # noqa: E731
    lines.append(
        f"| {task} | {r['train_rows']} | {r['dev_rows']} | "
        f"{r['ours_s']:.1f} | {r['hf_s']:.1f} ({r['hf_precision']}) | "
        f"{r['speedup']:.2f}x | {fmt(r['ours_dev'])} | {fmt(r['hf_dev'])} | "
        f"{fmt_phases(r['ours_phases'])} | {fmt_phases(r['hf_phases'])} | "
        f"{r['floor_s']:.1f} | {r['hf_s'] / r['floor_s']:.1f}x | "
        f"{r['shape_floor_s']:.1f} | {r['hf_s'] / r['shape_floor_s']:.2f}x | "
        f"{r['optimizer_floor_s']:.1f} | "
        f"{r['hf_s'] / (r['shape_floor_s'] + r['optimizer_floor_s']):.2f}x |")
  return "\n".join(lines)


def variants_table(result):
  """Ours with each --ours-variants' hparams beside ours by default."""
  lines = ["| task | variant | hparams | ours s | variant s | ours / variant "
           "time | variant dev | training began/ended/scored, s |",
           "|---|---|---|---|---|---|---|---|"]
  for task, r in result["tasks"].items():
    for name, v in r["ours_variants"].items():
      dev = ", ".join(f"{k} {x:.1f}" for k, x in v["ours_dev"].items())
      lines.append(f"| {task} | {name} | `{json.dumps(v['hparams'])}` | "
                   f"{r['ours_s']:.1f} | {v['ours_s']:.1f} | "
                   f"{v['vs_ours']:.2f}x | {dev} | "
                   f"{fmt_phases(v['ours_phases'])} |")
  return "\n".join(lines) if len(lines) > 2 else ""


def main(argv=None):
  args = parse_args(argv)
  policy = set_omp_wait_policy(args.omp_wait_policy)
  if args.side == "hf":
    return hf_main(args)
  from util.machine import cpu_kind
  machine = cpu_kind()
  tasks = [t for t in args.tasks.split(",") if t]
  args.limits = {t: args.train_examples for t in tasks}
  for item in filter(None, args.limit.split(",")):
    name, n = item.split("=")
    args.limits[name] = int(n)
  env = dict(os.environ, PYTHONPATH=ROOT)
  print(f"end-to-end fine-tuning, {args.size} shape, batch "
        f"{args.batch_size}, lr {args.learning_rate:g}, {args.epochs:g} "
        f"epoch(s), OMP_WAIT_POLICY {policy} [{machine}]", flush=True)
  result = dict(machine=machine, settings={
      k: v for k, v in vars(args).items()
      if k not in ("side", "task", "precision", "out", "pretrained", "json",
                   "md")},
                tasks={})
  with scratch("finetune_e2e_") as work:
    args.pretrained = write_pretrained(work, args.size)
    args.raw = raw_data(work)
    precisions = [p for p in args.hf_precisions.split(",") if p]
    for i, task in enumerate(tasks):
      ours_s, ours_dev, ours_phases = ours(
          task, args, os.path.join(work, f"ours_{task}"), env)
      variants = {}
      for name, extra in json.loads(args.ours_variants or "{}").items():
        seconds, dev, phases = ours(
            task, args, os.path.join(work, f"ours_{name}_{task}"), env, extra)
        variants[name] = dict(hparams=extra, ours_s=seconds, ours_dev=dev,
                              ours_phases=phases, vs_ours=ours_s / seconds)
        print(f"{task}: ours {name} {seconds:.1f} s ({ours_s / seconds:.2f}x "
              f"ours), dev {dev}; training began/ended/scored at "
              f"{fmt_phases(phases)} s", flush=True)
      runs = {}
      for precision in (precisions if i == 0 else [result["hf_precision"]]):
        runs[precision] = hf(task, precision, args,
                             os.path.join(work, f"hf_{task}_{precision}"),
                             env)
      if i == 0:
        result["hf_precision"] = min(runs, key=lambda p: runs[p][0])
        result["hf_precision_seconds"] = {p: r[0] for p, r in runs.items()}
      hf_s, hf_out = runs[result["hf_precision"]]
      flops = (matmul_flops(args.size, hf_out["train_batches"], True) +
               matmul_flops(args.size, hf_out["dev_batches"], False))
      result["tasks"][task] = dict(
          train_rows=sum(b[0] for b in hf_out["train_batches"]),
          dev_rows=sum(b[0] for b in hf_out["dev_batches"]),
          ours_s=ours_s, hf_s=hf_s, hf_precision=result["hf_precision"],
          speedup=hf_s / ours_s, ours_dev=ours_dev, hf_dev=hf_out["scores"],
          matmul_flops=flops, ours_phases=ours_phases,
          train_batches=hf_out["train_batches"],
          dev_batches=hf_out["dev_batches"],
          hf_phases=hf_out["phases"], ours_variants=variants)
      print(f"{task}: ours {ours_s:.1f} s, transformers {hf_s:.1f} s "
            f"({result['hf_precision']}): {hf_s / ours_s:.2f}x; dev ours "
            f"{ours_dev}, transformers {hf_out['scores']}; training "
            f"began/ended/scored at {fmt_phases(ours_phases)} s (ours), "
            f"{fmt_phases(hf_out['phases'])} s (transformers)", flush=True)
  peak = matmul_peak()
  result["matmul_peak_flops"] = peak
  timer = ShapeTimer()
  for task, r in result["tasks"].items():
    r["floor_s"] = r["matmul_flops"] / peak
    r["shape_floor_s"] = (
        shape_floor(args.size, r["train_batches"], True, timer) +
        shape_floor(args.size, r["dev_batches"], False, timer))
  result["shape_floor_fastest_share"] = timer.share()
  result["optimizer_step_s"] = optimizer_step_seconds(args.size)
  for r in result["tasks"].values():
    r["optimizer_floor_s"] = (len(r["train_batches"]) *
                              result["optimizer_step_s"])
  result["versions"] = dict(torch=hf_out["torch"],
                            transformers=hf_out["transformers"])
  print(f"TensorFlow's 2048^3 matmul: {peak / 1e9:.0f} GFLOP/s; the "
        "fastest at the step's shapes: " + ", ".join(
            f"{k} {v:.0%}" for k, v in
            result["shape_floor_fastest_share"].items()) +
        f"; an optimizer step (clipping, AdamW): "
        f"{result['optimizer_step_s'] * 1e3:.1f} ms")
  print(table(result))
  print(variants_table(result))
  write_json(args.json, result)
  if args.md:
    with open(args.md, "w") as f:
      f.write(f"End-to-end fine-tuning [{machine}]\n\n{table(result)}\n\n"
              f"{variants_table(result)}\n")
  return result


if __name__ == "__main__":
  main()
