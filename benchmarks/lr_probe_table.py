"""The tiny model's fine-tuning learning-rate probe as a table, from its
committed records (run_finetuning.py results files named
<task>_lr<lr>_seed<k>.json).

  python benchmarks/lr_probe_table.py results/comparison_tiny/lr_probe/v2

Per task and rate: the dev score x100 (CoLA MCC, STS-B Spearman, the
others accuracy), mean over fine-tuning seeds [min, max]; per task, the
higher rate minus the lower and Welch's t-test (scipy) over the seeds; the
mean over tasks of each rate, over the seeds every task has at both rates.
"""

import collections
import glob
import os
import re
import sys

import numpy as np
from scipy import stats

HEADLINE = {"cola": "mcc", "sst": "accuracy", "mrpc": "accuracy",
            "sts": "spearman", "rte": "accuracy"}


def read(folder):
  """{task: {lr: {seed: score}}}."""
  import json
  scores = collections.defaultdict(lambda: collections.defaultdict(dict))
  for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
    match = re.fullmatch(r"([a-z]+)_lr([0-9.e-]+)_seed(\d+)\.json",
                         os.path.basename(path))
    if not match:
      continue
    task, lr, seed = match.groups()
    with open(path) as f:
      trial, = json.load(f)["trials"]
    scores[task][float(lr)][int(seed)] = trial[task][HEADLINE[task]]
  return scores


def table(scores):
  rates = sorted({lr for by_lr in scores.values() for lr in by_lr})
  low, high = rates[0], rates[-1]
  lines = ["| task | " + " | ".join(f"lr {lr:g}" for lr in rates) +
           f" | {high:g} - {low:g} | Welch p |",
           "|---|" + "---|" * (len(rates) + 2)]
  means = collections.defaultdict(list)
  for task in [t for t in HEADLINE if t in scores]:
    row = [task]
    for lr in rates:
      v = list(scores[task].get(lr, {}).values())
      row.append(f"{np.mean(v):.2f} [{min(v):.2f}, {max(v):.2f}] "
                 f"(n={len(v)})" if v else "-")
    a, b = (list(scores[task].get(lr, {}).values()) for lr in (low, high))
    if a and b:
      p = (stats.ttest_ind(b, a, equal_var=False).pvalue
           if min(len(a), len(b)) > 1 and np.std(a) + np.std(b) > 0
           else float("nan"))
      row += [f"{np.mean(b) - np.mean(a):+.2f}", f"{p:.3f}"]
    else:
      row += ["-", "-"]
    lines.append("| " + " | ".join(row) + " |")
    seeds = set.intersection(*(set(scores[task].get(lr, {}))
                               for lr in rates))
    if seeds:  # a task counts where every rate has the same seeds
      for lr in rates:
        means[lr].append(np.mean([scores[task][lr][s] for s in seeds]))
  if means:
    lines.append(
        f"| mean over the {len(means[low])} tasks with every rate | " +
        " | ".join(f"{np.mean(means[lr]):.2f}" for lr in rates) +
        f" | {np.mean(means[high]) - np.mean(means[low]):+.2f} | |")
  return lines


def main(argv=None):
  folder, = argv if argv is not None else sys.argv[1:]
  lines = table(read(folder))
  print("\n".join(lines))
  return lines


if __name__ == "__main__":
  main()
