"""What a fine-tuning task is: examples, features, a head, a loss, a scorer.

A task is a small class registered in finetune/task_builder.py. The driver
(finetune/trainer.py) never looks inside a task:
  examples = task.get_examples("train")             # Python objects
  features = task.featurize(examples, is_training)   # dict of NumPy arrays,
      # one row per model input (a long SQuAD context gives several rows);
      # always input_ids, input_mask, segment_ids [N, T] (int32) and
      # "example_index" [N] (the row's example); the rest is the task's.
      # Multiple choice: [N, C, T], C sequences per row, encoded as N * C
      # rows and given to the head as hidden [B, C, T, H].
  head = task.build_head(model_config)             # a keras.layers.Layer
  loss, outputs = task.loss_and_outputs(head, hidden, features, training)
      # hidden: [B, T, H] encoder states; loss: [B] per row (keras.ops);
      # outputs: dict of tensors the scorer needs, per row.
  scorer = task.get_scorer(examples, features)
  scorer.update(outputs_numpy)  # called per eval batch, rows in order
  results = scorer.get_results()     # {"metric": float, ...}
  scorer.write_predictions(path)     # optional: predictions file(s),
      # path ending in task.predictions_ext; task.output_files(path) lists
      # every file it writes
A fine-tuned model keeps each head with task.model_info() (its head_kind
and head_labels); --do-predict reads any file of the task's layout with
  examples, labelled = task.read_file(path)
Heads and losses use keras / keras.ops only, like model/.
"""

import dataclasses

import numpy as np

from util.errors import UserError


@dataclasses.dataclass
class Example:
  """One input of a task; tasks subclass this with their own fields."""
  guid: str  # "<split>-<index>" or the dataset's own id


class Task:
  """Base class. Subclasses set `name` and implement the methods below."""

  name = ""
  metric = ""  # the headline metric, as the papers report it
  predictions_ext = ""  # of the file write_predictions writes

  def output_files(self, path):
    """Every file its scorer's write_predictions(path) writes, so that the
    driver can refuse to replace them before any work."""
    return [path]

  def __init__(self, config, tokenizer):
    # A config no one resolved: this task's default length.
    config.fill_max_seq_length(
        config.tasks if self.name in config.tasks else [self.name])
    self.config = config  # the FinetuningConfig
    self.tokenizer = tokenizer  # util.tokenization.Tokenizer

  def get_examples(self, split):
    raise NotImplementedError

  def featurize(self, examples, is_training):
    raise NotImplementedError

  def build_head(self, model_config):
    raise NotImplementedError

  def loss_and_outputs(self, head, hidden, features, training):
    raise NotImplementedError

  def get_scorer(self, examples, features):
    raise NotImplementedError

  # ---------------------------------------------- a fine-tuned model's head
  head_kind = ""  # what its head computes (export_model.py maps it)
  # Whether loss_and_outputs reads only the first token's ([CLS]) hidden
  # state: the encoder then makes no other token's last-layer output.
  first_token_only = False
  # Whether its inference outputs are one per row ([B, ...] of fixed
  # shape, none per token) for [B, T] inputs: the inference engine may
  # then cut a batch's padding (inference/engine.py), at least to
  # `min_trimmed_length` tokens.
  per_row_outputs = False
  min_trimmed_length = 1
  # Its [B, T] outputs (per token): a batch run at its own length
  # (finetune/padding.py) gives them back padded to T.
  per_token_outputs = ()
  # Whether its head needs each batch's length known when traced (a CRF's
  # scan): TensorFlow then traces a step per length, not one for all.
  static_length = False

  def head_labels(self):
    """The labels the head's outputs stand for, in order (None: no label
    list, e.g. a regression or a span head)."""
    return None

  def model_info(self):
    """What a saved fine-tuned model records of this task to rebuild and
    serve its head (loading/finetuned.py)."""
    return {"head": self.head_kind, "labels": self.head_labels()}

  def adopt_head(self, info, source):
    """Checks that the head a fine-tuned model kept for this task (its
    model_info) is the head this task builds: same kind, same labels."""
    if info.get("head") != self.head_kind:
      raise UserError(f"{source}: its {self.name} head is a "
                      f"{info.get('head')} head, but {self.name} here "
                      f"builds a {self.head_kind} head")
    mine, theirs = self.head_labels(), info.get("labels")
    if (list(mine) if mine is not None else None) != theirs:
      raise UserError(f"{source}: its {self.name} head predicts labels "
                      f"{_labels(theirs)}, but {self.name} here has "
                      f"{_labels(mine)}")

  def restore_labels(self, labels):
    """Takes a fine-tuned model's label list where the task builds its own
    from the training data (tagging); fixed label lists stay."""
    del labels

  def read_file(self, path):
    """(examples, labelled) of any file in the task's own layout (as its
    dev or test files); labelled: every example has its gold answer, so
    that the scorer's metrics mean something."""
    raise UserError(f"{self.name}: predicting a file is not supported")


def _labels(labels):
  if labels is None:
    return "none (no label list)"
  shown = ", ".join(labels[:8]) + (f" (+{len(labels) - 8} more)"
                                   if len(labels) > 8 else "")
  return f"({shown})"


class Scorer:
  """Accumulates a task's eval outputs, then computes its metrics."""

  def __init__(self):
    self.outputs = []

  def update(self, outputs):
    self.outputs.append(outputs)

  def collected(self):
    """Concatenated outputs, one row per feature row."""
    keys = self.outputs[0].keys()
    return {k: np.concatenate([np.asarray(o[k]).reshape(
        (-1,) + np.asarray(o[k]).shape[1:]) for o in self.outputs])
            for k in keys}

  def get_results(self):
    raise NotImplementedError

  def write_predictions(self, path):
    """Writes predictions (leaderboard format where there is one)."""
    del path
