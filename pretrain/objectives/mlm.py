"""BERT's masked language model: the baseline of every ELECTRA comparison.

One encoder of the discriminator's size predicts the original tokens at the
masked positions (BERT's 80/10/10 scheme by default); the vocabulary
projection, tied to the token embeddings, runs at those positions only.
"""

import numpy as np
from keras import ops

from model import Encoder
from model import MaskedLMHead
from model.positions import gather_positions
from pretrain import losses
from pretrain.objectives.base import PretrainingModel


class MaskedLMModel(PretrainingModel):

  LOG_KEYS = ("loss", "mlm_loss", "mlm_accuracy")
  EVAL_KEYS = ("masked_lm_ids", "masked_lm_weights", "mlm_predictions",
               "mlm_nll")

  def __init__(self, hparams, config, **kwargs):
    super().__init__(hparams, **kwargs)
    self.encoder = Encoder(config, name="encoder")
    self.mlm_predictions = MaskedLMHead(config, name="mlm_predictions")

  def call(self, features, training=None):
    labels = features["masked_lm_ids"]
    weights = ops.cast(features["masked_lm_weights"], "float32")
    hidden = self.encoder(features["masked_input_ids"],
                          features["input_mask"], features["segment_ids"],
                          training=training)
    hidden = gather_positions(hidden, features["masked_lm_positions"])
    logits = self.mlm_predictions(hidden, self.encoder.embeddings.token_table)
    mlm_loss, nll = losses.masked_lm_loss(
        logits, labels, weights, features.get("masked_lm_denominator"))
    predictions = ops.cast(ops.argmax(logits, axis=-1), "int32")
    return {
        "loss": mlm_loss,
        "mlm_loss": mlm_loss,
        "mlm_accuracy": losses.weighted_accuracy(predictions, labels, weights),
        "masked_lm_ids": labels,
        "masked_lm_weights": weights,
        "mlm_predictions": predictions,
        "mlm_nll": nll,
    }

  def eval_metrics(self, arrays):
    w = arrays["masked_lm_weights"] > 0
    return {
        "masked_lm_accuracy": float(np.mean(
            arrays["mlm_predictions"][w] == arrays["masked_lm_ids"][w])),
        "masked_lm_loss": float(np.mean(arrays["mlm_nll"][w])),
    }
