"""Electric: an energy-based cloze model trained by NCE (Electric paper
sections 2.1-2.5; dissertation 5.1.3-5.1.5).

A two-tower cloze generator q (left-to-right and right-to-left causal
transformers, section 2.4) is trained by maximum likelihood on every
position and supplies k noise tokens per sequence; the transformer's energy
E(x)_t enters the binary classifier as E(x)_t + log(k q(x_t | context) /
(n - k)) (section 2.5), with no gradient into q through that term. Every
sampled position is noise, even where the sample equals the original
(Algorithm 2). Its pseudo-log-likelihood takes one pass: sum_t -E(x)_t.

Where the paper leaves room, the original release's choices are the
defaults (ElectricHparams; docs/mirroring.md).
"""

import dataclasses

import numpy as np
from keras import ops

from model import DiscriminatorHead
from model.positions import gather_positions
from model.positions import scatter_positions
from pretrain import losses
from pretrain.objectives.base import ALL
from pretrain.objectives.base import MAIN
from pretrain.objectives.base import Part
from pretrain.objectives.base import PretrainingModel
from pretrain.objectives.electra import binary_metrics
from pretrain.objectives.electra import discriminator_export_head
from pretrain.objectives.mlm import check_learned_generator
from pretrain.objectives.pair import Pair
from pretrain.sampling import sample_from_softmax
from util.config import check_choice


@dataclasses.dataclass
class ElectricHparams:
  # q's MLE loss over "candidates" (every real token but [CLS]/[SEP], the
  # original's get_candidates_mask) or "all" real tokens.
  cloze_loss_tokens: str = "candidates"
  # log(k / (n - k)) in the NCE logit: "mask_prob" is the original's
  # log(mask_prob / (1 - mask_prob)) for every row; "per_sequence" the row's
  # own k noise samples and n tokens (section 2.5's k and n).
  noise_ratio: str = "mask_prob"
  CHOICES = {"cloze_loss_tokens": ("candidates", "all"),
             "noise_ratio": ("mask_prob", "per_sequence")}


class ElectricModel(PretrainingModel):
  """A pair (shared embeddings, the discriminator as the energy model) with
  a two-tower generator, and the NCE classifier."""

  NAMES = ("electric",)
  HPARAMS = ElectricHparams
  PLL_METHOD = "electric"  # one pass: sum_t -E(x)_t
  LOG_KEYS = ("loss", "cloze_loss", "nce_loss", "cloze_accuracy",
              "nce_accuracy", "nce_skill")
  EVAL_KEYS = ("cloze_correct", "cloze_nll", "nce_probs", "nce_labels",
               "input_mask", "pll_tokens", "scoring_mask", "masked_cloze_nll",
               "masked_cloze_correct", "masked_lm_weights")

  def __init__(self, config, disc_config, **kwargs):
    super().__init__(config, **kwargs)
    self.pair = Pair(config, disc_config)
    self.discriminator_predictions = DiscriminatorHead(
        disc_config, name="discriminator_predictions")

  @classmethod
  def configure(cls, config):
    config.two_tower_generator = True  # q must be a two-tower cloze model

  @classmethod
  def check_config(cls, config):
    check_learned_generator(config)
    Pair.check_config(config)
    for name, choices in ElectricHparams.CHOICES.items():
      check_choice(f"objective_hparams {name}",
                   config.objective_hparams[name], choices)

  @classmethod
  def flops_parts(cls, config, disc, gen):
    # The NCE loss needs q of every token, replaced or not, so the cloze
    # head runs at all T; the energy head is the discriminator's.
    return Pair.generator_parts(config, gen, where=ALL) + [
        Part("encoder", disc, ALL, MAIN), Part("disc_head", disc, ALL, MAIN)]

  def networks(self):
    return self.pair.networks(self.discriminator_predictions)

  def export_head(self):
    return discriminator_export_head(self.pair.discriminator,
                                     self.discriminator_predictions,
                                     energy=True)

  def pll_methods(self):
    return (self.PLL_METHOD,) + self.pair.pll_methods()

  def masked_lm_logits(self, features, positions):
    return self.pair.masked_lm_logits(features, positions)

  def one_pass_pll(self, features, positions):
    """-E(x)_t at `positions`."""
    pll = ops.cast(self.pseudo_log_likelihood(features), "float32")
    return gather_positions(pll, positions)

  def call(self, features, training=None):
    config = self.config
    input_ids = ops.cast(features["input_ids"], "int32")
    input_mask = ops.cast(features["input_mask"], "float32")
    mask_denominator = features.get("input_mask_denominator")
    positions = features["masked_lm_positions"]
    weights = ops.cast(features["masked_lm_weights"], "float32")

    # q at every position, from the unmasked input: its MLE loss needs all
    # of them, and the classifier needs q of every token it is shown. These
    # [B, T, V] logits dominate the step, so passes over them are few:
    # logsumexp and one max; the input token's logit comes from the states.
    cloze_logits, own_logit = self.pair.cloze(features, training)
    cloze_logits = ops.cast(cloze_logits, "float32")
    log_z = ops.logsumexp(cloze_logits, axis=-1)
    cloze_nll = log_z - own_logit
    own = self.own_hparams
    cloze_loss = cloze_mle_loss(own, cloze_nll, features)

    # Algorithm 2: k noise samples in one pass, at the picked positions.
    sampled = sample_from_softmax(gather_positions(cloze_logits, positions),
                                  self.pair.sample_seed, config.temperature)
    noised_ids, replaced = scatter_positions(input_ids, positions, sampled,
                                             weights,
                                             config.repeated_positions)
    # The logits of the input and the shown token in one gather; log q of
    # the shown token from the same logits as log Z (electric_logits stops
    # its gradient).
    logits = ops.take_along_axis(
        cloze_logits, ops.stack([input_ids, ops.cast(noised_ids, "int32")],
                                axis=-1), axis=-1)
    log_q = logits[..., 1] - log_z
    # argmax == x_t as max <= logit(x_t) (a tie counts as correct): one
    # reduction, where Keras' argmax first rewrites -0.0 in a full copy.
    cloze_correct = ops.cast(
        logits[..., 0] >= ops.max(cloze_logits, axis=-1), "float32")
    energy = self.energy(noised_ids, features, training)
    nce_logits = losses.electric_logits(
        energy, log_q, log_noise_ratio(own, config.mask_prob, weights,
                                       input_mask))
    nce_labels = ops.cast(replaced, "float32") * input_mask
    nce_loss, token_losses = losses.replaced_token_detection_loss(
        nce_logits, nce_labels, input_mask, mask_denominator)

    outputs = {
        "loss": config.gen_weight * cloze_loss + config.disc_weight * nce_loss,
        "cloze_loss": cloze_loss,
        "nce_loss": nce_loss,
        "cloze_accuracy": losses.weighted_mean(cloze_correct, input_mask),
        "nce_accuracy": losses.weighted_accuracy(
            ops.cast(nce_logits > 0, "float32"), nce_labels, input_mask),
        "nce_skill": losses.detection_skill(token_losses, nce_labels,
                                            input_mask),
        "cloze_correct": cloze_correct,
        "cloze_nll": cloze_nll,
        # q at the picked positions: the original's masked_lm metrics.
        "masked_cloze_nll": gather_positions(cloze_nll, positions),
        "masked_cloze_correct": gather_positions(cloze_correct, positions),
        "masked_lm_weights": weights,
        "energy": energy,
        "log_q": log_q,
        "nce_logits": nce_logits,
        "nce_probs": ops.sigmoid(nce_logits),
        "nce_labels": nce_labels,
        "sampled_ids": sampled,
        "input_mask": input_mask,
        "scoring_mask": ops.cast(features["scoring_mask"], "float32"),
    }
    if not training:  # held-out PLL: one more pass, on the clean input
      outputs["pll_tokens"] = self.pseudo_log_likelihood(features)
    return outputs

  def energy(self, ids, features, training=None):
    """E(x)_t [B, T] (the discriminator head's output)."""
    hidden = self.pair.discriminate(ids, features, training)
    return ops.cast(self.discriminator_predictions(hidden), "float32")

  def pseudo_log_likelihood(self, features):
    """Per-token log p(x_t | x_\\t) ~ -E(x)_t (NCE self-normalises), one
    pass; sum over `scoring_mask` for a sentence's PLL."""
    return -self.energy(ops.cast(features["input_ids"], "int32"), features)

  def eval_metrics(self, arrays):
    mask = arrays["input_mask"] > 0
    scoring = arrays["scoring_mask"]
    nce = binary_metrics(arrays["nce_labels"][mask], arrays["nce_probs"][mask])
    out = {f"nce_{k}": v for k, v in nce.items()}
    out["nce_loss"] = float(np.mean(arrays["nce_loss"]))
    out["cloze_accuracy"] = float(np.mean(arrays["cloze_correct"][mask]))
    out["cloze_loss"] = float(np.mean(arrays["cloze_nll"][mask]))
    picked = arrays["masked_lm_weights"] > 0  # a repeat counts twice
    out["masked_lm_accuracy"] = float(np.mean(
        arrays["masked_cloze_correct"][picked]))
    out["masked_lm_loss"] = float(np.mean(arrays["masked_cloze_nll"][picked]))
    out.update(pll_metrics(arrays["pll_tokens"], scoring))
    return out


def pll_metrics(pll_tokens, scoring_mask):
  """Held-out pseudo-log-likelihood: per token and per sequence."""
  per_sequence = (pll_tokens * scoring_mask).sum(-1)
  return {"pll_per_token": float(per_sequence.sum() /
                                 max(scoring_mask.sum(), 1.0)),
          "pll_per_sequence": float(per_sequence.mean())}


def cloze_mle_loss(own, cloze_nll, features):
  """q's MLE loss: the mean NLL over the tokens own.cloze_loss_tokens
  names (global denominators where the trainer gives them)."""
  if own.cloze_loss_tokens == "candidates":
    return losses.weighted_mean(cloze_nll, features["scoring_mask"],
                                features.get("scoring_mask_denominator"))
  return losses.weighted_mean(cloze_nll, features["input_mask"],
                              features.get("input_mask_denominator"))


def log_noise_ratio(own, mask_prob, weights, input_mask):
  """log(k / (n - k)) of the NCE logit: a number (the original's) or [B]."""
  if own.noise_ratio == "mask_prob":
    return float(np.log(mask_prob / (1 - mask_prob)))
  return losses.noise_log_ratio(ops.sum(weights, axis=-1),
                                ops.sum(input_mask, axis=-1))
