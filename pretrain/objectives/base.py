"""What every pretraining objective provides, and the registry that finds it.

An objective is one `PretrainingModel` subclass in one file of this package;
its NAMES register it for the `objective` hparam. Everything the rest of the
code asks about an objective is a hook here (defaults and checks of its
config, the parts it runs for FLOPs counting, its export head, its PLL
estimators, its per-step schedule), so no code outside this package branches
on an objective's name or type.
"""

import collections

import keras
import numpy as np

from model import GENERATOR  # noqa: F401 (a Part's network, as the role)
from util.errors import UserError

REGISTRY = {}  # objective name -> PretrainingModel subclass

# A network or head one step runs forward, for pretrain/flops pricing: kind is
# encoder, mlm_head, two_tower_head, disc_head, copy_head or baseline_head
# (pretrain/flops.py prices them), or a HeadCost an objective's own head
# brings; config the TransformerConfig with its sizes (a two-tower head: one
# tower's); where ALL tokens or the MASKED ones; network GENERATOR or MAIN
# (two-stage training trains them apart).
Part = collections.namedtuple("Part", "kind config where network")
# A head's forward FLOPs at one position, as functions of its
# TransformerConfig: `paper` by ELECTRA appendix E's count (every op), and
# `matmul`, the matrix multiplies alone (the MFU convention).
HeadCost = collections.namedtuple("HeadCost", "paper matmul")
ALL, MASKED = "all", "masked"
MAIN = "main"


class PretrainingModel(keras.Model):
  """An objective: encoders + heads + losses in one Keras model.

  `call(features, training)` returns a dict with at least "loss" (the
  scalar to minimise); keys in LOG_KEYS are scalars averaged into the train
  log; keys in EVAL_KEYS are tensors fetched in eval mode and passed, concat-
  enated over batches as NumPy arrays, to `eval_metrics`.
  """

  NAMES = ()  # the `objective` hparam values this class trains
  LOG_KEYS = ("loss",)
  EVAL_KEYS = ()
  MASK_SCHEME = "electra"  # its inputs' default masking (pretrain/masking.py)
  PLL_METHOD = ""  # its own run_scoring.py estimator ("" = none)
  TRAINING_ALGORITHMS = ("joint",)  # the training_algorithm values it has
  # Its main network (interop/weights.py role): fine-tuning starts there.
  MAIN_NETWORK = "discriminator"
  # A dataclass of the hparams this objective alone has (with RANGES, as
  # PretrainingConfig's): set by config.objective_hparams, read as
  # self.own_hparams. None: it has none.
  HPARAMS = None

  def __init_subclass__(cls, **kwargs):
    super().__init_subclass__(**kwargs)
    for name in cls.__dict__.get("NAMES", ()):
      REGISTRY[name] = cls

  def __init__(self, config, **kwargs):
    super().__init__(**kwargs)
    self.config = config

  @property
  def own_hparams(self):
    """This objective's HPARAMS, as config.objective_hparams sets them."""
    return self.HPARAMS(**self.config.objective_hparams)

  # ------------------------------------------- before a model exists
  @classmethod
  def for_config(cls, config, disc_config, token_counts=None,
                   special_ids=()):
    """The model of `config`, variables not yet created."""
    return cls(config, disc_config, name=config.objective)

  @classmethod
  def configure(cls, config):
    """Fills this objective's derived defaults into `config`."""

  @classmethod
  def check_config(cls, config):
    """Raises UserError for a config this objective cannot train with."""

  @classmethod
  def flops_parts(cls, config, disc, gen):
    """The Parts one training step runs, forward (pretrain/flops.py prices
    them). disc sizes the main model, gen the generator (None: no network).
    """
    raise NotImplementedError(f"{cls.__name__} does not count its FLOPs")

  # ---------------------------------------------------------- training
  def eval_metrics(self, arrays):
    """NumPy arrays of EVAL_KEYS (and LOG_KEYS per batch) -> metrics."""
    return {k: float(np.mean(arrays[k])) for k in self.LOG_KEYS}

  def variables_to_train(self):
    """What the optimizer updates now (two-stage training narrows it)."""
    return self.trainable_variables

  def schedule_boundaries(self):
    """Steps at which the training loop must stop and call begin_step."""
    return ()

  def begin_step(self, step, restored=False):
    """Called at each of schedule_boundaries (and once when a run is
    restored at `step`, with restored=True): a schedule of the objective's
    own, such as two-stage training's switch. Returns a line to log when
    what trains changed (the trainer then retraces its step), else None."""
    return None

  def dummy_features(self, batch_size=1):
    """Zero features of the right shapes, to create variables eagerly."""
    config = self.config
    seq = lambda: np.zeros(
        (batch_size, config.max_seq_length), np.int32)  # noqa
    picks = lambda: np.zeros(
        (batch_size, config.max_predictions_per_seq),  # noqa
        np.int32)
    return {"input_ids": seq(), "input_mask": seq() + 1,
            "segment_ids": seq(), "masked_input_ids": seq(),
            "scoring_mask": seq().astype(np.float32),
            "masked_lm_positions": picks(), "masked_lm_ids": picks(),
            "masked_lm_weights": picks().astype(np.float32)}

  def build_variables(self):
    self(self.dummy_features(), training=False)

  # ------------------------------------------------ export and scoring
  def networks(self):
    """{role: (encoder, head or None)}: the networks export, import,
    scoring and fine-tuning read (roles DISCRIMINATOR and GENERATOR of
    model/__init__.py, as transformers' ELECTRA classes; head None where
    transformers has no class for it)."""
    raise UserError(f"a {type(self).__name__} names no networks "
                    "(PretrainingModel.networks)")

  def export_head(self):
    """(encoder, head, layers) for a SavedModel: head(hidden, mask) gives
    the objective's extra outputs ("logits"/"token_scores"/"mlm_logits");
    layers hold the variables exported."""
    raise UserError(f"cannot export a {type(self).__name__} as a SavedModel")

  def pll_methods(self):
    """The PLL estimators (run_scoring.py --method) this model allows."""
    return ()

  def masked_lm_logits(self, features, positions):
    """Vocabulary logits [B, P, V] at `positions` of masked_input_ids."""
    raise UserError(f"a {type(self).__name__} has no masked LM")

  def one_pass_pll(self, features, positions):
    """Per-token PLL [B, P] at `positions`, one pass on the clean text."""
    raise UserError(f"a {type(self).__name__} has no one-pass PLL")

  def appendix_g_log_a(self):
    """ELECTRA appendix G's log((1 - p_mask) / p_mask), the prior of an
    original token, for the "electra" PLL estimator (scoring/pll.py)."""
    raise UserError(f"a {type(self).__name__} has no appendix G estimator")
