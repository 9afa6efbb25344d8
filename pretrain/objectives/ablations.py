"""The efficiency ablations of the ELECTRA paper (section 3.5, Table 4).

Both keep ELECTRA's generator and its samples, and change what the main
model (the "discriminator", whose encoder is what fine-tuning uses) learns:
  * Replace MLM: masked positions show generator samples instead of [MASK];
    the main model predicts the originals there (MLM loss).
  * All-Tokens MLM: the same input, but every token is predicted, through
    the sigmoid copy mechanism p = D * onehot(input) + (1 - D) * softmax.
ELECTRA 15% is in electra.py.
"""

import keras
import numpy as np
from keras import ops

from model import MaskedLMHead
from model.encoder import initializer
from model.positions import gather_positions
from pretrain import losses
from pretrain.objectives.base import ALL
from pretrain.objectives.base import MAIN
from pretrain.objectives.base import MASKED
from pretrain.objectives.base import Part
from pretrain.objectives.base import PretrainingModel
from pretrain.objectives.electra import binary_metrics
from pretrain.objectives.mlm import masked_lm_export_head
from pretrain.objectives.pair import Pair
from pretrain.objectives.pair import model_for_config


class _MainMLM(PretrainingModel):
  """What the two ablations share: ELECTRA's pair (its generator, samples
  and weight sharing), a masked LM head on the main network, only joint
  training, and no estimator of their own."""

  PLL_METHOD = ""

  def __init__(self, config, disc_config, unigram=None, **kwargs):
    super().__init__(config, **kwargs)
    self.pair = Pair(config, disc_config, unigram)
    self.main_predictions = MaskedLMHead(disc_config, name="main_predictions")

  for_config = classmethod(model_for_config)
  check_config = staticmethod(Pair.check_config)

  def main_logits(self, hidden):
    """The main model's vocabulary logits (its tied masked LM)."""
    return self.main_predictions(
        hidden, self.pair.discriminator.embeddings.token_table)

  def export_head(self):
    return masked_lm_export_head(self.pair.discriminator,
                                 self.main_predictions)

  def networks(self):
    # The main network in the discriminator's role; its masked LM head has
    # no transformers class beside a discriminator.
    return self.pair.networks(None)

  def pll_methods(self):
    return self.pair.pll_methods()

  def masked_lm_logits(self, features, positions):
    return self.pair.masked_lm_logits(features, positions)


class ReplaceMLMModel(_MainMLM):

  NAMES = ("replace_mlm",)
  LOG_KEYS = ("loss", "mlm_loss", "main_loss", "mlm_accuracy",
              "main_accuracy")
  EVAL_KEYS = ("masked_lm_ids", "masked_lm_weights", "mlm_predictions",
               "sampled_ids", "mlm_nll", "main_predictions", "main_nll")

  @classmethod
  def flops_parts(cls, config, disc, gen):
    return Pair.generator_parts(config, gen) + [
        Part("encoder", disc, ALL, MAIN), Part("mlm_head", disc, MASKED, MAIN)]

  def call(self, features, training=None):
    config = self.config
    labels = features["masked_lm_ids"]
    weights = ops.cast(features["masked_lm_weights"], "float32")
    gen = self.pair.generate(features, training)
    outputs = self.pair.generator_outputs(features, gen)
    hidden = self.pair.discriminate(gen["fake_ids"], features, training)
    logits = self.main_logits(
        gather_positions(hidden, features["masked_lm_positions"]))
    main_loss, main_nll = losses.masked_lm_loss(
        logits, labels, weights, features.get("masked_lm_denominator"))
    predictions = ops.cast(ops.argmax(logits, axis=-1), "int32")
    outputs.update({
        "loss": config.gen_weight * gen["mlm_loss"] + main_loss,
        "main_loss": main_loss,
        "main_accuracy": losses.weighted_accuracy(predictions, labels,
                                                  weights),
        "main_predictions": predictions,
        "main_nll": main_nll,
    })
    return outputs

  def eval_metrics(self, arrays):
    w = arrays["masked_lm_weights"] > 0
    out = self.pair.generator_metrics(arrays)
    out["replace_mlm_accuracy"] = float(np.mean(
        arrays["main_predictions"][w] == arrays["masked_lm_ids"][w]))
    out["replace_mlm_loss"] = float(np.mean(arrays["main_nll"][w]))
    return out


class AllTokensMLMModel(_MainMLM):

  NAMES = ("all_tokens_mlm",)
  LOG_KEYS = ("loss", "mlm_loss", "main_loss", "mlm_accuracy",
              "main_accuracy", "copy_probability")
  EVAL_KEYS = ("masked_lm_ids", "masked_lm_weights", "mlm_predictions",
               "sampled_ids", "mlm_nll", "main_correct", "main_nll",
               "input_mask", "replaced", "copy_probs")

  @classmethod
  def flops_parts(cls, config, disc, gen):
    return Pair.generator_parts(config, gen) + [
        Part("encoder", disc, ALL, MAIN), Part("mlm_head", disc, ALL, MAIN),
        Part("copy_head", disc, ALL, MAIN)]

  def __init__(self, config, disc_config, unigram=None, **kwargs):
    super().__init__(config, disc_config, unigram, **kwargs)
    self.copy_predictions = keras.layers.Dense(
        1, kernel_initializer=initializer(disc_config),
        name="copy_predictions")

  def call(self, features, training=None):
    config = self.config
    input_ids = ops.cast(features["input_ids"], "int32")
    input_mask = ops.cast(features["input_mask"], "float32")
    gen = self.pair.generate(features, training)
    outputs = self.pair.generator_outputs(features, gen)
    fake_ids = gen["fake_ids"]
    hidden = self.pair.discriminate(fake_ids, features, training)
    logits = ops.cast(self.main_logits(hidden), "float32")
    copy_logits = ops.squeeze(
        ops.cast(self.copy_predictions(hidden), "float32"), -1)
    nll = losses.copy_mechanism_nll(logits, copy_logits, fake_ids, input_ids)
    main_loss = losses.weighted_mean(nll, input_mask,
                                     features.get("input_mask_denominator"))
    correct = ops.cast(ops.equal(
        _mixture_argmax(logits, copy_logits, fake_ids), input_ids), "float32")
    outputs.update({
        "loss": config.gen_weight * gen["mlm_loss"] + main_loss,
        "main_loss": main_loss,
        "main_accuracy": losses.weighted_mean(correct, input_mask),
        "copy_probability": losses.weighted_mean(ops.sigmoid(copy_logits),
                                                 input_mask),
        "main_correct": correct,
        "main_nll": nll,
        "input_mask": input_mask,
        "replaced": ops.cast(ops.not_equal(fake_ids, input_ids), "float32"),
        "copy_probs": ops.sigmoid(copy_logits),
    })
    return outputs

  def eval_metrics(self, arrays):
    mask = arrays["input_mask"] > 0
    replaced = mask & (arrays["replaced"] > 0)
    out = self.pair.generator_metrics(arrays)
    out["all_tokens_accuracy"] = float(np.mean(arrays["main_correct"][mask]))
    out["all_tokens_loss"] = float(np.mean(arrays["main_nll"][mask]))
    if replaced.any():
      out["replaced_tokens_accuracy"] = float(np.mean(
          arrays["main_correct"][replaced]))
      # Whether the copy head flags replacements at all: a replaced token
      # can be predicted only where D < p(original) / (1 + p(original)).
      copy = arrays["copy_probs"]
      out["copy_probability_replaced"] = float(np.mean(copy[replaced]))
      out["copy_probability_kept"] = float(np.mean(copy[mask & ~replaced]))
      out["copy_auc"] = binary_metrics(replaced[mask], 1 - copy[mask])["auc"]
    return out


def _mixture_argmax(logits, copy_logits, input_ids):
  """argmax of D * onehot(input) + (1 - D) * softmax(logits), without the
  [B, T, V] one-hot and mixture: its best is the input (D + (1 - D)
  p(input)) or the softmax's argmax ((1 - D) p(best)), whichever is
  larger."""
  probs = ops.softmax(ops.cast(logits, "float32"), axis=-1)  # one kernel
  input_ids = ops.cast(input_ids, "int32")
  best = ops.cast(ops.argmax(probs, axis=-1), "int32")
  # p(input) and p(best), the max, in one gather rather than another pass.
  picked = ops.take_along_axis(probs, ops.stack([input_ids, best], axis=-1),
                               axis=-1)
  copy = ops.sigmoid(ops.cast(copy_logits, "float32"))
  keep = copy + (1 - copy) * picked[..., 0] >= (1 - copy) * picked[..., 1]
  return ops.where(keep, input_ids, best)
