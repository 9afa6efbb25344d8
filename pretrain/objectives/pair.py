"""The generator + discriminator pair (ELECTRA section 2), a component that
ELECTRA, ELECTRA 15%, Electric and the Table 4 ablations each hold.

A `Pair` owns what those objectives share:
  * the generator (generators.py): masked LM, two-tower, uniform, unigram,
    sized by the generator_* hparams (section 3.2);
  * the main encoder, called the discriminator as in the paper, whatever
    head the objective puts on it;
  * weight sharing between them (section 3.1): none, embeddings, all, or
    DeBERTa-V3's gdes;
  * the training algorithm (algorithms.py): joint, two-stage, adversarial;
and draws the replacements at the masked positions. The objective adds its
head and loss. The pair is never called as a layer, so its networks keep
the paths <model>/embeddings, <model>/generator, <model>/discriminator in
checkpoints.
"""

import keras
import numpy as np
from keras import ops

from model import DISCRIMINATOR
from model import GENERATOR
from model import Embeddings
from model import Encoder
from model.config import scale_config
from model.encoder import DisentangledEmbeddings
from model.positions import scatter_positions
from pretrain import losses
from pretrain.objectives.algorithms import algorithm_class
from pretrain.objectives.algorithms import same_size_generator
from pretrain.objectives.base import ALL
from pretrain.objectives.base import MASKED
from pretrain.objectives.base import Part
from pretrain.objectives.generators import FixedGenerator
from pretrain.objectives.generators import MaskedLMGenerator
from pretrain.objectives.generators import TwoTowerGenerator
from pretrain.objectives.generators import unigram_log_probs
from pretrain.sampling import sample_from_softmax
from util.errors import UserError


class Pair(keras.layers.Layer):
  """Generator + discriminator encoder, sharing what `weight_sharing` says,
  trained as `training_algorithm` says."""

  def __init__(self, config, disc_config, unigram=None, **kwargs):
    super().__init__(name="pair", **kwargs)
    self.config = config
    # What trains when, and how the generator learns.
    self.algorithm = algorithm_class(config)(config)
    self.embeddings = Embeddings(disc_config, name="embeddings")
    disc_embeddings = self.embeddings
    if self.algorithm.OWN_DISC_EMBEDDINGS:
      disc_embeddings = Embeddings(disc_config,
                                   name="discriminator_embeddings")
    elif config.weight_sharing == "gdes":
      disc_embeddings = DisentangledEmbeddings(
          disc_config, self.embeddings, name="discriminator_embeddings")
    self.discriminator = Encoder(disc_config, disc_embeddings,
                                 name="discriminator")
    self.generator = self._build_generator(
        config, self.generator_config(config, disc_config), unigram)
    self.sample_seed = keras.random.SeedGenerator(config.seed,
                                                  name="sample_seed")
    self.built = True  # no variables of its own; its networks build lazily

  # ------------------------------------------- before a model exists
  @staticmethod
  def generator_config(config, disc_config):
    return scale_config(disc_config, config.generator_multiplier,
                        config.generator_ffn_size, config.generator_heads,
                        config.generator_layers)

  @staticmethod
  def check_config(config):
    """Generator options that cannot work together, named."""
    if config.weight_sharing == "all" and not same_size_generator(config):
      raise UserError("weight_sharing=all (untied_generator=false) uses one "
                      "encoder for both, so the generator_* multipliers must "
                      "be 1.0")
    if config.weight_sharing == "all" and config.two_tower_generator:
      raise UserError("weight_sharing=all cannot share a bidirectional "
                      "encoder with a two-tower generator")
    algorithm_class(config).check_config(config)

  @staticmethod
  def generator_parts(config, gen, where=MASKED):
    """The generator's Parts (none for a uniform/unigram one): one or two
    towers, its head at `where`, and what its training algorithm adds."""
    if gen is None:
      return []
    towers = 2 if config.two_tower_generator else 1
    head = "two_tower_head" if config.two_tower_generator else "mlm_head"
    parts = [Part("encoder", gen, ALL, GENERATOR)] * towers
    parts.append(Part(head, gen, where, GENERATOR))
    return parts + algorithm_class(config).generator_parts(gen)

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

  # ------------------------------------------------------------ networks
  def networks(self, disc_head):
    """{role: (encoder, head)} (PretrainingModel.networks): the
    discriminator with `disc_head`, and a masked-LM generator (not a
    two-tower, uniform or unigram one)."""
    out = {DISCRIMINATOR: (self.discriminator, disc_head)}
    if isinstance(self.generator, MaskedLMGenerator):
      out[GENERATOR] = (self.generator.encoder, self.generator.predictions)
    return out

  @property
  def has_generator_network(self):
    return not isinstance(self.generator, FixedGenerator)

  def pll_methods(self):
    """The PLL estimators its generator gives (run_scoring.py --method)."""
    return ("mlm",) if self.has_generator_network else ()

  def _build_shared(self):
    # The shared embeddings are built first, under the calling model's
    # scope, so their path is <model>/embeddings whichever network uses
    # them first.
    if not self.embeddings.built:
      self.embeddings(np.zeros((1, 1), np.int32))

  def discriminate(self, ids, features, training=None):
    """The discriminator's hidden states [B, T, H] of `ids`."""
    self._build_shared()
    return self.discriminator(ids, features["input_mask"],
                              features["segment_ids"], training=training)

  # ------------------------------------------------------------ generator
  def generate(self, features, training):
    """Generator logits at the masked positions, its MLM loss and samples.

    Returns a dict: logits, hidden (None without a network), mlm_loss,
    mlm_nll, mlm_predictions, sampled ids [B, P] and fake_ids [B, T].
    """
    self._build_shared()
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
                                    weights, config.repeated_positions)
    return dict(logits=logits, hidden=hidden, mlm_loss=mlm_loss,
                mlm_nll=mlm_nll, sampled=sampled, fake_ids=fake_ids,
                mlm_predictions=ops.cast(ops.argmax(logits, axis=-1),
                                         "int32"))

  def cloze(self, features, training=None):
    """A two-tower generator's logits at every position and of each input
    token (TwoTowerGenerator.cloze)."""
    self._build_shared()
    return self.generator.cloze(features, training)

  def generator_outputs(self, features, gen):
    """What every model with a pair reports about its generator."""
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

  def generator_metrics(self, arrays):
    """The original release's generator eval metrics, from the EVAL_KEYS
    that generator_outputs gives."""
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

  def masked_lm_logits(self, features, positions):
    """The generator's (a two-tower one reads input_ids, never the token
    it predicts)."""
    logits, _ = self.generator(features, positions, training=False)
    return logits


def model_for_config(cls, config, disc_config, token_counts=None,
                     special_ids=()):
  """PretrainingModel.for_config of a model class `cls` that holds a pair
  (`for_config = classmethod(model_for_config)`): a unigram generator's log
  probabilities come from the dataset's token counts."""
  unigram = None
  if config.unigram_generator:
    if token_counts is None:
      raise ValueError("a unigram generator needs the dataset's token counts")
    unigram = unigram_log_probs(np.asarray(token_counts), special_ids)
  return cls(config, disc_config, unigram, name=config.objective)
