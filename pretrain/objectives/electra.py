"""ELECTRA: replaced-token detection (ELECTRA paper section 2, appendix A).

A small generator (masked LM, output layer tied to the shared token
embeddings) fills the masked positions with samples; the discriminator
labels every token original (0) or replaced (1). A sample equal to the
original counts as original. Loss = gen_weight * L_MLM + disc_weight * L_Disc.
"""

import keras
import numpy as np
from keras import ops
from sklearn import metrics as sk_metrics

from model import DiscriminatorHead
from model import Embeddings
from model import Encoder
from model import MaskedLMHead
from model.positions import gather_positions
from model.positions import scatter_positions
from pretrain import losses
from pretrain.objectives.base import PretrainingModel
from pretrain.sampling import sample_from_softmax


class ElectraModel(PretrainingModel):
  """Generator + discriminator sharing token and position embeddings."""

  LOG_KEYS = ("loss", "mlm_loss", "disc_loss", "mlm_accuracy",
              "disc_accuracy", "replaced_fraction")
  EVAL_KEYS = ("masked_lm_ids", "masked_lm_weights", "mlm_predictions",
               "sampled_ids", "mlm_nll", "disc_probs", "disc_labels",
               "input_mask")

  def __init__(self, hparams, disc_config, gen_config, **kwargs):
    super().__init__(hparams, **kwargs)
    self.disc_config = disc_config
    self.gen_config = gen_config
    self.embeddings = Embeddings(disc_config, name="embeddings")
    self.discriminator = Encoder(disc_config, self.embeddings,
                                 name="discriminator")
    self.discriminator_predictions = DiscriminatorHead(
        disc_config, name="discriminator_predictions")
    self.generator = None
    if not hparams.uniform_generator:
      gen_embeddings = (None if hparams.untied_generator_embeddings
                        else self.embeddings)
      self.generator = Encoder(gen_config, gen_embeddings, name="generator")
      self.generator_predictions = MaskedLMHead(
          gen_config, name="generator_predictions")
    self.sample_seed = keras.random.SeedGenerator(hparams.seed,
                                                  name="sample_seed")

  def _generator_logits(self, features, training):
    """MLM logits at the masked positions only: [B, P, vocab]."""
    if self.generator is None:  # uniform generator: flat logits, no loss
      shape = ops.shape(features["masked_lm_positions"])
      return ops.zeros((shape[0], shape[1], self.disc_config.vocab_size))
    hidden = self.generator(features["masked_input_ids"],
                            features["input_mask"], features["segment_ids"],
                            training=training)
    hidden = gather_positions(hidden, features["masked_lm_positions"])
    return self.generator_predictions(
        hidden, self.generator.embeddings.token_table)

  def call(self, features, training=None):
    h = self.hparams
    labels = features["masked_lm_ids"]
    weights = ops.cast(features["masked_lm_weights"], "float32")
    mlm_logits = self._generator_logits(features, training)
    mlm_loss, mlm_nll = losses.masked_lm_loss(
        mlm_logits, labels, weights, features.get("masked_lm_denominator"))
    if self.generator is None:
      mlm_loss = ops.zeros(())
    mlm_predictions = ops.cast(ops.argmax(mlm_logits, axis=-1), "int32")

    sampled = sample_from_softmax(
        mlm_logits, self.sample_seed, h.temperature,
        disallow_ids=labels if h.disallow_correct else None)
    fake_ids, _ = scatter_positions(features["masked_input_ids"],
                                    features["masked_lm_positions"], sampled,
                                    weights)
    input_mask = ops.cast(features["input_mask"], "float32")
    disc_labels = ops.cast(
        ops.not_equal(fake_ids, ops.cast(features["input_ids"], "int32")),
        "float32") * input_mask

    hidden = self.discriminator(fake_ids, features["input_mask"],
                                features["segment_ids"], training=training)
    disc_logits = ops.cast(self.discriminator_predictions(hidden), "float32")
    disc_loss, _ = losses.replaced_token_detection_loss(
        disc_logits, disc_labels, input_mask,
        features.get("input_mask_denominator"))

    disc_predictions = ops.cast(disc_logits > 0, "float32")
    return {
        "loss": h.gen_weight * mlm_loss + h.disc_weight * disc_loss,
        "mlm_loss": mlm_loss,
        "disc_loss": disc_loss,
        "mlm_accuracy": losses.weighted_accuracy(mlm_predictions, labels,
                                                 weights),
        "disc_accuracy": losses.weighted_accuracy(disc_predictions,
                                                  disc_labels, input_mask),
        "replaced_fraction": ops.sum(disc_labels) / (ops.sum(weights) + 1e-6),
        "masked_lm_ids": labels,
        "masked_lm_weights": weights,
        "mlm_predictions": mlm_predictions,
        "sampled_ids": sampled,
        "mlm_nll": mlm_nll,
        "disc_logits": disc_logits,
        "disc_probs": ops.sigmoid(disc_logits),
        "disc_labels": disc_labels,
        "input_mask": input_mask,
    }

  def eval_metrics(self, arrays):
    """The original release's eval metrics, over all eval batches."""
    w = arrays["masked_lm_weights"] > 0
    labels = arrays["masked_lm_ids"]
    mask = arrays["input_mask"] > 0
    y_true = arrays["disc_labels"][mask] > 0.5
    probs = arrays["disc_probs"][mask]
    y_pred = probs > 0.5
    out = {
        "masked_lm_accuracy": float(np.mean(
            arrays["mlm_predictions"][w] == labels[w])),
        "masked_lm_loss": float(np.mean(arrays["mlm_nll"][w])),
        "sampled_masked_lm_accuracy": float(np.mean(
            arrays["sampled_ids"][w] == labels[w])),
        "disc_loss": float(np.mean(arrays["disc_loss"])),
        "disc_accuracy": float(np.mean(y_pred == y_true)),
        "disc_precision": float(sk_metrics.precision_score(
            y_true, y_pred, zero_division=0)),
        "disc_recall": float(sk_metrics.recall_score(
            y_true, y_pred, zero_division=0)),
        "disc_auc": (float(sk_metrics.roc_auc_score(y_true, probs))
                     if 0 < y_true.sum() < y_true.size else float("nan")),
    }
    if self.generator is None:
      out.pop("masked_lm_loss")
    return out
