"""The floor every fine-tuning score is read against: predictors that read
no sentence, only (for tagging) the word itself, scored with the tasks'
own readers and metrics.

GLUE: the training set's majority class (a constant: CoLA's MCC and STS-B's
Spearman are 0 by definition; STS-B predicts the mean score). Chunk and
POS: each word's most frequent training tag (the most frequent tag overall
for a word never seen), the classic most-frequent-tag baseline.
"""

import collections

import numpy as np

from finetune import metrics
from finetune.config import FinetuningConfig
from finetune.tagging import tagging_utils
from finetune.task_builder import get_tasks


def _constant_score(task, metric):
  train = [e.label for e in task.get_examples("train")]
  dev = [e.label for e in task.get_examples("dev")]
  if task.is_regression:  # a constant has no rank correlation
    return 0.0
  majority = collections.Counter(train).most_common(1)[0][0]
  gold = np.array([task.labels.index(g) for g in dev])
  predicted = np.full_like(gold, task.labels.index(majority))
  return float(metrics.METRICS[metric](gold, predicted))


def _most_frequent_tag_score(task):
  counts = collections.defaultdict(collections.Counter)
  overall = collections.Counter()
  for example in task.get_examples("train"):
    for word, tag in zip(example.words, example.tags):
      counts[word][tag] += 1
      overall[tag] += 1
  fallback = overall.most_common(1)[0][0]
  dev = task.get_examples("dev")
  predicted = [[counts[w].most_common(1)[0][0] if w in counts else fallback
                for w in e.words] for e in dev]
  if task.name == "chunk":
    totals = np.zeros(3, np.int64)
    for example, tags in zip(dev, predicted):
      totals += tagging_utils.span_counts(example.tags, tags)
    return float(tagging_utils.precision_recall_f1(*map(int, totals))[2])
  gold = [t for e in dev for t in e.tags]
  return float(metrics.accuracy(np.asarray(gold),
                                np.asarray(sum(predicted, []))))


def task_baseline(task, metric):
  """The baseline's dev score (0-100) of a task object (any whose
  get_examples gives the rows to read), in `metric`."""
  if task.name in ("chunk", "pos"):
    return _most_frequent_tag_score(task)
  return _constant_score(task, metric)


def baseline_score(name, raw_data_dir, metric):
  """The baseline's dev score (0-100) of task `name` read from
  `raw_data_dir`, in `metric`."""
  config = FinetuningConfig(task_names=name, raw_data_dir=raw_data_dir)
  task, = get_tasks(config, tokenizer=None)
  return task_baseline(task, metric)
