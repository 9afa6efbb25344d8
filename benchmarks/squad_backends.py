"""SQuAD 1.1 fine-tuned on TensorFlow and under JAX (issue 62): does JAX's
EM/F1 over seeds lie within TensorFlow's seed spread?

  python benchmarks/squad_backends.py --work runs/squad_backends \
      --out benchmarks/records/<date>_<cpu>_squad_backends

1. A tiny ELECTRA pretrained on sample_data/ as `make quickstart` does
   (build_pretraining_dataset.py, then run_pretraining.py with
   configs/electra_tiny.json) into WORK; skipped when WORK holds the
   finished run, resumed when it holds part of one.
2. The SQuAD 1.1 dev set we hold split by article as plan_squad.json's
   squad_split (benchmarks/original_parity/run_parity.py: every 4th article
   is dev, the rest trains), the first --train-examples / --eval-examples
   questions used (train_examples_limit / eval_examples_limit).
3. run_finetuning.py --task-names squadv1 --num-trials N once per backend
   (KERAS_BACKEND=tensorflow, then jax), plan_squad.json's hparams on both;
   each trial scored by the product's official v1.1 scorer (its trials
   record), cross-checked here on the written predictions.
4. OUT/squad_backends.json (per backend, per seed EM and F1, the settings,
   the CPU) and OUT/squad_backends.md: per backend mean [min, max], Welch's
   p of JAX vs TensorFlow, and whether each side's seeds lie within the
   other's [min, max].

The two backends draw train rows in different orders (JAX: pretrain/
arrays.py batch_rows; TensorFlow: tf.data's shuffle), so seed k is not the
same trial on both: only the spreads can be compared.
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks", "original_parity"))

import run_parity  # noqa: E402  (the parity runs' SQuAD split and plan)
from finetune.qa import squad_eval  # noqa: E402
from util.errors import UserError, main_guard  # noqa: E402
from util.machine import cpu_kind  # noqa: E402
from util.paths import portable  # noqa: E402

PLAN = run_parity.load_plan(os.path.join(ROOT, "benchmarks",
                                         "original_parity", "plan_squad.json"))
MODEL = "electra_tiny"
PRETRAIN_CONFIG = os.path.join("configs", "electra_tiny.json")
TASK = "squadv1"
BACKENDS = ("tensorflow", "jax")
METRICS = ("exact_match", "f1")  # the scorer's
# The spreads compared: the scorer's and the dev loss, which moves with
# training in finer steps than EM's few right answers.
COMPARED = METRICS + ("loss",)


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--work", default=os.path.join("runs", "squad_backends"),
                 help="the pretrained model, the split and the runs "
                 "(reused by a rerun)")
  p.add_argument("--squad-dev", default=os.path.join(
      os.path.dirname(ROOT), "shared", "data", "squad", "dev-v1.1.json"),
                 help="SQuAD 1.1 dev-v1.1.json to split")
  p.add_argument("--seeds", type=int, default=3, help="trials per backend")
  p.add_argument("--seed", type=int, default=1, help="the first trial's")
  p.add_argument("--train-examples", type=int, default=2000,
                 help="the first N train questions (0: all)")
  p.add_argument("--eval-examples", type=int, default=1000,
                 help="the first N dev questions (0: all)")
  p.add_argument("--out", default=None,
                 help="folder for squad_backends.json and .md (default: "
                 "WORK)")
  args = p.parse_args(argv)
  if args.seeds < 2:
    p.error("--seeds: at least 2 (a spread needs two trials)")
  return args


def run(argv, env=None):
  """A step's subprocess, its output shown as it comes; a failure is one
  line naming the step."""
  print("$ " + " ".join(argv), flush=True)
  done = subprocess.run([sys.executable] + argv, cwd=ROOT, env=env)
  if done.returncode:
    raise UserError(f"{argv[0]} failed (exit {done.returncode}); its "
                    "output is above")


def pretrain(work):
  """WORK/models/electra_tiny: the quickstart's data and model."""
  with open(os.path.join(ROOT, PRETRAIN_CONFIG)) as f:
    steps = json.load(f)["num_train_steps"]
  model = os.path.join(work, "models", MODEL)
  if os.path.exists(os.path.join(model, f"ckpt-{steps}.index")):
    print(f"pretrained model found: {model} (step {steps})", flush=True)
    return
  vocab = os.path.join(work, "vocab.txt")
  os.makedirs(work, exist_ok=True)
  shutil.copyfile(os.path.join(ROOT, "sample_data", "vocab_8k.txt"), vocab)
  records = os.path.join(work, "pretrain_tfrecords")
  # metadata.json is written last: a finished build (as the Makefile's).
  if not os.path.exists(os.path.join(records, "metadata.json")):
    run(["build_pretraining_dataset.py", "--corpus-dir",
         os.path.join("sample_data", "corpus"), "--vocab-file", vocab,
         "--output-dir", records, "--num-processes", "1", "--overwrite"])
  run(["run_pretraining.py", "--data-dir", work, "--model-name", MODEL,
       "--hparams", PRETRAIN_CONFIG])  # resumes from its last checkpoint


def hparams(args):
  spec = PLAN["finetune"]
  lr, = spec["learning_rates"]
  return dict(spec["hparams"], learning_rate=lr,
              train_examples_limit=args.train_examples,
              eval_examples_limit=args.eval_examples,
              # JAX has no OpenVINO: both evaluate in float32 (TensorFlow's
              # `auto` would pick OpenVINO, bfloat16 here, for 1024+ rows).
              inference_engine="tensorflow")


def finetune(args, backend, raw):
  """One run_finetuning.py of all seeds on `backend`: its trials (the
  record's, resumed when a rerun finds some done) and wall seconds."""
  out = os.path.join(args.work, f"finetune_{backend}")
  env = dict(os.environ, KERAS_BACKEND=backend)
  record = os.path.join(out, f"{TASK}_trials.json")
  # A rerun goes on after these: `seconds` is only the trials run now.
  done_before = len(read_trials(record)) if os.path.exists(record) else 0
  start = time.time()
  run(["run_finetuning.py", "--data-dir", args.work, "--model-name", MODEL,
       "--raw-data-dir", raw, "--task-names", TASK, "--output-dir", out,
       "--num-trials", str(args.seeds), "--seed", str(args.seed),
       "--keep-model", "none", "--hparams", json.dumps(hparams(args))],
      env=env)
  seconds = time.time() - start
  trials = read_trials(record)[:args.seeds]
  golds = dev_answers(os.path.join(raw, TASK, "dev.json"))
  rows = []
  for k, trial in enumerate(trials, 1):
    results = trial[TASK]
    check_scored(out, k, results, golds)
    rows.append(dict(seed=args.seed + k - 1, trial=k,
                     total=int(results["total"]), loss=results["loss"],
                     **{m: results[m] for m in METRICS}))
  return dict(trials=rows, seconds=seconds, trials_done_before=done_before)


def read_trials(path):
  with open(path) as f:
    return json.load(f)["trials"]


def dev_answers(path):
  with open(path) as f:
    data = json.load(f)["data"]
  return {qa["id"]: [a["text"] for a in qa["answers"]]
          for article in data for p in article["paragraphs"]
          for qa in p["qas"]}


def check_scored(out, trial, results, golds):
  """The record's EM/F1 are the official v1.1 scorer's on the trial's
  written predictions (the questions it predicted: the first N)."""
  path = os.path.join(out, f"{TASK}_dev_predictions_trial{trial}.json")
  with open(path) as f:
    preds = json.load(f)
  scored = squad_eval.evaluate_v1({q: golds[q] for q in preds}, preds)
  for m in METRICS + ("total",):
    if abs(scored[m] - results[m]) > 1e-6:
      raise UserError(f"{path}: {m} {scored[m]} by the scorer, "
                      f"{results[m]} in the trials record")


def welch_p(a, b):
  """Welch's t-test p of a vs b; None where it is undefined (no variance
  on either side: equal constants, or a difference with no spread)."""
  from scipy import stats
  p = stats.ttest_ind(a, b, equal_var=False).pvalue
  return None if math.isnan(p) else float(p)


def compare(backends):
  """Per metric: each backend's mean, min, max, JAX vs TensorFlow's Welch
  p, and whether every seed of one lies within the other's [min, max]."""
  out = {}
  for m in COMPARED:
    values = {b: [t[m] for t in r["trials"]] for b, r in backends.items()}
    spread = {b: dict(mean=sum(v) / len(v), min=min(v), max=max(v))
              for b, v in values.items()}
    tf, jx = spread["tensorflow"], spread["jax"]
    out[m] = dict(
        spread=spread, welch_p=welch_p(values["jax"], values["tensorflow"]),
        jax_mean_within_tf=tf["min"] <= jx["mean"] <= tf["max"],
        jax_within_tf=all(tf["min"] <= x <= tf["max"]
                          for x in values["jax"]),
        tf_within_jax=all(jx["min"] <= x <= jx["max"]
                          for x in values["tensorflow"]))
  return out


def chance_within(n, m):
  """The chance that every one of m draws lies within the [min, max] of n
  others from the same distribution (no ties): both extremes of the n + m
  are among the n. 1/5 for 3 and 3: "outside" alone is no evidence."""
  return n * (n - 1) / ((n + m) * (n + m - 1))


def table(record):
  """The markdown table of a record and what it says."""
  lines = ["| metric | TensorFlow mean [min, max] | JAX mean [min, max] | "
           "Welch p (JAX vs TF) | JAX mean in TF's range | every JAX seed "
           "in TF's range | every TF seed in JAX's range |",
           "|---|---|---|---|---|---|---|"]
  names = {"exact_match": "EM", "f1": "F1", "loss": "dev loss"}
  yes = {True: "yes", False: "**no**"}
  for m, c in record["comparison"].items():
    d = 3 if m == "loss" else 2
    cells = [f"{s['mean']:.{d}f} [{s['min']:.{d}f}, {s['max']:.{d}f}]"
             for s in (c["spread"]["tensorflow"], c["spread"]["jax"])]
    p = "n/a" if c["welch_p"] is None else f"{c['welch_p']:.3f}"
    lines.append(f"| {names[m]} | {cells[0]} | {cells[1]} | {p} | "
                 f"{yes[c['jax_mean_within_tf']]} | "
                 f"{yes[c['jax_within_tf']]} | {yes[c['tf_within_jax']]} |")
  seeds = {b: ", ".join(f"{t['seed']}: {t['exact_match']:.2f} / "
                        f"{t['f1']:.2f}" for t in r["trials"])
           for b, r in record["backends"].items()}
  s = record["settings"]
  lines += [
      "",
      f"Per seed, EM / F1: TensorFlow {seeds['tensorflow']}; JAX "
      f"{seeds['jax']}. {s['seeds']} seeds per backend, "
      f"{record['dev_questions']} dev questions, the first "
      f"{s['train_examples'] or 'all'} train questions; {record['cpu']}.",
      "",
      "Welch's p > 0.05 means a difference between the backends is not "
      "established, not that they are the same. Seed k is not the same "
      "trial on both backends (their train rows come in different orders). "
      "Were both backends' seeds draws of one distribution, every JAX seed "
      f"would lie within TF's range with chance {chance(record):.2f}: a "
      "seed outside it is, alone, no evidence of a difference.",
  ]
  return "\n".join(lines)


def chance(record):
  n = {b: len(r["trials"]) for b, r in record["backends"].items()}
  return chance_within(n["tensorflow"], n["jax"])


def relative(path):
  """As a record names it: under the repository or $DATA (util/paths.py)."""
  return portable(os.path.abspath(path))


@main_guard
def main(argv=None):
  args = parse_args(argv)
  if not os.path.isfile(args.squad_dev):
    raise UserError(f"{args.squad_dev} not found: SQuAD 1.1's "
                    "dev-v1.1.json (--squad-dev)")
  started = time.time()
  pretrain(args.work)
  raw = os.path.join(args.work, "finetuning_data")
  run_parity.write_squad_split(args.squad_dev,
                               PLAN["squad_split"]["held_out_every"],
                               os.path.join(raw, TASK))
  backends = {b: finetune(args, b, raw) for b in BACKENDS}
  dev_questions, = {t["total"] for r in backends.values()
                    for t in r["trials"]}
  record = dict(
      cpu=cpu_kind(), date=time.strftime("%Y-%m-%d"),
      settings=dict(seeds=args.seeds, first_seed=args.seed,
                    train_examples=args.train_examples,
                    eval_examples=args.eval_examples,
                    squad_dev=relative(args.squad_dev),
                    held_out_every=PLAN["squad_split"]["held_out_every"],
                    pretrain_config=PRETRAIN_CONFIG, work=relative(args.work),
                    finetune_hparams=hparams(args)),
      dev_questions=dev_questions, backends=backends,
      comparison=compare(backends), wall_seconds=time.time() - started)
  out = args.out or args.work
  os.makedirs(out, exist_ok=True)
  with open(os.path.join(out, "squad_backends.json"), "w") as f:
    json.dump(record, f, indent=2, sort_keys=True)
  text = table(record)
  with open(os.path.join(out, "squad_backends.md"), "w") as f:
    f.write(text + "\n")
  print(text)


if __name__ == "__main__":
  main()
