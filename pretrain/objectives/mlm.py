"""BERT's masked language model: the baseline of every ELECTRA comparison.

One encoder of the discriminator's size predicts the original tokens at the
masked positions (BERT's 80/10/10 scheme by default); the vocabulary
projection, tied to the token embeddings, runs at those positions only.
"""

import numpy as np
from keras import ops

from model import GENERATOR
from model import Encoder
from model import MaskedLMHead
from model.positions import gather_positions
from pretrain import losses
from pretrain.objectives.base import ALL
from pretrain.objectives.base import MAIN
from pretrain.objectives.base import MASKED
from pretrain.objectives.base import Part
from pretrain.objectives.base import PretrainingModel
from util.errors import UserError


class MaskedLMModel(PretrainingModel):

  NAMES = ("mlm",)
  MASK_SCHEME = "bert"  # BERT's 80/10/10
  PLL_METHOD = "mlm"
  MAIN_NETWORK = "generator"  # its one network is a masked LM
  LOG_KEYS = ("loss", "mlm_loss", "mlm_accuracy")
  EVAL_KEYS = ("masked_lm_ids", "masked_lm_weights", "mlm_predictions",
               "mlm_nll")

  def __init__(self, config, model_config, **kwargs):
    super().__init__(config, **kwargs)
    self.encoder = Encoder(model_config, name="encoder")
    self.mlm_predictions = MaskedLMHead(model_config, name="mlm_predictions")

  @classmethod
  def check_config(cls, config):
    check_no_generator(config)

  def networks(self):
    return {GENERATOR: (self.encoder, self.mlm_predictions)}

  @classmethod
  def flops_parts(cls, config, disc, gen):
    return [Part("encoder", disc, ALL, MAIN),
            Part("mlm_head", disc, MASKED, MAIN)]

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

  # ------------------------------------------------ export and scoring
  def export_head(self):
    return masked_lm_export_head(self.encoder, self.mlm_predictions)

  def pll_methods(self):
    return ("mlm",)

  def masked_lm_logits(self, features, positions):
    hidden = self.encoder(features["masked_input_ids"],
                          features["input_mask"], features["segment_ids"],
                          training=False)
    return self.mlm_predictions(gather_positions(hidden, positions),
                                self.encoder.embeddings.token_table)


def masked_lm_export_head(encoder, lm):
  """export_head of a model whose head is the tied masked-LM `lm`."""

  def head(hidden, unused_mask):
    return {"mlm_logits": ops.cast(
        lm(hidden, encoder.embeddings.token_table), "float32")}
  return encoder, head, [encoder, lm]


def check_no_generator(config):
  """For objectives whose one network is a masked LM: generator options
  name something they do not have."""
  if config.two_tower_generator:
    raise UserError(f"objective {config.objective} has no generator "
                    "network to make two-tower")
  check_learned_generator(config)


def check_learned_generator(config):
  """For objectives that need no fixed (uniform/unigram) generator."""
  if config.uniform_generator or config.unigram_generator:
    raise UserError(f"objective {config.objective} has no use for "
                    "uniform_generator/unigram_generator")
