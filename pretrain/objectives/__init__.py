"""Pretraining objectives, each a head on the one transformer core.

| objective        | settings                         | paper                      | file           |
|------------------|----------------------------------|----------------------------|----------------|
| BERT masked LM   | objective=mlm                    | BERT; ELECTRA Table 4      | mlm.py         |
| ELECTRA          | objective=electra                | ELECTRA section 2          | electra.py     |
| ELECTRA 15%      | objective=electra_15             | ELECTRA section 3.5        | electra.py     |
| Replace MLM      | objective=replace_mlm            | ELECTRA section 3.5        | ablations.py   |
| All-Tokens MLM   | objective=all_tokens_mlm         | ELECTRA section 3.5        | ablations.py   |
| Electric         | objective=electric               | Electric sections 2.1-2.5  | electric.py    |
| SCRIPT           | objective=script                 | SCRIPT section 2           | script.py      |
ELECTRA, ELECTRA 15%, Electric and the ablations each hold a generator +
discriminator pair (pair.py), which owns the generator (masked LM,
two-tower, uniform, unigram: generators.py), the weight sharing and the
training algorithm (joint, two-stage, adversarial: algorithms.py).

A new objective is one new file here: a PretrainingModel subclass whose
NAMES register it (base.py lists the hooks the rest of the code calls), and
its presets in configs/. Every module of this package is imported below, so
the registry knows them all.
"""

import dataclasses
import importlib
import pkgutil

from model.config import get_model_config
from pretrain.objectives.ablations import AllTokensMLMModel  # noqa: F401
from pretrain.objectives.ablations import ReplaceMLMModel  # noqa: F401
from pretrain.objectives.algorithms import ALGORITHMS
from pretrain.objectives.base import REGISTRY
from pretrain.objectives.base import PretrainingModel  # noqa: F401
from pretrain.objectives.electra import ElectraModel  # noqa: F401
from pretrain.objectives.electric import ElectricModel  # noqa: F401
from pretrain.objectives.mlm import MaskedLMModel  # noqa: F401
from pretrain.objectives.script import ScriptModel  # noqa: F401
from util.config import apply_overrides
from util.config import check_choice
from util.config import check_numbers
from util.errors import UserError

for _module in pkgutil.iter_modules(__path__):  # a new file registers itself
  importlib.import_module(f"{__name__}.{_module.name}")


def objective_names():
  return tuple(REGISTRY)


def objective_class(name):
  """The PretrainingModel subclass that trains objective `name`."""
  check_choice("hparam 'objective'", name, REGISTRY)
  return REGISTRY[name]


def configure(config):
  """Fills the objective's derived defaults (PretrainingConfig.resolve)."""
  cls = objective_class(config.objective)
  config.objective_hparams = resolve_own_hparams(cls, config)
  cls.configure(config)
  config.mask_scheme = config.mask_scheme or cls.MASK_SCHEME


def resolve_own_hparams(cls, config):
  """config.objective_hparams checked against the objective's HPARAMS
  dataclass (an unknown key or a value out of its RANGES named), with its
  defaults filled in, as a dict."""
  given = config.objective_hparams or {}
  if cls.HPARAMS is None:
    if given:
      raise UserError(f"objective {config.objective} has no hparams of its "
                      f"own; objective_hparams must be empty, got "
                      f"{sorted(given)}")
    return {}
  source = f"objective_hparams of {config.objective}"
  section = apply_overrides(cls.HPARAMS(), given, source)
  check_numbers(section, source)
  return dataclasses.asdict(section)


def check_config(config):
  """The objective's checks (PretrainingConfig.validate)."""
  cls = objective_class(config.objective)
  check_choice("hparam 'training_algorithm'", config.training_algorithm,
               ALGORITHMS)
  if config.training_algorithm not in cls.TRAINING_ALGORITHMS:
    owners = [n for n, c in REGISTRY.items()
              if config.training_algorithm in c.TRAINING_ALGORITHMS]
    raise UserError(f"training_algorithm {config.training_algorithm} is "
                    f"for objective {' or '.join(owners)}")
  cls.check_config(config)


def build_model(config, token_counts=None, special_ids=()):
  """The Keras model of `config.objective`, variables not yet created.

  token_counts (the dataset's, per vocabulary id) feed a unigram generator.
  """
  disc_config = get_model_config(config.model_size, config.vocab_size,
                                 config.model_hparam_overrides)
  return objective_class(config.objective).for_config(
      config, disc_config, token_counts, special_ids)
