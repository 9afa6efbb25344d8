"""Each objective's pretraining run, with its steps set by the FLOPs budget.

ELECTRA section 3.5 and the Lite-ELECTRA report compare objectives "for the
same amount of training FLOPs": every run here spends `budget_flops` (the
ELECTRA appendix E convention of pretrain/flops.py), so an objective with a
costlier step (ELECTRA's generator, SCRIPT's second pass) gets fewer steps.
It imports the objectives' registry (Keras) but trains nothing.
"""

import dataclasses
import json
import os

from comparison.config import ROOT
from pretrain.config import PretrainingConfig
from pretrain import flops
from util.config import apply_overrides
from util.errors import UserError
from pretrain import load_objectives
from pretrain import objective_names as names_index

ALIASES = names_index.ALIASES
PRESETS = os.path.join(ROOT, "configs")


def objective_names():
  """The registered objectives, asked when needed (a new file registers)."""
  return load_objectives().objective_names()


@dataclasses.dataclass
class Run:
  name: str  # the model directory's: the objective, plus .seedK for K > 1
  hparams: dict  # PretrainingConfig fields, written to the run's JSON
  steps: int
  flops: float  # the whole run, paper convention
  flops_per_step: float
  checkpoint_steps: list  # steps whose checkpoints are evaluated
  objective: str = ""  # as the user wrote it; the report's row
  pretrain_seed: int = 1
  # The matmuls a step really runs (pretrain/flops.py model_flops_per_step:
  # no lookups, no elementwise ops, backward = 2x forward), beside the
  # paper's convention that the budget uses.
  matmul_flops_per_step: float = 0.0

  def checkpoint_flops(self, step):
    return self.flops_per_step * step


def preset_names():
  """The <name> of every configs/<name>_<size>.json."""
  return sorted(names_index.presets(PRESETS))


def preset(name, size):
  """The JSON hparams of `name` at `size`: configs/<name>_<size>.json where
  there is one; a registered objective without its own runs on the ELECTRA
  preset with `objective` switched (section 3.5's ablations share
  ELECTRA's hyperparameters)."""
  objective = ALIASES.get(name, name)
  own = objective in preset_names()
  base = objective if own else "electra"
  if not own and objective not in objective_names():
    choices = sorted(set(objective_names()) | set(preset_names()) |
                     set(ALIASES))
    raise UserError(f"unknown objective '{name}' (choose from "
                    f"{', '.join(choices)})")
  path = os.path.join(PRESETS, f"{base}_{size}.json")
  if not os.path.exists(path):
    raise UserError(f"no preset for {name} at model_size {size}: "
                    f"{os.path.relpath(path, ROOT)} does not exist")
  with open(path) as f:
    values = json.load(f)
  if base != objective:
    values["objective"] = objective
  return values


def own_pll_method(run):
  """The run's objective's own BLiMP/PLL estimator ("" = none)."""
  objective = run.hparams.get("objective", ALIASES.get(run.objective,
                                                       run.objective))
  return load_objectives().objective_class(objective).PLL_METHOD


def _config(values, vocab_size, max_seq_length):
  config = apply_overrides(PretrainingConfig(), values, "comparison hparams")
  config.vocab_size = vocab_size
  config.max_seq_length = max_seq_length
  return config


def default_budget(config, vocab_size):
  """The ELECTRA preset's whole run at this size (with the user's hparams)."""
  values = dict(preset("electra", config.model_size), **config.pretrain_hparams)
  return flops.total_train_flops(_config(values, vocab_size,
                                         config.max_seq_length))


def plan_runs(config, vocab_size, vocab_file=""):
  """One Run per objective, each spending config.budget_flops."""
  budget = config.budget_flops or default_budget(config, vocab_size)
  runs = []
  for name, num_seeds in config.objective_seeds.items():
    values = dict(preset(name, config.model_size), **config.pretrain_hparams)
    values["max_seq_length"] = config.max_seq_length
    if vocab_file:
      values["vocab_file"] = vocab_file
    if values.get("training_algorithm") == "two_stage":
      raise UserError(f"{name}: two_stage runs split their steps in two; "
                      "compare them with run_pretraining.py directly")
    run_config = _config(values, vocab_size, config.max_seq_length)
    per_step = flops.train_flops_per_step(run_config)
    matmul_per_step = flops.model_flops_per_step(run_config)
    n = config.num_checkpoints
    if budget < per_step * n:  # each run would spend more than the budget
      raise UserError(f"budget_flops {budget:.3g} is less than {name}'s {n} "
                      f"steps (one per checkpoint) of {per_step:.3g} FLOPs: "
                      f"give at least {per_step * n:.3g}")
    every = max(1, round(budget / per_step / n))
    steps = every * n  # checkpoints at exactly k/N of the run
    warmup = values.get("num_warmup_steps", 10000)
    if "num_warmup_steps" not in config.pretrain_hparams:
      warmup = min(warmup, round(config.warmup_fraction * steps))
    # A resume point every half hour: these runs span sessions and kills.
    values.setdefault("save_checkpoints_secs", 1800)
    values.update(
        num_train_steps=steps, num_warmup_steps=warmup,
        save_checkpoints_steps=every, keep_checkpoint_max=n,
        iterations_per_loop=min(values.get("iterations_per_loop", 200),
                                every))
    first_seed = values.get("seed", PretrainingConfig.seed)
    for k in range(1, num_seeds + 1):
      # Seed 1 is the run as planned before pretraining seeds existed;
      # the others differ in init, data order, masks and samples.
      seeded = dict(values, seed=first_seed + k - 1) if k > 1 else values
      runs.append(Run(name=name if k == 1 else f"{name}.seed{k}",
                      hparams=seeded, steps=steps, flops=per_step * steps,
                      flops_per_step=per_step,
                      checkpoint_steps=[every * (j + 1) for j in range(n)],
                      objective=name, pretrain_seed=k,
                      matmul_flops_per_step=matmul_per_step))
  # Every objective's first run before any second one: each row has a
  # result hours before the seeds that tighten it.
  runs.sort(key=lambda r: r.pretrain_seed)
  return budget, runs


def format_plan(budget, runs):
  lines = [f"budget {budget:.3g} train FLOPs per run (ELECTRA appendix E)"]
  for r in runs:
    lines.append(
        f"  {r.name:<16} {r.steps:>7} steps x {r.flops_per_step:.3g} = "
        f"{r.flops:.3g} FLOPs ({r.flops / budget - 1:+.1%}), checkpoints "
        f"at {', '.join(map(str, r.checkpoint_steps))}")
  return "\n".join(lines)
