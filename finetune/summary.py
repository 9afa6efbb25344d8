"""A fine-tuning run's results over its trials, as printed and recorded,
and read against each task's no-text baseline."""

import numpy as np

from finetune import data_layout
from finetune import metrics


def summarize(trials):
  """{task: {metric: {median, mean, std, values}}} over trials, plus the
  GLUE score when several GLUE tasks ran."""
  summary = {}
  for task in (trials[0] if trials else {}):
    summary[task] = {}
    for key in trials[0][task]:
      values = [t[task][key] for t in trials]
      summary[task][key] = {"median": float(np.median(values)),
                            "mean": float(np.mean(values)),
                            "std": float(np.std(values)),
                            "values": values}
  # The GLUE score of the GLUE tasks that ran (all eight: the papers').
  glue = [metrics.glue_average(t, require_all=False) for t in trials]
  if trials and all(g is not None for g in glue) and len(
      [t for t in trials[0] if t in metrics.GLUE_TASKS]) > 1:
    summary["glue"] = {"average": {
        "median": float(np.median(glue)), "mean": float(np.mean(glue)),
        "std": float(np.std(glue)), "values": glue}}
  return summary


def format_table(results):
  """Lines `  task metric value` of {task: {metric: value}}."""
  lines = []
  for task, values in results.items():
    for key, value in values.items():
      lines.append(f"  {task:<8} {key:<20} {value:8.3f}")
  return "\n".join(lines)


# What a no-text baseline is, per kind of task (finetune/baselines.py).
BASELINE_WORDS = {"GLUE": "the training set's majority class",
                  "tagging": "each word's most frequent training tag"}
REGRESSION_WORDS = "a constant prediction: correlation 0"


def baseline_words(task):
  """What the task's no-text baseline is, in words: its kind's, or a
  constant's for a regression task (STS-B)."""
  if getattr(task, "is_regression", False):
    return REGRESSION_WORDS
  return BASELINE_WORDS[data_layout.kind(task.name)]


def has_baseline(task_name):
  """Whether finetune/baselines.py has a no-text baseline for the task:
  GLUE and tagging."""
  return data_layout.kind(task_name) in BASELINE_WORDS


def versus_baselines(results, tasks, baselines):
  """Lines reading each task's headline score {task: {metric: value}}
  against its no-text baseline {task: score}, saying when it does not
  beat it (a model that learned nothing usable from the text)."""
  lines = []
  for task in tasks:
    if task.name not in baselines or task.name not in results:
      continue
    score = results[task.name].get(task.metric)
    base = baselines[task.name]
    if score is None:
      continue
    verdict = ("beats it" if score > base else
               "does NOT beat it: no better than ignoring the text")
    lines.append(f"  {task.name:<8} {task.metric:<20} {score:8.3f} vs "
                 f"no-text baseline {base:.3f} "
                 f"({baseline_words(task)}): {verdict}")
  return "\n".join(["no-text baselines (dev):"] + lines) if lines else ""
