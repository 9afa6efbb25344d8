"""What every pretraining objective provides to the one training driver."""

import keras
import numpy as np


class PretrainingModel(keras.Model):
  """An objective: encoders + heads + losses in one Keras model.

  `call(features, training)` returns a dict with at least "loss" (the
  scalar to minimise); keys in LOG_KEYS are scalars averaged into the train
  log; keys in EVAL_KEYS are tensors fetched in eval mode and passed, concat-
  enated over batches as NumPy arrays, to `eval_metrics`.
  """

  LOG_KEYS = ("loss",)
  EVAL_KEYS = ()

  def __init__(self, hparams, **kwargs):
    super().__init__(**kwargs)
    self.hparams = hparams

  def eval_metrics(self, arrays):
    """NumPy arrays of EVAL_KEYS (and LOG_KEYS per batch) -> metrics."""
    return {k: float(np.mean(arrays[k])) for k in self.LOG_KEYS}

  def variables_to_train(self):
    """What the optimizer updates now (two-stage training narrows it)."""
    return self.trainable_variables

  def dummy_features(self, batch_size=1):
    """Zero features of the right shapes, to create variables eagerly."""
    h = self.hparams
    seq = lambda: np.zeros((batch_size, h.max_seq_length), np.int32)  # noqa
    picks = lambda: np.zeros((batch_size, h.max_predictions_per_seq),  # noqa
                             np.int32)
    return {"input_ids": seq(), "input_mask": seq() + 1,
            "segment_ids": seq(), "masked_input_ids": seq(),
            "scoring_mask": seq().astype(np.float32),
            "masked_lm_positions": picks(), "masked_lm_ids": picks(),
            "masked_lm_weights": picks().astype(np.float32)}

  def build_variables(self):
    self(self.dummy_features(), training=False)
