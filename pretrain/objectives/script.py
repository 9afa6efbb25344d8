"""SCRIPT: self-critic pretraining (SCRIPT paper section 2).

One masked LM and no extra parameters. Pass one: MLM on the masked input.
Replacements are drawn from a Gumbel-softmax of its output at the masked
positions. Pass two, the critic: the same model on the sampled sequence,
where p(real_t) = S / (S + 1) with S = sum_v exp(s_tv), i.e. the binary
"replaced" logit is -logsumexp(s_t). Loss = L_MLM + alpha * L_Disc (alpha =
disc_weight, 50 in the paper's appendix), one backward pass through both.
Its pseudo-log-likelihood is one pass: PLL(x) = sum_t log p(real_t | x).
"""

import keras
import numpy as np
from keras import ops

from model import GENERATOR
from model import Encoder
from model import MaskedLMHead
from model.positions import gather_positions
from model.positions import scatter_positions
from pretrain import losses
from pretrain.objectives.base import ALL
from pretrain.objectives.base import MAIN
from pretrain.objectives.base import MASKED
from pretrain.objectives.base import Part
from pretrain.objectives.base import PretrainingModel
from pretrain.objectives.electra import binary_metrics
from pretrain.objectives.electric import pll_metrics
from pretrain.objectives.mlm import check_no_generator
from pretrain.objectives.mlm import masked_lm_export_head
from pretrain.sampling import sample_from_softmax


class ScriptModel(PretrainingModel):
  """A BERT-shaped model (names as MaskedLMModel's) that is its own critic."""

  NAMES = ("script",)
  MASK_SCHEME = "bert"
  PLL_METHOD = "script"
  MAIN_NETWORK = "generator"  # its one network is a masked LM
  LOG_KEYS = ("loss", "mlm_loss", "disc_loss", "mlm_accuracy",
              "disc_accuracy", "disc_skill", "replaced_fraction")
  EVAL_KEYS = ("masked_lm_ids", "masked_lm_weights", "mlm_predictions",
               "sampled_ids", "mlm_nll", "disc_probs", "disc_labels",
               "input_mask", "pll_tokens", "scoring_mask")

  def __init__(self, config, model_config, **kwargs):
    super().__init__(config, **kwargs)
    self.encoder = Encoder(model_config, name="encoder")
    self.mlm_predictions = MaskedLMHead(model_config, name="mlm_predictions")
    self.sample_seed = keras.random.SeedGenerator(config.seed,
                                                  name="sample_seed")

  @classmethod
  def check_config(cls, config):
    check_no_generator(config)

  @classmethod
  def flops_parts(cls, config, disc, gen):
    # Pass 1 on the masked input, pass 2 (the critic) on the sampled one,
    # whose negative score is a logsumexp of vocabulary logits everywhere
    # (priced as the MLM head's softmax); backward through both.
    encoder = Part("encoder", disc, ALL, MAIN)
    return [encoder, Part("mlm_head", disc, MASKED, MAIN),
            encoder, Part("mlm_head", disc, ALL, MAIN)]

  def vocab_logits(self, ids, features, positions=None, training=None):
    hidden = self.encoder(ids, features["input_mask"],
                          features["segment_ids"], training=training)
    if positions is not None:
      hidden = gather_positions(hidden, positions)
    return self.mlm_predictions(hidden, self.encoder.embeddings.token_table)

  def critic_logits(self, ids, features, training=None):
    """"Replaced" logits [B, T]: -logsumexp of the vocabulary scores."""
    return losses.self_critic_logits(
        self.vocab_logits(ids, features, training=training))

  def call(self, features, training=None):
    config = self.config
    input_ids = ops.cast(features["input_ids"], "int32")
    labels = features["masked_lm_ids"]
    weights = ops.cast(features["masked_lm_weights"], "float32")
    positions = features["masked_lm_positions"]
    input_mask = ops.cast(features["input_mask"], "float32")

    mlm_logits = self.vocab_logits(features["masked_input_ids"], features,
                                   positions, training)
    mlm_loss, mlm_nll = losses.masked_lm_loss(
        mlm_logits, labels, weights, features.get("masked_lm_denominator"))
    mlm_predictions = ops.cast(ops.argmax(mlm_logits, axis=-1), "int32")

    # A hard sample of Eq. 3's Gumbel-softmax is a draw from softmax(log pi
    # / tau) (Gumbel-max); the categorical kernel draws it without V
    # Gumbel variables per pick.
    sampled = sample_from_softmax(mlm_logits, self.sample_seed,
                                  config.temperature)
    fake_ids, _ = scatter_positions(features["masked_input_ids"], positions,
                                    sampled, weights, config.repeated_positions)
    disc_labels = ops.cast(ops.not_equal(fake_ids, input_ids),
                           "float32") * input_mask
    critic = self.critic_logits(fake_ids, features, training)
    disc_loss, token_losses = losses.replaced_token_detection_loss(
        critic, disc_labels, input_mask,
        features.get("input_mask_denominator"))

    outputs = {
        "loss": config.gen_weight * mlm_loss + config.disc_weight * disc_loss,
        "mlm_loss": mlm_loss,
        "disc_loss": disc_loss,
        "mlm_accuracy": losses.weighted_accuracy(mlm_predictions, labels,
                                                 weights),
        "disc_accuracy": losses.weighted_accuracy(
            ops.cast(critic > 0, "float32"), disc_labels, input_mask),
        "disc_skill": losses.detection_skill(token_losses, disc_labels,
                                             input_mask),
        "replaced_fraction": ops.sum(disc_labels) / (ops.sum(weights) + 1e-6),
        "masked_lm_ids": labels,
        "masked_lm_weights": weights,
        "mlm_predictions": mlm_predictions,
        "sampled_ids": sampled,
        "mlm_nll": mlm_nll,
        "disc_logits": critic,
        "disc_probs": ops.sigmoid(critic),
        "disc_labels": disc_labels,
        "input_mask": input_mask,
        "scoring_mask": ops.cast(features["scoring_mask"], "float32"),
    }
    if not training:  # held-out PLL: one more pass, on the clean input
      outputs["pll_tokens"] = self.pseudo_log_likelihood(features)
    return outputs

  def pseudo_log_likelihood(self, features):
    """Per-token log p(real_t | x) [B, T] in one pass (SCRIPT Eq. 7)."""
    critic = self.critic_logits(ops.cast(features["input_ids"], "int32"),
                                features)
    return losses.log_sigmoid(-critic)

  def eval_metrics(self, arrays):
    w = arrays["masked_lm_weights"] > 0
    labels = arrays["masked_lm_ids"]
    mask = arrays["input_mask"] > 0
    disc = binary_metrics(arrays["disc_labels"][mask],
                          arrays["disc_probs"][mask])
    out = {f"disc_{k}": v for k, v in disc.items()}
    out.update({
        "disc_loss": float(np.mean(arrays["disc_loss"])),
        "masked_lm_accuracy": float(np.mean(
            arrays["mlm_predictions"][w] == labels[w])),
        "masked_lm_loss": float(np.mean(arrays["mlm_nll"][w])),
        "sampled_masked_lm_accuracy": float(np.mean(
            arrays["sampled_ids"][w] == labels[w])),
    })
    out.update(pll_metrics(arrays["pll_tokens"], arrays["scoring_mask"]))
    return out

  # ------------------------------------------------ export and scoring
  def networks(self):
    return {GENERATOR: (self.encoder, self.mlm_predictions)}

  def export_head(self):
    encoder, lm_head, layers = masked_lm_export_head(self.encoder,
                                                     self.mlm_predictions)

    def head(hidden, mask):
      out = lm_head(hidden, mask)
      # p(real) = S / (S + 1), S = sum_v exp(s_v)
      out["logits"] = losses.self_critic_logits(out["mlm_logits"])
      out["token_scores"] = losses.log_sigmoid(-out["logits"]) * mask
      return out
    return encoder, head, layers

  def pll_methods(self):
    return ("script", "mlm")

  def masked_lm_logits(self, features, positions):
    return self.vocab_logits(features["masked_input_ids"], features,
                             positions, training=False)

  def one_pass_pll(self, features, positions):
    """log p(real_t | x) = log_sigmoid(logsumexp_v s_tv), the vocabulary
    projection at `positions` only."""
    logits = self.vocab_logits(features["input_ids"], features, positions,
                               training=False)
    return losses.log_sigmoid(-losses.self_critic_logits(logits))
