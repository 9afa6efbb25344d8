"""The side-by-side runs' table and plot, from their committed records
(issue 50; run_parity.py writes them).

  python benchmarks/original_parity/collect_parity.py results/original_parity \
      [--output-dir OUT]

Reads RECORDS/pretrain/<side>_seed<k>/step_<N>.json (held-out eval at every
checkpoint) and train_log.jsonl, RECORDS/cross_eval/<precision>/
original_seed<k>/step_<N>.json (the original's weights under our evaluator) and
RECORDS/orig_eval/<side>_seed<k>/step_<N>.json (our weights under the
original's evaluator) and
RECORDS/finetune/<side>_lr<lr>_<task>_seed<k>.json; writes results.md and pretrain_curves.png (into RECORDS
unless --output-dir says otherwise).
Every number comes from those files; nothing else is read.
"""

import argparse
import collections
import glob
import json
import os
import re
import sys

import numpy as np
from scipy import stats

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# Our pretraining runs: with today's default (repeated_positions average,
# the original's), and those made before it with the first slot's sample.
# And ours_fp32: ours in float32, as the original trains (the others ran
# mixed_precision auto: bfloat16 on this CPU); _origdense: the original's
# dense init, today's default (the others ran the truncated normal).
OURS = {"ours": "ours", "ours_first": "ours, first slot",
        "ours_fp32": "ours, float32",
        "ours_origdense_fp32": "ours, float32, original dense init",
        "ours_origdense": "ours, original dense init",
        "ours_origorder_fp32": "ours, float32, original dense init and data "
                               "order",
        # ours from the original's initial weights of the same seed
        "ours_originit": "ours, from the original's initial weights"}
PRETRAIN_SIDES = ("original",) + tuple(OURS)
# (the original's key, title, ours' key); a plan's "eval_metrics" names
# its objective's (plan_electric.json).
EVAL_METRICS = (("disc_auc", "discriminator AUC", "disc_auc"),
                ("disc_loss", "discriminator loss", "disc_loss"),
                ("masked_lm_accuracy", "generator MLM accuracy",
                 "masked_lm_accuracy"),
                ("masked_lm_loss", "generator MLM loss", "masked_lm_loss"))
# The original's records hold its own metrics and, for the discriminator,
# ours' definitions computed from its outputs (original_pretrain.py): the
# tables compare like with like.
LIKE_OURS = {"disc_auc": "disc_auc_real_tokens",
             "disc_loss": "disc_loss_real_tokens"}


def value(side, result, metric):
  key, _, ours_key = metric
  if side == "original":
    key = LIKE_OURS.get(key, key) if LIKE_OURS.get(key) in result else key
    return result[key]
  return result[ours_key]
HEADLINE = {"rte": "accuracy", "mrpc": "accuracy", "cola": "mcc",
            "sts": "spearman", "squadv1": "f1"}
# A second row for a task whose other score is quoted too.
ALSO = {"squadv1": "exact_match"}


def machines(records):
  """The CPUs that ran the records (each folder's machine.json)."""
  found = set()
  # This plan's folders only (another plan's records may sit below).
  for path in [p for part in ("pretrain", "finetune", "cross_eval")
               for p in glob.glob(os.path.join(records, part, "**",
                                               "machine.json"),
                                  recursive=True)]:
    with open(path) as f:
      found.add(json.load(f)["cpu"])
  return sorted(found) or ["CPU not recorded"]


def read_pretraining(records, kind="pretrain"):
  """{side: {seed: {"eval": {step: metrics}, "train": {step: loss}}}} of
  RECORDS/<kind>/ (orig_eval: our runs under the original's evaluator)."""
  runs = collections.defaultdict(dict)
  for folder in sorted(glob.glob(os.path.join(records, kind, "*"))):
    match = re.fullmatch(r"(%s)_seed(\d+)" % "|".join(PRETRAIN_SIDES),
                         os.path.basename(folder))
    if not match:
      continue
    evals = {}
    for path in glob.glob(os.path.join(folder, "step_*.json")):
      with open(path) as f:
        result = json.load(f)
      evals[int(result["global_step"])] = result
    train = {}
    log = os.path.join(folder, "train_log.jsonl")
    if os.path.exists(log):
      with open(log) as f:
        for line in f:
          record = json.loads(line)
          train[record["step"]] = record["loss"]
    runs[match.group(1)][int(match.group(2))] = {"eval": evals,
                                                 "train": train}
  return runs


def read_finetuning(records):
  """{(lr, task): {side: {seed: headline score x100}}}."""
  scores = collections.defaultdict(lambda: collections.defaultdict(dict))
  pattern = os.path.join(records, "finetune", "*.json")
  for path in sorted(glob.glob(pattern)):
    match = re.fullmatch(
        r"(original|ours|ours_orighead|ours_xlnethead)_lr([0-9.e-]+)_"
        r"([a-z0-9]+)_seed(\d+)"
        r"\.json", os.path.basename(path))
    if not match:
      continue
    side, lr, task, seed = match.groups()
    with open(path) as f:
      results = json.load(f)["results"]
    # Both sides' scorers report x100.
    scores[(float(lr), task)][side][int(seed)] = results[HEADLINE[task]]
    if task in ALSO:
      scores[(float(lr), f"{task} {ALSO[task]}")][side][int(seed)] = (
          results[ALSO[task]])
  return scores


def _spread(values):
  return f"{np.mean(values):.4f} [{min(values):.4f}, {max(values):.4f}]"


def pretraining_table(runs, sides_note, metrics=EVAL_METRICS):
  lines = []
  # A run stopped before its last eval (a session's end) shows in the plot
  # only.
  final = max((max(run["eval"]) for run in runs.get("original", {}).values()
               if run["eval"]), default=None)
  seeds = {side: sorted(s for s, run in runs.get(side, {}).items()
                        if final in run["eval"]) for side in PRETRAIN_SIDES}
  ours = [side for side in OURS if seeds[side]]
  unfinished = [f"{side} seed {s}" for side in PRETRAIN_SIDES
                for s, run in sorted(runs.get(side, {}).items())
                if final not in run["eval"]]
  shown = ["original"] + ours
  steps = sorted(set.intersection(*[
      set(runs[side][s]["eval"]) for side in shown for s in seeds[side]
  ])) if seeds["original"] and ours else []
  pending = (f" (not yet evaluated: {', '.join(unfinished)})"
             if unfinished else "")
  lines.append(
      "Held-out eval at every checkpoint: mean over pretraining seeds "
      "[min, max]; seeds: " + "; ".join(
          f"{side} {seeds[side]}" for side in PRETRAIN_SIDES
          if seeds[side] or side in ("original", "ours")) + pending +
      ". " + sides_note + " \"ranges "
      "overlap\": a side's seed range shares a value with the original's "
      "(with one seed a side, a range is a point and this says nothing); "
      "Welch's t-test (scipy) over the seeds at the last step. The "
      "discriminator's AUC and loss are ours' definitions on all sides "
      "(sklearn's exact AUC and the mean log loss over real tokens), "
      "computed for the original from its own outputs; its records also "
      "keep its own `disc_auc` (`tf.metrics.auc`: 200 thresholds, padding "
      "counted as negatives scored 0) and `disc_loss` (a mean of row means).")
  for metric in metrics:
    key, title, _ = metric
    header = "| step | original |" + "".join(
        f" {OURS[side]} | - original | overlap |" for side in ours)
    lines += ["", f"**{title}** (`{key}`)", "", header,
              "|---|---|" + "---|---|---|" * len(ours)]
    for step in steps:
      values = {side: [value(side, runs[side][s]["eval"][step], metric)
                       for s in seeds[side]] for side in shown}
      row = f"| {step} | {_spread(values['original'])} |"
      for side in ours:
        overlap = (min(values[side]) <= max(values["original"]) and
                   max(values[side]) >= min(values["original"]))
        row += (f" {_spread(values[side])} | "
                f"{np.mean(values[side]) - np.mean(values['original']):+.4f}"
                f" | {'yes' if overlap else '**no**'} |")
      lines.append(row)
    if steps:
      tests = []
      for side in ours:
        a, b = values["original"], values[side]
        p = (stats.ttest_ind(b, a, equal_var=False).pvalue
             if min(len(a), len(b)) > 1 and np.std(a) + np.std(b) > 0
             else float("nan"))
        tests.append(f"{OURS[side]} vs original p = {p:.3f} (n = {len(b)} "
                     f"vs {len(a)})")
      lines += ["", f"At step {steps[-1]}, Welch's t over seeds: "
                + "; ".join(tests) + "."]
  return lines


def cross_eval_table(records, runs):
  """The original's last checkpoints under our evaluator (RECORDS/
  cross_eval/<precision>/, run_parity.py cross_eval) beside our runs of the
  same seeds and precision: the same held-out rows and eval masks per
  seed, so the differences are paired and in the weights alone."""
  lines = []
  for precision, side in (("bfloat16", "ours"), ("float32", "ours_fp32"),
                          ("float32", "ours_origdense_fp32")):
    found = {}
    for path in glob.glob(os.path.join(records, "cross_eval", precision,
                                       "original_seed*", "step_*.json")):
      seed = int(re.search(r"original_seed(\d+)", path).group(1))
      with open(path) as f:
        found[seed] = json.load(f)
    ours = runs.get(side, {})
    seeds = sorted(s for s in found if found[s]["global_step"] in
                   ours.get(s, {}).get("eval", {}))
    if not seeds:
      continue
    step = found[seeds[0]]["global_step"]
    lines += ["", f"**One evaluator** (ours, {precision}), step {step}: the "
              "original's checkpoints imported and evaluated on the same "
              "held-out rows with the same eval masks as our run of the same "
              f"seed (`{OURS[side]}`); seeds {seeds}. Paired differences "
              "(ours - original, per seed) and the paired t-test (scipy).",
              "", "| metric | original | ours | ours - original, per seed |"
              " paired p |", "|---|---|---|---|---|"]
    for key, title, _ in EVAL_METRICS:
      a = [found[s][key] for s in seeds]
      b = [ours[s]["eval"][step][key] for s in seeds]
      diffs = [y - x for x, y in zip(a, b)]
      p = (stats.ttest_rel(b, a).pvalue if len(seeds) > 1 and
           np.std(diffs) > 0 else float("nan"))
      lines.append(f"| {title} | {_spread(a)} | {_spread(b)} | "
                   + ", ".join(f"{d:+.4f}" for d in diffs) + f" | {p:.3f} |")
  return lines


def original_evaluator_table(records, runs, metrics=EVAL_METRICS):
  """Our runs' checkpoints under the original's evaluator (RECORDS/
  orig_eval/, run_parity.py orig_eval) beside the original's runs under
  it, at every step: one evaluator, and per seed the same eval masks."""
  lines = []
  theirs = read_pretraining(records, "orig_eval")
  original = runs.get("original", {})
  for side, ours in sorted(theirs.items()):
    seeds = sorted(s for s in ours if s in original)  # paired: same masks
    steps = sorted(set.intersection(*[
        set(run["eval"]) for run in list(ours.values()) +
        list(original.values())])) if seeds else []
    if not steps:
      continue
    lines += ["", f"**The original's evaluator on both codes' weights** "
              f"(`{OURS[side]}`, seeds {sorted(ours)}; original seeds "
              f"{sorted(original)}): our checkpoints written in the "
              "release's names (`export_model.py --format tf1`) and "
              "evaluated by its code with the eval masks of its own run of "
              "the same seed. Mean [min, max] over seeds; per seed, ours - "
              "original on the same masks; paired t-test (scipy) at the "
              "last step."]
    for metric in metrics:
      key, title, _ = metric
      lines += ["", f"*{title}* (`{key}`)", "",
                "| step | original | ours | - original | per seed | "
                "ranges overlap |", "|---|---|---|---|---|---|"]
      for step in steps:
        a = {s: value("original", run["eval"][step], metric)
             for s, run in sorted(original.items())}
        b = {s: value("original", run["eval"][step], metric)
             for s, run in sorted(ours.items())}
        overlap = (min(b.values()) <= max(a.values()) and
                   max(b.values()) >= min(a.values()))
        diffs = [b[s] - a[s] for s in seeds]
        lines.append(f"| {step} | {_spread(list(a.values()))} | "
                     f"{_spread(list(b.values()))} | "
                     f"{np.mean(list(b.values())) - np.mean(list(a.values())):+.4f}"
                     " | " + ", ".join(f"{d:+.4f}" for d in diffs) +
                     f" | {'yes' if overlap else '**no**'} |")
      p = (stats.ttest_rel([b[s] for s in seeds], [a[s] for s in seeds]
                           ).pvalue if len(seeds) > 1 and np.std(diffs) > 0
           else float("nan"))
      lines += ["", f"At step {steps[-1]}: paired p = {p:.3f} "
                f"(n = {len(seeds)})."]
  return lines


# Our fine-tuning sides: the head init each ran with (run_parity.py).
FINETUNE_OURS = {"ours": "ours (truncated-normal heads)",
                 "ours_orighead": "ours (the original's head init)",
                 "ours_xlnethead": "ours (the original's head init, "
                                   "XLNet's SQuAD head)"}


def _scores(values):
  return (f"{np.mean(values):.2f} [{min(values):.2f}, {max(values):.2f}] "
          f"(n={len(values)})")


def finetuning_table(scores, floors, checkpoint="original_seed1"):
  ours = [s for s in FINETUNE_OURS
          if any(scores[key].get(s) for key in scores)]
  lines = ["", f"Fine-tuning one checkpoint (`{checkpoint}`) by both "
           "codes: dev score x100 (RTE, MRPC accuracy; CoLA MCC; STS-B "
           "Spearman; SQuAD F1 and exact match by each code's copy of the "
           "official scorer), mean over fine-tuning seeds [min, max]; "
           "Welch's t-test "
           "(scipy) over the seeds, each of ours against the original; "
           "beside them the no-text baseline (the training set's majority "
           "class, `finetune/baselines.json`). The heads: the original "
           "builds them with TF1's default init (glorot_uniform); `ours` "
           "ran with a truncated normal (0.02) before `dense_init: "
           "original` became the default.", "",
           ("| lr | task | no-text baseline | original | " + "".join(
               f"{FINETUNE_OURS[s]} | - original | Welch p | "
               for s in ours)).rstrip(),
           "|---|---|---|---|" + "---|---|---|" * len(ours)]
  for (lr, task) in sorted(scores):
    sides = scores[(lr, task)]
    if not sides.get("original") or not any(sides.get(s) for s in ours):
      continue
    a = [sides["original"][k] for k in sorted(sides["original"])]
    floor = floors.get(task)
    floor = "-" if floor is None else f"{floor:.2f}"
    row = f"| {lr:g} | {task} | {floor} | {_scores(a)} | "
    for side in ours:
      if not sides.get(side):
        row += "- | - | - | "
        continue
      b = [sides[side][k] for k in sorted(sides[side])]
      # No test without a spread on either side (e.g. every seed at the
      # majority class).
      p = (stats.ttest_ind(b, a, equal_var=False).pvalue
           if min(len(a), len(b)) > 1 and np.std(a) + np.std(b) > 0
           else float("nan"))
      row += f"{_scores(b)} | {np.mean(b) - np.mean(a):+.2f} | {p:.3f} | "
    lines.append(row.rstrip())
  return lines


def plot(runs, cpus, path, shape="Tiny ELECTRA", metrics=EVAL_METRICS):
  import matplotlib  # only here: the tables need no plotting library
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt
  panels = list(metrics[:3]) + [("train", "training loss (mean of "
                                 "100 steps)", "")]
  fig, axes = plt.subplots(2, 2, figsize=(10, 7))
  # The committed plots' colours; a side not listed takes one no side
  # has, so a new side needs only its OURS label.
  colors = {"original": "tab:blue", "ours": "tab:orange",
            "ours_first": "tab:gray", "ours_fp32": "tab:green",
            "ours_origdense_fp32": "tab:red", "ours_origdense": "tab:purple",
            "ours_origorder_fp32": "tab:brown", "ours_originit": "tab:olive"}
  spare = iter(c for c in ("tab:pink", "tab:cyan", "black", "gold", "navy")
               if c not in colors.values())
  colors.update({side: next(spare) for side in PRETRAIN_SIDES
                 if side not in colors})
  for ax, metric in zip(axes.flat, panels):
    key, title, _ = metric
    for side in PRETRAIN_SIDES:
      seeds = sorted(runs.get(side, {}))
      for i, seed in enumerate(seeds):
        run = runs[side][seed]
        series = (run["train"] if key == "train" else
                  {s: value(side, r, metric)
                   for s, r in run["eval"].items()})
        steps = sorted(series)
        done = sum(1 for s in seeds if runs[side][s]["eval"])
        label = (f"{OURS.get(side, side)} ({done} pretraining seeds"
                 + (f", {len(seeds) - done} partial" if len(seeds) > done
                    else "") + ")" if i == 0 else None)
        ax.plot(steps, [series[s] for s in steps], color=colors[side],
                alpha=0.8, marker="o" if key != "train" else None,
                markersize=3, label=label)
    ax.set_title(title)
    ax.set_xlabel("pretraining step")
    ax.grid(alpha=0.3)
  axes.flat[0].legend()
  fig.suptitle(f"{shape} pretrained by the original release's code and "
               "by ours (same TFRecords and hparams; held-out eval)")
  fig.text(0.5, 0.005, "; ".join(cpus),
           ha="center", fontsize=8)
  fig.tight_layout(rect=(0, 0.02, 1, 0.96))
  fig.savefig(path, dpi=80)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("records")
  parser.add_argument("--plan", default=os.path.join(HERE, "plan.json"),
                      help="the plan the records ran (named in results.md; "
                      "its shape titles the plot, its sides_note says what "
                      "our sides are)")
  parser.add_argument("--output-dir", default="",
                      help="where results.md and the plot go (default: "
                      "RECORDS)")
  args = parser.parse_args(argv)
  out = args.output_dir or args.records
  with open(args.plan) as f:
    plan = json.load(f)
  shape = plan.get("shape") or ("Tiny ELECTRA" if "tiny_sizes" in plan else
                                "ELECTRA-Small's shape")
  metrics = [tuple(m) for m in plan.get("eval_metrics", EVAL_METRICS)]
  os.makedirs(out, exist_ok=True)
  runs = read_pretraining(args.records)
  scores = read_finetuning(args.records)
  lines = ["# The original release's code and ours, whole runs side by side",
           "", "Regenerate: `python benchmarks/original_parity/"
           f"collect_parity.py {os.path.relpath(args.records, REPO)}` "
           "(hparams: "
           f"`{os.path.relpath(args.plan, REPO)}`). Ran on: "
           + "; ".join(machines(args.records)) + ".", "",
           ]
  if runs:  # a plan with pretraining runs (plan_squad.json has none)
    lines += ["## Pretraining", ""]
    lines += pretraining_table(runs, plan["sides_note"], metrics)
    lines += cross_eval_table(args.records, runs)
    lines += original_evaluator_table(args.records, runs, metrics)
    lines += ["", "![curves](pretrain_curves.png)"]
  if scores:  # a plan with fine-tuning runs (the Electric plan has none)
    floors_path = os.path.join(args.records, "finetune", "baselines.json")
    floors = {}
    if os.path.exists(floors_path):
      with open(floors_path) as f:
        floors = json.load(f)
    lines += ["", "## Fine-tuning"] + finetuning_table(
        scores, floors, plan["finetune"]["model"])
  with open(os.path.join(out, "results.md"), "w") as f:
    f.write("\n".join(lines) + "\n")
  if runs:
    plot(runs, machines(args.records),
         os.path.join(out, "pretrain_curves.png"), shape, metrics)
  print("\n".join(lines))
  return 0


if __name__ == "__main__":
  sys.exit(main())
