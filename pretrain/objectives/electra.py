"""ELECTRA: replaced-token detection (ELECTRA paper section 2, appendix A).

A small generator fills the masked positions with samples; the
discriminator labels every token original (0) or replaced (1). A sample
equal to the original counts as original. Loss = gen_weight * L_MLM +
disc_weight * L_Disc. Also here, as settings of the same model:
  * ELECTRA 15% (objective=electra_15, section 3.5): L_Disc only over the
    masked positions;
  * weight sharing none / embeddings / all, and DeBERTa-V3's GDES;
  * generators: masked LM, two-tower (ELECTRA-TT), uniform, unigram;
  * training algorithms (section 3.2, appendix F): joint, two-stage,
    adversarial, strategies in algorithms.py.
"""

import keras
import numpy as np
from keras import ops
from sklearn import metrics as sk_metrics

from model import DISCRIMINATOR
from model import DiscriminatorHead
from model import Embeddings
from model import Encoder
from model.encoder import DisentangledEmbeddings
from model.positions import scatter_positions
from model.config import scale_config
from pretrain import losses
from pretrain.objectives.base import ALL
from pretrain.objectives.base import GENERATOR
from pretrain.objectives.base import MAIN
from pretrain.objectives.base import MASKED
from pretrain.objectives.base import Part
from pretrain.objectives.algorithms import algorithm_class
from pretrain.objectives.algorithms import same_size_generator
from pretrain.objectives.base import PretrainingModel
from pretrain.objectives.generators import FixedGenerator
from pretrain.objectives.generators import MaskedLMGenerator
from pretrain.objectives.generators import TwoTowerGenerator
from pretrain.objectives.generators import unigram_log_probs
from pretrain.sampling import sample_from_softmax
from util.errors import UserError


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
  """Generator + discriminator, sharing what `weight_sharing` says."""

  NAMES = ("electra", "electra_15")
  PLL_METHOD = "electra"  # ELECTRA appendix G
  TRAINING_ALGORITHMS = ("joint", "two_stage", "adversarial")
  ENERGY = False  # Electric: the head's output is an energy, not a logit
  LOG_KEYS = ("loss", "mlm_loss", "disc_loss", "mlm_accuracy",
              "disc_accuracy", "disc_skill", "replaced_fraction")
  EVAL_KEYS = ("masked_lm_ids", "masked_lm_weights", "mlm_predictions",
               "sampled_ids", "mlm_nll", "disc_probs", "disc_labels",
               "disc_weights")

  def __init__(self, config, disc_config, gen_config, unigram=None,
               **kwargs):
    super().__init__(config, **kwargs)
    self.disc_config = disc_config
    self.gen_config = gen_config
    sharing = config.weight_sharing
    # What trains when, and how the generator learns (algorithms.py).
    self.algorithm = algorithm_class(config)(config)
    self.embeddings = Embeddings(disc_config, name="embeddings")
    disc_embeddings = self.embeddings
    if self.algorithm.OWN_DISC_EMBEDDINGS:
      disc_embeddings = Embeddings(disc_config,
                                   name="discriminator_embeddings")
    elif sharing == "gdes":
      disc_embeddings = DisentangledEmbeddings(
          disc_config, self.embeddings, name="discriminator_embeddings")
    self.discriminator = Encoder(disc_config, disc_embeddings,
                                 name="discriminator")
    self.generator = self._build_generator(config, gen_config, unigram)
    self._build_discriminator_head(disc_config)
    self.sample_seed = keras.random.SeedGenerator(config.seed,
                                                  name="sample_seed")
    self.LOG_KEYS = self.LOG_KEYS + self.algorithm.LOG_KEYS

  # ------------------------------------------- before a model exists
  @classmethod
  def for_config(cls, config, disc_config, token_counts=None,
                   special_ids=()):
    gen_config = scale_config(disc_config, config.generator_multiplier,
                              config.generator_ffn_size,
                              config.generator_heads,
                              config.generator_layers)
    unigram = None
    if config.unigram_generator:
      if token_counts is None:
        raise ValueError("a unigram generator needs the dataset's token "
                         "counts")
      unigram = unigram_log_probs(np.asarray(token_counts), special_ids)
    return cls(config, disc_config, gen_config, unigram,
               name=config.objective)

  @classmethod
  def check_config(cls, config):
    """Generator options that cannot work together, named."""
    if config.weight_sharing == "all" and not same_size_generator(config):
      raise UserError("weight_sharing=all (untied_generator=false) uses one "
                      "encoder for both, so the generator_* multipliers must "
                      "be 1.0")
    if config.weight_sharing == "all" and config.two_tower_generator:
      raise UserError("weight_sharing=all cannot share a bidirectional "
                      "encoder with a two-tower generator")
    algorithm_class(config).check_config(config)

  @classmethod
  def generator_parts(cls, config, gen, where=MASKED):
    """The generator's Parts (none for a uniform/unigram one): one or two
    towers, its head at `where`, and what its training algorithm adds."""
    if gen is None:
      return []
    towers = 2 if config.two_tower_generator else 1
    head = "two_tower_head" if config.two_tower_generator else "mlm_head"
    parts = [Part("encoder", gen, ALL, GENERATOR)] * towers
    parts.append(Part(head, gen, where, GENERATOR))
    return parts + algorithm_class(config).generator_parts(gen)

  @classmethod
  def flops_parts(cls, config, disc, gen):
    # electra_15 only drops unmasked tokens from the loss.
    return cls.generator_parts(config, gen) + [
        Part("encoder", disc, ALL, MAIN), Part("disc_head", disc, ALL, MAIN)]

  def _build_generator(self, config, gen_config, unigram):
    if config.uniform_generator or config.unigram_generator:
      return FixedGenerator(gen_config.vocab_size, unigram, name="generator")
    sharing = config.weight_sharing
    embeddings = None if sharing == "none" else self.embeddings
    if config.two_tower_generator:
      return TwoTowerGenerator(gen_config, embeddings, name="generator")
    return MaskedLMGenerator(
        gen_config, embeddings,
        encoder=self.discriminator if sharing == "all" else None,
        with_baseline=self.algorithm.GENERATOR_BASELINE,
        name="generator")

  def _build_discriminator_head(self, model_config):
    self.discriminator_predictions = DiscriminatorHead(
        model_config, name="discriminator_predictions")

  def networks(self):
    return {DISCRIMINATOR: (self.discriminator,
                            self.discriminator_predictions),
            **self.generator_networks()}

  def generator_networks(self):
    # A masked-LM generator; not a two-tower, uniform or unigram one.
    if isinstance(self.generator, MaskedLMGenerator):
      return {GENERATOR: (self.generator.encoder, self.generator.predictions)}
    return {}

  @property
  def has_generator_network(self):
    return not isinstance(self.generator, FixedGenerator)

  # ------------------------------------------------------------ generator
  def generate(self, features, training):
    """Generator logits at the masked positions, its MLM loss and samples.

    Returns a dict: logits, hidden (None without a network), mlm_loss,
    mlm_nll, mlm_predictions, sampled ids [B, P] and fake_ids [B, T].
    """
    config = self.config
    labels = features["masked_lm_ids"]
    weights = ops.cast(features["masked_lm_weights"], "float32")
    gen_training = training and self.algorithm.generator_trains()
    logits, hidden = self.generator(features, features["masked_lm_positions"],
                                    training=gen_training)
    mlm_loss, mlm_nll = losses.masked_lm_loss(
        logits, labels, weights, features.get("masked_lm_denominator"))
    if not self.has_generator_network:
      mlm_loss = ops.zeros(())
    sampled = sample_from_softmax(
        logits, self.sample_seed, config.temperature,
        disallow_ids=labels if config.disallow_correct else None)
    fake_ids, _ = scatter_positions(features["masked_input_ids"],
                                    features["masked_lm_positions"], sampled,
                                    weights)
    return dict(logits=logits, hidden=hidden, mlm_loss=mlm_loss,
                mlm_nll=mlm_nll, sampled=sampled, fake_ids=fake_ids,
                mlm_predictions=ops.cast(ops.argmax(logits, axis=-1),
                                         "int32"))

  def generator_outputs(self, features, gen):
    """What every ELECTRA-family model reports about its generator."""
    labels = features["masked_lm_ids"]
    weights = ops.cast(features["masked_lm_weights"], "float32")
    return {
        "mlm_loss": gen["mlm_loss"],
        "mlm_accuracy": losses.weighted_accuracy(gen["mlm_predictions"],
                                                 labels, weights),
        "masked_lm_ids": labels,
        "masked_lm_weights": weights,
        "mlm_predictions": gen["mlm_predictions"],
        "sampled_ids": gen["sampled"],
        "mlm_nll": gen["mlm_nll"],
    }

  # -------------------------------------------------------- discriminator
  def disc_weights(self, features):
    """Tokens the discriminator loss covers: all (ELECTRA) or only the
    masked ones (ELECTRA 15%), with the matching global denominator."""
    if self.config.objective == "electra_15":
      weights = ops.cast(features["masked_lm_weights"], "float32")
      _, picked = scatter_positions(features["input_ids"],
                                    features["masked_lm_positions"],
                                    features["masked_lm_ids"], weights)
      return (ops.cast(picked, "float32"),
              features.get("masked_lm_denominator"))
    return (ops.cast(features["input_mask"], "float32"),
            features.get("input_mask_denominator"))

  def call(self, features, training=None):
    config = self.config
    gen = self.generate(features, training)
    outputs = self.generator_outputs(features, gen)
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
    hidden = self.discriminator(fake_ids, features["input_mask"],
                                features["segment_ids"], training=training)
    disc_logits = ops.cast(self.discriminator_predictions(hidden), "float32")
    weights, denominator = self.disc_weights(features)
    disc_loss, token_losses = losses.replaced_token_detection_loss(
        disc_logits, disc_labels, weights, denominator)

    gen_loss = self.algorithm.generator_loss(self, features, gen,
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

  def build_variables(self):
    # Shared embeddings are built first, under the model's own scope, so
    # their path is <model>/embeddings whichever encoder uses them first.
    with keras.name_scope(self.name):
      self.embeddings(np.zeros((1, 1), np.int32))
    with self.algorithm.building():
      super().build_variables()

  # ------------------------------------ the training algorithm's schedule
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
    out = self.generator_metrics(arrays)
    mask = arrays["disc_weights"] > 0
    if self.algorithm.runs_discriminator():
      disc = binary_metrics(arrays["disc_labels"][mask],
                            arrays["disc_probs"][mask])
      out.update({f"disc_{k}": v for k, v in disc.items()})
      out["disc_loss"] = float(np.mean(arrays["disc_loss"]))
    return out

  def generator_metrics(self, arrays):
    w = arrays["masked_lm_weights"] > 0
    labels = arrays["masked_lm_ids"]
    out = {
        "masked_lm_accuracy": float(np.mean(
            arrays["mlm_predictions"][w] == labels[w])),
        "sampled_masked_lm_accuracy": float(np.mean(
            arrays["sampled_ids"][w] == labels[w])),
    }
    if self.has_generator_network:
      out["masked_lm_loss"] = float(np.mean(arrays["mlm_nll"][w]))
    return out

  # ------------------------------------------------ export and scoring
  def export_head(self):
    encoder, disc = self.discriminator, self.discriminator_predictions
    energy = self.ENERGY

    def head(hidden, mask):
      logits = ops.cast(disc(hidden), "float32")
      scores = -logits if energy else losses.log_sigmoid(-logits)
      return {"logits": logits, "token_scores": scores * mask}
    return encoder, head, [encoder, disc]

  def pll_methods(self):
    own = (self.PLL_METHOD,) if self.PLL_METHOD else ()
    return own + (("mlm",) if self.has_generator_network else ())

  def masked_lm_logits(self, features, positions):
    """The generator's (a two-tower one reads input_ids, never the token
    it predicts)."""
    logits, _ = self.generator(features, positions, training=False)
    return logits

  def appendix_g_log_a(self):
    """log((1 - p_mask) / p_mask) of ELECTRA appendix G; ELECTRA 15% sees
    only masked tokens, so its prior of an original token is 0."""
    if self.config.objective == "electra_15":
      return -np.inf
    p_mask = self.config.mask_prob
    return float(np.log((1 - p_mask) / p_mask))
