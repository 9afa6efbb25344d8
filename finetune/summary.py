"""A fine-tuning run's results over its trials, as printed and recorded."""

import numpy as np

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
