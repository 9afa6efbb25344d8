"""GLUE tasks: a linear head on the first token ([CLS]) of the encoder.

Each task is a few lines: its files' columns, labels and metrics. Files are
the standard GLUE TSVs in RAW_DATA_DIR/<task>/ or GLUE's own folder name
(finetune/data_layout.py): train.tsv, dev.tsv, test.tsv; MNLI's
dev_matched/dev_mismatched/test_matched/test_mismatched.
"""

import dataclasses
import math
from typing import Optional

import numpy as np
from keras import ops

from finetune import bam
from finetune import data_layout
from finetune import featurization
from finetune import metrics
from finetune.heads import LinearHead
from finetune.task import Example
from finetune.task import Scorer
from finetune.task import Task
from util import storage
from util import text_files
from util.errors import UserError


@dataclasses.dataclass
class SentenceExample(Example):
  text_a: str = ""
  text_b: Optional[str] = None
  label: object = None  # a label string, a float (STS), or None (test)
  test_id: str = ""


@dataclasses.dataclass(frozen=True)
class Columns:
  """Where a split's fields are: header names, or indices if no header."""
  text_a: object
  text_b: object = None
  label: object = None
  test_id: object = None  # test files: default "index"
  header: bool = True


class GLUETask(Task):
  """A single- or pair-sentence GLUE task. Subclasses set the class
  attributes; `labels` None means regression (STS)."""

  train_columns = None  # Columns for train/dev
  test_columns = None  # Columns for test
  labels = ("0", "1")
  metric_names = ("accuracy",)
  dev_splits = ("dev",)
  test_splits = ("test",)
  double_unordered = False  # MRPC/STS: train on (b, a) too
  # Regression: the original release trains on (score - min) / max (0-1
  # for STS-B's 0-5) and this is max; predictions are reported unscaled.
  label_max = 1.0
  predictions_ext = ".tsv"

  @property
  def metric(self):
    return self.metric_names[0]

  @property
  def is_regression(self):
    return self.labels is None

  @property
  def label_scale(self):
    """What a regression target is divided by for training."""
    return self.label_max if self.config.normalize_regression_labels else 1.0

  # ------------------------------------------------------------ examples
  def _path(self, split):
    """RAW_DATA_DIR/<task>/<split>.tsv, or GLUE's own folder name there."""
    return data_layout.require(self.config.raw_data_dir, self.name, split)

  def get_examples(self, split):
    """split: "train", "dev" (every dev split) or "test"."""
    splits = {"train": ("train",), "dev": self.dev_splits,
              "test": self.test_splits}[split]
    examples = []
    columns = self.train_columns
    if split == "test":
      columns = dataclasses.replace(
          self.test_columns, test_id=self.test_columns.test_id or "index")
    for name in splits:
      examples += self._read(name, columns)
    return examples

  def _read(self, split, columns, path=None):
    if path is None:
      path = self._path(split)
    elif not storage.exists(path):
      raise UserError(f"{self.name}: {path} not found")
    # Tab-split lines, no quoting (as BERT's csv reader with quotechar
    # None, without its 131,072-character field limit). Blank lines are
    # skipped; numbers are the file's own line numbers.
    rows = [(number, line.split("\t")) for number, line in
            enumerate(text_files.read_lines(path), 1) if line.strip()]
    if not rows:
      raise UserError(f"{path} is empty")
    header = rows.pop(0)[1] if columns.header else []
    index = lambda key: (key if isinstance(key, int) else  # noqa: E731
                         _column(header, key, path))
    fields = {k: index(getattr(columns, k)) for k in
              ("text_a", "text_b", "label", "test_id")
              if getattr(columns, k) is not None}
    if not rows:
      raise UserError(f"{path} has a header line but no examples")
    examples = []
    for i, (number, row) in enumerate(rows):
      if len(row) <= max(fields.values()):
        raise UserError(f"{path} line {number}: {len(row)} columns, "
                        f"expected at least {max(fields.values()) + 1}")
      label = row[fields["label"]] if "label" in fields else None
      if label is not None:
        label = self._parse_label(label, path, number)
      examples.append(SentenceExample(
          guid=f"{split}-{i}", text_a=row[fields["text_a"]],
          text_b=row[fields["text_b"]] if "text_b" in fields else None,
          label=label,
          test_id=row[fields["test_id"]] if "test_id" in fields else str(i)))
    return examples

  def read_file(self, path):
    """Any file in the task's dev layout (with labels) or test layout
    (without): the dev layout when the file has the label column (its
    existence is checked with the config)."""
    first = next((line.split("\t") for line in text_files.read_lines(path)
                  if line.strip()), None)
    if first is None:
      raise UserError(f"{path} is empty")
    test = dataclasses.replace(
        self.test_columns, test_id=self.test_columns.test_id or "index")
    if self.train_columns.header:
      labelled = self.train_columns.label in first
    else:  # CoLA: a header line only in the test layout
      labelled = not (test.header and all(
          name in first for name in (test.text_a, test.test_id)))
    split = self.dev_splits[0]
    return self._read(split, self.train_columns if labelled else test,
                      path), labelled

  # ------------------------------------------------- a fine-tuned model
  @property
  def head_kind(self):
    return "regression" if self.is_regression else "classification"

  def head_labels(self):
    return None if self.is_regression else list(self.labels)

  def model_info(self):
    return dict(super().model_info(),
                text_pair=self.train_columns.text_b is not None)

  def _parse_label(self, label, path, line):
    if self.is_regression:
      try:
        score = float(label)
      except ValueError:
        score = math.nan
      if not math.isfinite(score):
        raise UserError(f"{path} line {line}: score '{label[:40]}' is not "
                        "a number")
      return score
    if label not in self.labels:
      raise UserError(f"{path} line {line}: unknown label '{label[:40]}' "
                      f"(expected one of {', '.join(self.labels)})")
    return label

  # ------------------------------------------------------------ features
  def featurize(self, examples, is_training):
    n = len(examples)
    if is_training and self.double_unordered and self.config.double_unordered:
      examples = examples + [dataclasses.replace(e, text_a=e.text_b,
                                                 text_b=e.text_a)
                             for e in examples]
    features = featurization.encode_pairs(
        self.tokenizer, [e.text_a for e in examples],
        [e.text_b for e in examples], self.config.max_seq_length)
    # A (b, a) row's example is its (a, b) one (BAM matches rows by it).
    features["example_index"] = features["example_index"] % max(n, 1)
    if self.is_regression:
      features["labels"] = np.array([e.label or 0.0 for e in examples],
                                    np.float32) / self.label_scale
    else:
      features["label_ids"] = np.array(
          [self.labels.index(e.label) if e.label is not None else 0
           for e in examples], np.int32)
    return features

  # ---------------------------------------------------------- head, loss
  first_token_only = True  # the [CLS] state
  per_row_outputs = True  # a label or score per row

  def build_head(self, model_config):
    return LinearHead(model_config,
                      1 if self.is_regression else len(self.labels),
                      first_token=True, name=f"{self.name}_head")

  def loss_and_outputs(self, head, hidden, features, training):
    logits = ops.cast(head(hidden, training=training), "float32")
    # A BAM student's train batches (finetune/bam.py): the teacher's
    # outputs and its share of the target, 1 - lambda (section 3.2.2).
    teacher = features.get("teacher_outputs")
    if self.is_regression:
      predictions = ops.squeeze(logits, -1)
      if teacher is not None:  # a teacher's outputs are unscaled too
        loss = bam.regression_loss(predictions, features["labels"],
                                   teacher / self.label_scale,
                                   features["teacher_weight"])
      else:
        loss = ops.square(predictions - ops.cast(features["labels"],
                                                 "float32"))
      return loss, {"predictions": predictions * self.label_scale}
    log_probs = ops.log_softmax(logits, axis=-1)
    labels = ops.cast(features["label_ids"], "int32")
    if teacher is not None:
      loss = bam.classification_loss(log_probs, labels, teacher,
                                     features["teacher_weight"])
    else:
      loss = -ops.take_along_axis(log_probs, labels[:, None], axis=-1)[:, 0]
    return loss, {"predictions": ops.argmax(logits, axis=-1),
                  "probabilities": ops.exp(log_probs)}

  def get_scorer(self, examples, features):
    return GLUEScorer(self, examples)


class GLUEScorer(Scorer):
  """Metrics of the task's `metric_names` on the dev rows (MNLI: matched,
  and mismatched as `<metric>_mm`); GLUE test TSVs on test rows."""

  def __init__(self, task, examples):
    super().__init__()
    self.task, self.examples = task, examples

  def _predictions(self):
    return self.collected()["predictions"]

  def get_results(self):
    predictions = self._predictions()
    results = {}
    splits = sorted({e.guid.split("-")[0] for e in self.examples},
                    key=list(self.task.dev_splits).index)
    for n, split in enumerate(splits):
      rows = [i for i, e in enumerate(self.examples)
              if e.guid.split("-")[0] == split]
      gold = [self.examples[i].label for i in rows]
      pred = predictions[rows]
      if not self.task.is_regression:
        gold = np.array([self.task.labels.index(g) for g in gold])
      suffix = "" if n == 0 else "_mm"
      for name in self.task.metric_names:
        results[name + suffix] = metrics.METRICS[name](gold, pred)
    return results

  def write_predictions(self, path):
    """GLUE leaderboard TSV: index and prediction per test example."""
    predictions = self._predictions()
    if self.task.is_regression:
      values = [f"{min(max(float(p), 0.0), 5.0):.3f}" for p in predictions]
    else:
      values = [self.task.labels[int(p)] for p in predictions]
    metrics.write_glue_tsv(path, [e.test_id for e in self.examples], values)


def _column(header, name, path):
  if name not in header:
    raise UserError(f"{path}: no '{name}' column (header: "
                    f"{', '.join(header)})")
  return header.index(name)


# ------------------------------------------------------------ the tasks
class CoLA(GLUETask):
  name = "cola"
  train_columns = Columns(text_a=3, label=1, header=False)
  test_columns = Columns(text_a="sentence")
  metric_names = ("mcc",)


class SST(GLUETask):
  name = "sst"
  train_columns = Columns(text_a="sentence", label="label")
  test_columns = Columns(text_a="sentence")


class MRPC(GLUETask):
  name = "mrpc"
  train_columns = Columns(text_a="#1 String", text_b="#2 String",
                          label="Quality")
  test_columns = Columns(text_a="#1 String", text_b="#2 String",
                         test_id="index")
  metric_names = ("accuracy", "f1")
  double_unordered = True


class STS(GLUETask):
  name = "sts"
  train_columns = Columns(text_a="sentence1", text_b="sentence2",
                          label="score")
  test_columns = Columns(text_a="sentence1", text_b="sentence2")
  labels = None
  label_max = 5.0
  metric_names = ("pearson", "spearman")
  double_unordered = True


class QQP(GLUETask):
  name = "qqp"
  train_columns = Columns(text_a="question1", text_b="question2",
                          label="is_duplicate")
  test_columns = Columns(text_a="question1", text_b="question2",
                         test_id="id")
  metric_names = ("accuracy", "f1")


class MNLI(GLUETask):
  name = "mnli"
  train_columns = Columns(text_a="sentence1", text_b="sentence2",
                          label="gold_label")
  test_columns = Columns(text_a="sentence1", text_b="sentence2")
  labels = ("contradiction", "entailment", "neutral")
  dev_splits = data_layout.SPLIT_FILES["mnli"]["dev"]
  test_splits = data_layout.SPLIT_FILES["mnli"]["test"]


class QNLI(GLUETask):
  name = "qnli"
  train_columns = Columns(text_a="question", text_b="sentence",
                          label="label")
  test_columns = Columns(text_a="question", text_b="sentence")
  labels = ("entailment", "not_entailment")


class RTE(QNLI):
  name = "rte"
  train_columns = Columns(text_a="sentence1", text_b="sentence2",
                          label="label")
  test_columns = Columns(text_a="sentence1", text_b="sentence2")


class WNLI(GLUETask):
  name = "wnli"
  train_columns = Columns(text_a="sentence1", text_b="sentence2",
                          label="label")
  test_columns = Columns(text_a="sentence1", text_b="sentence2")


GLUE_TASKS = (CoLA, SST, MRPC, STS, QQP, MNLI, QNLI, RTE, WNLI)
