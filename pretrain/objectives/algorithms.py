"""ELECTRA's training algorithms (section 3.2, appendix F), each a strategy
that a generator + discriminator pair (pair.py) holds: what trains at
each step, the generator's loss, and the schedule that switches them.

  joint        both trained together on gen_weight * L_MLM +
               disc_weight * L_Disc (section 2)
  two_stage    the generator alone for two_stage_generator_steps, then the
               discriminator, initialised from it, while the generator is
               frozen (section 3.2)
  adversarial  the generator trained by REINFORCE to fool the
               discriminator, with a learned baseline (appendix F)

The `training_algorithm` hparam picks one (ALGORITHMS); an objective lists
the ones it allows in its TRAINING_ALGORITHMS.
"""

import contextlib

from keras import ops

from model.positions import gather_positions
from pretrain import losses
from pretrain.objectives.base import GENERATOR
from pretrain.objectives.base import MASKED
from pretrain.objectives.base import Part
from util.errors import UserError


def same_size_generator(config):
  """Whether the generator_* multipliers leave it the discriminator's size."""
  return all(getattr(config, f"generator_{k}") in (None, 1.0) for k in
             ("hidden_size", "ffn_size", "heads", "layers"))


class Joint:
  """Generator and discriminator trained together, on one loss."""

  LOG_KEYS = ()  # what it adds to the model's train log
  OWN_DISC_EMBEDDINGS = False  # the discriminator's embeddings its own
  GENERATOR_BASELINE = False  # the generator carries a REINFORCE baseline

  def __init__(self, config):
    self.config = config

  @classmethod
  def check_config(cls, config):
    """Raises UserError for a config it cannot train."""

  @classmethod
  def generator_parts(cls, gen):
    """What it adds to the generator's forward pass (pretrain/flops.py)."""
    return []

  # ------------------------------------------------------------ each step
  def generator_trains(self):
    return True

  def runs_discriminator(self):
    return True

  def generator_loss(self, pair, features, gen, token_losses, outputs):
    """The generator's term of the loss (scaled by gen_weight)."""
    return gen["mlm_loss"]

  def trained_layers(self, model):
    """The layers the optimizer updates now; None: all of the model's."""
    return None

  @contextlib.contextmanager
  def building(self):
    """While the model creates its variables: every network runs."""
    yield

  # ------------------------------------------------------------ schedule
  def schedule_boundaries(self):
    return ()

  def begin_step(self, model, step, restored=False):
    return None


class _TrainsGenerator(Joint):
  """An algorithm that trains a generator network."""

  @classmethod
  def check_config(cls, config):
    if config.uniform_generator or config.unigram_generator:
      raise UserError(f"training_algorithm {config.training_algorithm} trains "
                      "a generator; a uniform/unigram one has nothing to train")


class TwoStage(_TrainsGenerator):
  """Stage 1 trains the generator alone (the discriminator is not run);
  stage 2 copies it into the same-size discriminator and trains that alone,
  the generator frozen and only sampled from."""

  # Frozen in stage two, so the discriminator gets embeddings of its own,
  # copied from the generator's at the switch.
  OWN_DISC_EMBEDDINGS = True

  def __init__(self, config):
    super().__init__(config)
    self.stage = 1

  @classmethod
  def check_config(cls, config):
    super().check_config(config)
    if not same_size_generator(config):
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

  def generator_trains(self):
    return self.stage != 2

  def runs_discriminator(self):
    return self.stage != 1

  def generator_loss(self, pair, features, gen, token_losses, outputs):
    return ops.zeros(()) if self.stage == 2 else gen["mlm_loss"]

  def trained_layers(self, model):
    if self.stage == 1:
      return [model.pair.generator]
    return [model.pair.discriminator, model.discriminator_predictions]

  @contextlib.contextmanager
  def building(self):
    stage, self.stage = self.stage, 0  # both networks create variables
    try:
      yield
    finally:
      self.stage = stage

  def schedule_boundaries(self):
    return (self.config.two_stage_generator_steps,)

  def begin_step(self, model, step, restored=False):
    """At the switch step the discriminator starts from the generator; a
    run restored past it is already in stage two."""
    if self.stage != 1 or step < self.config.two_stage_generator_steps:
      return None
    if restored:  # the checkpoint holds stage two's weights
      self.stage = 2
      return None
    self.start_stage_two(model)
    return (f"two-stage training: step {step}, discriminator initialised "
            "from the generator, which is now frozen")

  def start_stage_two(self, model):
    """Copies the generator's encoder into the same-size discriminator
    (section 3.2: "Initialize the weights of the discriminator with the
    weights of the generator"), then switches to stage two."""
    gen = model.pair.generator.encoder.weights
    disc = model.pair.discriminator.weights
    if [tuple(v.shape) for v in gen] != [tuple(v.shape) for v in disc]:
      raise ValueError("two-stage training needs a same-size generator")
    for source, target in zip(gen, disc):
      target.assign(source)
    self.stage = 2


class Adversarial(_TrainsGenerator):
  """The generator maximises the discriminator's loss on its samples:
  REINFORCE, rewarded by that loss at each sample, minus a learned
  baseline (appendix F)."""

  LOG_KEYS = ("policy_loss", "baseline_loss")
  GENERATOR_BASELINE = True

  @classmethod
  def check_config(cls, config):
    super().check_config(config)
    if config.two_tower_generator:
      raise UserError("adversarial training needs a masked-LM generator")

  @classmethod
  def generator_parts(cls, gen):
    return [Part("baseline_head", gen, MASKED, GENERATOR)]

  def generator_loss(self, pair, features, gen, token_losses, outputs):
    """The policy loss plus the baseline's cross-entropy."""
    weights = ops.cast(features["masked_lm_weights"], "float32")
    denominator = features.get("masked_lm_denominator")
    positions = features["masked_lm_positions"]
    log_p = losses.log_softmax_at(gen["logits"], gen["sampled"])
    baseline_logits = ops.squeeze(pair.generator.baseline(gen["hidden"]), -1)
    policy, baseline = losses.reinforce_losses(
        log_p, gather_positions(token_losses, positions), baseline_logits)
    outputs["policy_loss"] = losses.weighted_mean(policy, weights,
                                                  denominator)
    outputs["baseline_loss"] = losses.weighted_mean(baseline, weights,
                                                    denominator)
    return outputs["policy_loss"] + outputs["baseline_loss"]


ALGORITHMS = {"joint": Joint, "two_stage": TwoStage,
              "adversarial": Adversarial}


def algorithm_class(config):
  return ALGORITHMS[config.training_algorithm]
