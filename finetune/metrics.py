"""Metrics of the fine-tuning tasks, the GLUE score, and reusable scorers.

Every metric takes (labels, predictions) as NumPy arrays, in scikit-learn's
argument order, and returns a Python float on the 0-100 scale the papers
report. They are written out in NumPy (Spearman ranks come from scipy) so
the tests can check them against sklearn / scipy; the degenerate cases
follow scikit-learn: MCC and F1 are 0 when their denominators are 0. A
correlation with a constant side is 0 (scipy gives nan, which would poison
a GLUE average).
"""

import numpy as np
from scipy.stats import rankdata

from util import outputs
from util import storage

# The GLUE score (ELECTRA section 3.1 "Experimental Setup" and appendix B;
# appendix C only describes the tasks): "Spearman correlation for STS,
# Matthews correlation for CoLA, and accuracy for the other GLUE tasks; we
# use 'GLUE score' to refer to the average score over all tasks", WNLI
# excluded "following BERT". So MRPC and QQP contribute accuracy (not F1)
# and MNLI its matched-dev accuracy. The dissertation says the same
# (sections 2.6.2 and 5.2). Table 7's BERT-Base row checks it: the mean of
# its eight numbers is its "Avg." 80.9.
GLUE_METRICS = {
    "cola": "mcc",
    "sst": "accuracy",
    "mrpc": "accuracy",
    "sts": "spearman",
    "qqp": "accuracy",
    "mnli": "accuracy",
    "qnli": "accuracy",
    "rte": "accuracy",
}
GLUE_TASKS = tuple(GLUE_METRICS)


def _pair(labels, predictions):
  labels = np.asarray(labels).reshape(-1)
  predictions = np.asarray(predictions).reshape(-1)
  if labels.shape != predictions.shape:
    raise ValueError(f"{labels.size} labels but {predictions.size} "
                     "predictions")
  if not labels.size:
    raise ValueError("no predictions to score")
  return labels, predictions


def accuracy(labels, predictions):
  labels, predictions = _pair(labels, predictions)
  return 100.0 * float(np.mean(labels == predictions))


def f1(labels, predictions, positive=1):
  """Binary F1 of the `positive` class (MRPC, QQP)."""
  labels, predictions = _pair(labels, predictions)
  true_pos = np.sum((predictions == positive) & (labels == positive))
  # 2TP / (2TP + FP + FN): the denominator counts each positive once.
  denominator = np.sum(predictions == positive) + np.sum(labels == positive)
  return 100.0 * float(2 * true_pos / denominator) if denominator else 0.0


def mcc(labels, predictions):
  """Matthews correlation (CoLA); the multi-class form (Gorodkin 2004),
  which is the usual one for two classes."""
  labels, predictions = _pair(labels, predictions)
  classes, index = np.unique(np.concatenate([labels, predictions]),
                             return_inverse=True)
  n = labels.size
  confusion = np.zeros((len(classes), len(classes)), np.float64)
  np.add.at(confusion, (index[:n], index[n:]), 1)
  true_counts, pred_counts = confusion.sum(1), confusion.sum(0)
  correct, total = np.trace(confusion), float(n)
  cov_tp = correct * total - true_counts @ pred_counts
  cov_pp = total ** 2 - pred_counts @ pred_counts
  cov_tt = total ** 2 - true_counts @ true_counts
  if cov_pp * cov_tt == 0:  # a constant side: no correlation to measure
    return 0.0
  return 100.0 * float(cov_tp / np.sqrt(cov_pp * cov_tt))


def pearson(labels, predictions):
  labels, predictions = _pair(labels, predictions)
  x = labels.astype(np.float64) - np.mean(labels, dtype=np.float64)
  y = predictions.astype(np.float64) - np.mean(predictions, dtype=np.float64)
  denominator = np.sqrt(np.dot(x, x) * np.dot(y, y))
  return 100.0 * float(np.dot(x, y) / denominator) if denominator else 0.0


def spearman(labels, predictions):
  """Pearson on ranks, ties sharing their mean rank (STS)."""
  labels, predictions = _pair(labels, predictions)
  return pearson(rankdata(labels), rankdata(predictions))


METRICS = {"accuracy": accuracy, "f1": f1, "mcc": mcc, "pearson": pearson,
           "spearman": spearman}


def glue_average(results_by_task, require_all=True):
  """The GLUE score of {task: {metric: value}} (see GLUE_METRICS).

  None when a GLUE task is missing, as the score is defined over all eight;
  require_all=False averages the GLUE tasks present instead (None when
  there are none). Other tasks (chunk, squad, wnli) are ignored.
  """
  scores = [float(results_by_task[task][metric])
            for task, metric in GLUE_METRICS.items()
            if metric in results_by_task.get(task, {})]
  if not scores or (require_all and len(scores) < len(GLUE_METRICS)):
    return None
  return float(np.mean(scores))


def write_glue_tsv(path, ids, labels):
  """The GLUE leaderboard format: an `index<TAB>prediction` header, then
  one `id<TAB>label` line per test example."""
  ids, labels = list(ids), list(labels)
  if len(ids) != len(labels):
    raise ValueError(f"{len(ids)} ids but {len(labels)} predictions")
  lines = ["index\tprediction"]
  lines += [f"{i}\t{_format_label(label)}" for i, label in zip(ids, labels)]
  parent = path.rsplit("/", 1)[0] if "/" in path else ""
  if parent:
    storage.makedirs(parent)
  outputs.write_text(path, "\n".join(lines) + "\n")


def _format_label(label):
  if isinstance(label, (float, np.floating)):
    return f"{float(label):.3f}"
  return str(label)
