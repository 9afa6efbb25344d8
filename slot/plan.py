"""What the slot runs: each run's name, config and steps at equal FLOPs."""

from comparison.plan import preset
from slot.flags import objective_seeds
from pretrain.config import PretrainingConfig
from util.config import apply_overrides
from util.config import load_hparams


def slot_config(name, args, arrays, data_dir, model_dir):
  """`name`'s preset at --size (comparison/plan.py's choice: its own
  configs/<objective>_<size>.json, or ELECTRA's for an ablation) +
  --hparams, at the slot's batch: seed 1's run (pretrain/multi_seed.py
  seed_config gives seed K's)."""
  config = apply_overrides(PretrainingConfig(), preset(name, args.size),
                           source=f"the {name} preset")
  objective = config.objective
  for spec in args.hparams:
    config = apply_overrides(config, load_hparams(spec), source=spec)
  config.objective = objective
  config.temperature = 1.0
  config.train_batch_size = args.batch
  config.eval_batch_size = args.batch
  config.max_seq_length = arrays.meta["max_seq_length"]
  config.max_predictions_per_seq = None  # from mask_prob and the length
  config.iterations_per_loop = args.chunk
  # Each held-out example once, at most --eval-steps batches of them.
  config.num_eval_steps = max(1, min(
      args.eval_steps, arrays.num_examples("heldout") // args.batch))
  config.mixed_precision = args.precision
  config.data_dir = data_dir  # its pretrain_arrays/: the slot's arrays
  config.model_dir = model_dir
  config.validate()
  return config


def plan(args):
  """[(name, objective as written, pretrain seed K, folder)], seed-major;
  NAME:K is seeds 1..K, NAME:A-B seeds A..B (a later slot adds seeds)."""
  runs = []
  for name, first, last in objective_seeds(args.objectives):
    for k in range(first, last + 1):
      paper = {"mlm": "bert", "bert": "bert"}.get(name, name)
      folder = f"{paper}_{args.size}" + (f".seed{k}" if k > 1 else "")
      runs.append((f"{name}.seed{k}" if k > 1 else name, name, k, folder))
  return sorted(runs, key=lambda r: r[2])


def budget_steps(entries, budget, chunk):
  """Steps spending `budget` train FLOPs per run, multiples of `chunk`."""
  return [max(chunk, int(round(budget / e["train_flops_per_step"] / chunk))
              * chunk) for e in entries]


def equal_flops_steps(entries, seconds, chunk):
  """Steps per objective with equal training FLOPs, all within `seconds`
  at the measured speeds; multiples of `chunk` (at least one chunk)."""
  per_flop = sum(e["step_s"] / e["train_flops_per_step"] for e in entries)
  budget = seconds / per_flop
  return budget, [max(chunk, int(budget / e["train_flops_per_step"] / chunk)
                      * chunk) for e in entries]


def fit_budget(entries, budget, seconds):
  """(FLOPs per run, the seconds `budget` needs): `budget`, or the most
  that fits in `seconds` at the measured step times when it does not (one
  entry per program: the seeds of one vmapped step share its time)."""
  need = sum(budget / e["train_flops_per_step"] * e["step_s"]
             for e in entries)
  if need <= seconds:
    return budget, need
  per_flop = sum(e["step_s"] / e["train_flops_per_step"] for e in entries)
  return max(0.0, seconds) / per_flop, need
