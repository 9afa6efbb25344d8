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
Heads and losses use keras / keras.ops only, like model/.
"""

import dataclasses


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


class Scorer:
  """Accumulates a task's eval outputs, then computes its metrics."""

  def __init__(self):
    self.outputs = []

  def update(self, outputs):
    self.outputs.append(outputs)

  def collected(self):
    """Concatenated outputs, one row per feature row."""
    import numpy as np
    keys = self.outputs[0].keys()
    return {k: np.concatenate([np.asarray(o[k]).reshape(
        (-1,) + np.asarray(o[k]).shape[1:]) for o in self.outputs])
            for k in keys}

  def get_results(self):
    raise NotImplementedError

  def write_predictions(self, path):
    """Writes predictions (leaderboard format where there is one)."""
    del path
