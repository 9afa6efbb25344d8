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
    adversarial (REINFORCE with a learned baseline).
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
from model.positions import gather_positions
from model.positions import scatter_positions
from model.config import scale_config
from pretrain import losses
from pretrain.objectives.base import ALL
from pretrain.objectives.base import GENERATOR
from pretrain.objectives.base import MAIN
from pretrain.objectives.base import MASKED
from pretrain.objectives.base import Part
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
    self.embeddings = Embeddings(disc_config, name="embeddings")
    disc_embeddings = self.embeddings
    if config.training_algorithm == "two_stage":
      # The generator stays frozen in stage two, so the discriminator gets
      # embeddings of its own, copied from the generator's at the switch.
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
    # Two-stage training (section 3.2): 1 = generator only, 2 = the
    # discriminator, initialised from the generator, which is then frozen.
    self.stage = 1 if config.training_algorithm == "two_stage" else 0
    if config.training_algorithm == "adversarial":
      self.LOG_KEYS = self.LOG_KEYS + ("policy_loss", "baseline_loss")

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
    same_size = all(getattr(config, f"generator_{k}") in (None, 1.0) for k in
                    ("hidden_size", "ffn_size", "heads", "layers"))
    fixed = config.uniform_generator or config.unigram_generator
    if fixed and config.training_algorithm != "joint":
      raise UserError(f"training_algorithm {config.training_algorithm} trains "
                      "a generator; a uniform/unigram one has nothing to train")
    if config.weight_sharing == "all" and not same_size:
      raise UserError("weight_sharing=all (untied_generator=false) uses one "
                      "encoder for both, so the generator_* multipliers must "
                      "be 1.0")
    if config.weight_sharing == "all" and config.two_tower_generator:
      raise UserError("weight_sharing=all cannot share a bidirectional "
                      "encoder with a two-tower generator")
    if config.training_algorithm == "two_stage":
      if not same_size:
        raise UserError("training_algorithm=two_stage initialises the "
                        "discriminator from the generator, so the generator_* "
                        "multipliers must be 1.0 (ELECTRA section 3.2)")
      if config.weight_sharing in ("all", "gdes") or config.two_tower_generator:
        raise UserError("training_algorithm=two_stage copies the generator "
                        "into a separate discriminator (weight_sharing "
                        "embeddings or none; no two-tower generator)")
      if not 0 <= config.two_stage_generator_steps < config.num_train_steps:
        raise UserError(f"two_stage_generator_steps must be in [0, "
                        f"num_train_steps {config.num_train_steps}), got "
                        f"{config.two_stage_generator_steps}")
    if (config.training_algorithm == "adversarial" and
        config.two_tower_generator):
      raise UserError("adversarial training needs a masked-LM generator")

  @classmethod
  def generator_parts(cls, config, gen, where=MASKED):
    """The generator's Parts (none for a uniform/unigram one): one or two
    towers, its head at `where`, adversarial training's baseline."""
    if gen is None:
      return []
    towers = 2 if config.two_tower_generator else 1
    head = "two_tower_head" if config.two_tower_generator else "mlm_head"
    parts = [Part("encoder", gen, ALL, GENERATOR)] * towers
    parts.append(Part(head, gen, where, GENERATOR))
    if config.training_algorithm == "adversarial":
      parts.append(Part("baseline_head", gen, MASKED, GENERATOR))
    return parts

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
        with_baseline=config.training_algorithm == "adversarial",
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
    gen_training = training and self.stage != 2  # frozen in stage two
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
    if self.stage == 1:  # generator only: the discriminator is not run
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

    gen_loss = gen["mlm_loss"]
    if config.training_algorithm == "adversarial":
      gen_loss = self._adversarial_loss(features, gen, token_losses, outputs)
    if self.stage == 2:
      gen_loss = ops.zeros(())  # frozen
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

  def _adversarial_loss(self, features, gen, token_losses, outputs):
    """REINFORCE on the samples, rewarded by the discriminator's loss
    there, plus the baseline's cross-entropy (appendix F)."""
    weights = ops.cast(features["masked_lm_weights"], "float32")
    denominator = features.get("masked_lm_denominator")
    positions = features["masked_lm_positions"]
    log_p = losses.log_softmax_at(gen["logits"], gen["sampled"])
    baseline_logits = ops.squeeze(
        self.generator.baseline(gen["hidden"]), -1)
    policy, baseline = losses.reinforce_losses(
        log_p, gather_positions(token_losses, positions), baseline_logits)
    policy_loss = losses.weighted_mean(policy, weights, denominator)
    baseline_loss = losses.weighted_mean(baseline, weights, denominator)
    outputs["policy_loss"] = policy_loss
    outputs["baseline_loss"] = baseline_loss
    return policy_loss + baseline_loss

  def build_variables(self):
    # Shared embeddings are built first, under the model's own scope, so
    # their path is <model>/embeddings whichever encoder uses them first.
    with keras.name_scope(self.name):
      self.embeddings(np.zeros((1, 1), np.int32))
    stage, self.stage = self.stage, 0  # stage one skips the discriminator
    try:
      super().build_variables()
    finally:
      self.stage = stage

  # ---------------------------------------------------- two-stage training
  def schedule_boundaries(self):
    if self.config.training_algorithm != "two_stage":
      return ()
    return (self.config.two_stage_generator_steps,)

  def begin_step(self, step, restored=False):
    """Two-stage training: at the switch step the discriminator starts from
    the generator; a run restored past it is already in stage two."""
    if self.stage != 1 or step < self.config.two_stage_generator_steps:
      return None
    if restored:  # the checkpoint holds stage two's weights
      self.stage = 2
      return None
    self.start_stage_two()
    return (f"two-stage training: step {step}, discriminator initialised "
            "from the generator, which is now frozen")

  def start_stage_two(self):
    """Copies the generator's encoder into the same-size discriminator
    (section 3.2: "Initialize the weights of the discriminator with the
    weights of the generator"), then switches to stage two."""
    gen = self.generator.encoder.weights
    disc = self.discriminator.weights
    if [tuple(v.shape) for v in gen] != [tuple(v.shape) for v in disc]:
      raise ValueError("two-stage training needs a same-size generator")
    for source, target in zip(gen, disc):
      target.assign(source)
    self.stage = 2

  def variables_to_train(self):
    """Stage one trains the generator alone, stage two the discriminator
    alone (ELECTRA section 3.2)."""
    if not self.stage:
      return self.trainable_variables
    trained = ([self.generator] if self.stage == 1 else
               [self.discriminator, self.discriminator_predictions])
    keep = {id(v) for layer in trained for v in layer.trainable_variables}
    return [v for v in self.trainable_variables if id(v) in keep]

  # ------------------------------------------------------------------ eval
  def eval_metrics(self, arrays):
    """The original release's eval metrics, over all eval batches."""
    out = self.generator_metrics(arrays)
    mask = arrays["disc_weights"] > 0
    if self.stage != 1:
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
