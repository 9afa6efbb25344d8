"""Scoring word-level taggers: chunk F1 as conlleval counts it; word
accuracy (POS tagging)."""

import numpy as np

from finetune import metrics
from finetune.tagging import tagging_utils
from finetune.task import Scorer
from util import outputs


class TaggingScorer(Scorer):
  """A tag per word of whole sentences, from the model's outputs per row:
  "predictions" [T] tag ids and "label_weights" [T] (1 at each kept word's
  first subword, in word order). Words cut by truncation have no
  prediction: they get `missing`.
  """

  missing = None  # the predicted tag of a word cut by truncation

  def __init__(self, examples, features, label_list):
    super().__init__()
    self.examples = list(examples)
    self.features = features
    self.label_list = list(label_list)
    self._predicted = None

  def predicted_tags(self):
    """Tags per example (chunking: BIOES), decoded once from the collected
    outputs."""
    if self._predicted is None:
      self._predicted = self._decode()
    return self._predicted

  def _decode(self):
    data = self.collected()
    weights = data.get("label_weights", self.features["label_weights"])
    rows = self.features["example_index"]
    if len(data["predictions"]) < len(rows):
      raise ValueError(f"{len(data['predictions'])} output rows for "
                       f"{len(rows)} feature rows")
    predicted = [None] * len(self.examples)
    for row, index in enumerate(rows):
      positions = np.flatnonzero(weights[row] > 0)
      tags = [self.label_list[int(i)]
              for i in data["predictions"][row][positions]]
      missing = len(self.examples[index].words) - len(tags)
      predicted[index] = tags + [self.missing] * missing
    return predicted

  def file_tags(self, tags):
    """Tags as write_predictions writes them."""
    return tags

  def _loss(self, results):
    if self.outputs and "loss" in self.outputs[0]:
      results["loss"] = float(np.mean(self.collected()["loss"]))
    return results

  def write_predictions(self, path):
    """`word gold predicted` per line, a blank line after each sentence."""
    lines = []
    for example, tags in zip(self.examples, self.predicted_tags()):
      lines += [f"{w} {g} {p}" for w, g, p in zip(
          example.words, self.file_tags(example.tags), self.file_tags(tags))]
      lines.append("")
    outputs.write_text(path, "\n".join(lines) + "\n" if lines else "")


class ChunkingScorer(TaggingScorer):
  """Span precision / recall / F1 and word accuracy over whole sentences.
  Words cut by truncation count as O, so their chunks cost recall rather
  than vanishing from the gold."""

  missing = tagging_utils.OUTSIDE

  def get_results(self):
    """conlleval's numbers: chunk P/R/F1 and its word accuracy, which
    compares the IOB2 tags that write_predictions writes."""
    counts = np.zeros(3, np.int64)
    right = words = 0
    for example, tags in zip(self.examples, self.predicted_tags()):
      counts += tagging_utils.span_counts(example.tags, tags)
      gold, predicted = _iob2(example.tags), _iob2(tags)
      right += sum(g == p for g, p in zip(gold, predicted))
      words += len(gold)
    precision, recall, f1 = tagging_utils.precision_recall_f1(
        *(int(c) for c in counts))
    results = {"f1": f1, "precision": precision, "recall": recall,
               "accuracy": 100.0 * right / words if words else 0.0}
    return self._loss(results)

  def file_tags(self, tags):
    """IOB2, so that conlleval reproduces get_results' F1."""
    return _iob2(tags)


class AccuracyScorer(TaggingScorer):
  """Word accuracy (POS tagging) over whole sentences; a word cut by
  truncation counts as wrong (its prediction is written as `<cut>`)."""

  missing = "<cut>"

  def get_results(self):
    gold = [t for e in self.examples for t in e.tags]
    predicted = [t for tags in self.predicted_tags() for t in tags]
    return self._loss({"accuracy": metrics.accuracy(np.asarray(gold),
                                                    np.asarray(predicted))})


def _iob2(tags):
  return tagging_utils.bioes_to_iob2(tags)
