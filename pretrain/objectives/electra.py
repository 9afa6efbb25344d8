"""ELECTRA: replaced-token detection (ELECTRA paper section 2, appendix A).

The generator of a generator + discriminator pair (pair.py) fills the
masked positions with samples; the discriminator labels every token
original (0) or replaced (1). A sample equal to the original counts as
original. Loss = gen_weight * L_MLM + disc_weight * L_Disc. ELECTRA 15%
(objective=electra_15, section 3.5) is the same with L_Disc only over the
masked positions. The pair's settings give the paper's other variants:
weight sharing (section 3.1), generator size and kind (section 3.2,
ELECTRA-TT), and the training algorithms (section 3.2, appendix F), which
only this objective allows beside joint training.
"""

import numpy as np
from keras import ops
from sklearn import metrics as sk_metrics

from model import DiscriminatorHead
from model.positions import scatter_positions
from pretrain import losses
from pretrain.objectives.base import ALL
from pretrain.objectives.base import MAIN
from pretrain.objectives.base import Part
from pretrain.objectives.base import PretrainingModel
from pretrain.objectives.pair import Pair
from pretrain.objectives.pair import model_for_config


def binary_metrics(y_true, probs):
  """Accuracy, precision, recall and AUC of binary predictions."""
  y_true = y_true > 0.5
  y_pred = probs > 0.5
  both = 0 < y_true.sum() < y_true.size
  return {
      "accuracy": float(np.mean(y_pred == y_true)),
      "precision": float(sk_metrics.precision_score(y_true, y_pred,
                                                    zero_division=0)),
      "recall": float(sk_metrics.recall_score(y_true, y_pred,
                                              zero_division=0)),
      "auc": (float(sk_metrics.roc_auc_score(y_true, probs)) if both
              else float("nan")),
  }


class ElectraModel(PretrainingModel):
  """Replaced-token detection on the pair's discriminator."""

  NAMES = ("electra",)
  PLL_METHOD = "electra"  # ELECTRA appendix G
  TRAINING_ALGORITHMS = ("joint", "two_stage", "adversarial")
  LOG_KEYS = ("loss", "mlm_loss", "disc_loss", "mlm_accuracy",
              "disc_accuracy", "disc_skill", "replaced_fraction")
  EVAL_KEYS = ("masked_lm_ids", "masked_lm_weights", "mlm_predictions",
               "sampled_ids", "mlm_nll", "disc_probs", "disc_labels",
               "disc_weights")

  def __init__(self, config, disc_config, unigram=None, **kwargs):
    super().__init__(config, **kwargs)
    self.pair = Pair(config, disc_config, unigram)
    self.discriminator_predictions = DiscriminatorHead(
        disc_config, name="discriminator_predictions")
    self.LOG_KEYS = self.LOG_KEYS + self.algorithm.LOG_KEYS

  @property
  def algorithm(self):
    """The pair's training algorithm (algorithms.py)."""
    return self.pair.algorithm

  # ------------------------------------------- before a model exists
  for_config = classmethod(model_for_config)
  check_config = staticmethod(Pair.check_config)

  @classmethod
  def flops_parts(cls, config, disc, gen):
    # electra_15 only drops unmasked tokens from the loss.
    return Pair.generator_parts(config, gen) + [
        Part("encoder", disc, ALL, MAIN), Part("disc_head", disc, ALL, MAIN)]

  # -------------------------------------------------------- discriminator
  def disc_weights(self, features):
    """Tokens the discriminator loss covers (all real ones) and their
    global denominator."""
    return (ops.cast(features["input_mask"], "float32"),
            features.get("input_mask_denominator"))

  def call(self, features, training=None):
    config = self.config
    pair = self.pair
    gen = pair.generate(features, training)
    outputs = pair.generator_outputs(features, gen)
    if not self.algorithm.runs_discriminator():  # generator only
      zero = ops.zeros(())
      outputs.update(loss=config.gen_weight * gen["mlm_loss"], disc_loss=zero,
                     disc_accuracy=zero, disc_skill=zero,
                     replaced_fraction=zero)
      return self._placeholder_disc_outputs(features, outputs)

    fake_ids = gen["fake_ids"]
    input_mask = ops.cast(features["input_mask"], "float32")
    disc_labels = ops.cast(
        ops.not_equal(fake_ids, ops.cast(features["input_ids"], "int32")),
        "float32") * input_mask
    hidden = pair.discriminate(fake_ids, features, training)
    disc_logits = ops.cast(self.discriminator_predictions(hidden), "float32")
    weights, denominator = self.disc_weights(features)
    disc_loss, token_losses = losses.replaced_token_detection_loss(
        disc_logits, disc_labels, weights, denominator)

    gen_loss = self.algorithm.generator_loss(pair, features, gen,
                                             token_losses, outputs)
    disc_predictions = ops.cast(disc_logits > 0, "float32")
    mask_weights = ops.cast(features["masked_lm_weights"], "float32")
    outputs.update({
        "loss": config.gen_weight * gen_loss + config.disc_weight * disc_loss,
        "disc_loss": disc_loss,
        "disc_accuracy": losses.weighted_accuracy(disc_predictions,
                                                  disc_labels, weights),
        "disc_skill": losses.detection_skill(token_losses, disc_labels,
                                             weights),
        "replaced_fraction": ops.sum(disc_labels) / (
            ops.sum(mask_weights) + 1e-6),
        "disc_logits": disc_logits,
        "disc_probs": ops.sigmoid(disc_logits),
        "disc_labels": disc_labels,
        "disc_weights": weights,
        "input_mask": input_mask,
    })
    return outputs

  def _placeholder_disc_outputs(self, features, outputs):
    zeros = ops.zeros(ops.shape(features["input_ids"]), "float32")
    outputs.update(disc_logits=zeros, disc_probs=zeros, disc_labels=zeros,
                   disc_weights=zeros,
                   input_mask=ops.cast(features["input_mask"], "float32"))
    return outputs

  # ------------------------------------ the training algorithm's schedule
  def build_variables(self):
    with self.algorithm.building():
      super().build_variables()

  def schedule_boundaries(self):
    return self.algorithm.schedule_boundaries()

  def begin_step(self, step, restored=False):
    return self.algorithm.begin_step(self, step, restored)

  def variables_to_train(self):
    layers = self.algorithm.trained_layers(self)
    if layers is None:
      return self.trainable_variables
    keep = {id(v) for layer in layers for v in layer.trainable_variables}
    return [v for v in self.trainable_variables if id(v) in keep]

  # ------------------------------------------------------------------ eval
  def eval_metrics(self, arrays):
    """The original release's eval metrics, over all eval batches."""
    out = self.pair.generator_metrics(arrays)
    mask = arrays["disc_weights"] > 0
    if self.algorithm.runs_discriminator():
      disc = binary_metrics(arrays["disc_labels"][mask],
                            arrays["disc_probs"][mask])
      out.update({f"disc_{k}": v for k, v in disc.items()})
      out["disc_loss"] = float(np.mean(arrays["disc_loss"]))
    return out

  # ------------------------------------------------ export and scoring
  def networks(self):
    return self.pair.networks(self.discriminator_predictions)

  def export_head(self):
    return discriminator_export_head(self.pair.discriminator,
                                     self.discriminator_predictions)

  def pll_methods(self):
    return (self.PLL_METHOD,) + self.pair.pll_methods()

  def masked_lm_logits(self, features, positions):
    return self.pair.masked_lm_logits(features, positions)

  def appendix_g_log_a(self):
    """log((1 - p_mask) / p_mask) of ELECTRA appendix G."""
    p_mask = self.config.mask_prob
    return float(np.log((1 - p_mask) / p_mask))


class Electra15Model(ElectraModel):
  """ELECTRA 15% (section 3.5): the discriminator loss only over the masked
  positions."""

  NAMES = ("electra_15",)

  def disc_weights(self, features):
    weights = ops.cast(features["masked_lm_weights"], "float32")
    _, picked = scatter_positions(features["input_ids"],
                                  features["masked_lm_positions"],
                                  features["masked_lm_ids"], weights)
    return (ops.cast(picked, "float32"), features.get("masked_lm_denominator"))

  def appendix_g_log_a(self):
    """It sees only masked tokens, so its prior of an original token is 0."""
    return -np.inf


def discriminator_export_head(encoder, disc, energy=False):
  """export_head of a model whose head scores each token: a logit of
  "replaced", or an energy (Electric) where the score is its negative."""

  def head(hidden, mask):
    logits = ops.cast(disc(hidden), "float32")
    scores = -logits if energy else losses.log_sigmoid(-logits)
    return {"logits": logits, "token_scores": scores * mask}
  return encoder, head, [encoder, disc]
