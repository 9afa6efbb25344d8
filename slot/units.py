"""The slot's programs: each run alone, or --seeds-per-step seeds of one
objective stacked in one vmapped step (pretrain/multi_seed.py)."""

from pretrain.multi_seed import MultiSeedTrainer


def group(runs, trainers, per_step):
  """[(unit name, trainer or MultiSeedTrainer, [run names])]: the runs of
  each objective (plan order) in groups of up to `per_step` seeds."""
  by_objective = {}
  for run_name, written, _, _ in runs:
    by_objective.setdefault(written, []).append(run_name)
  units = []
  for names in by_objective.values():
    for i in range(0, len(names), per_step):
      members = names[i:i + per_step]
      if len(members) == 1:
        units.append((members[0], trainers[members[0]], members))
      else:
        units.append(("+".join(members), MultiSeedTrainer(
            [trainers[n] for n in members]), members))
  order = [r[0] for r in runs]  # the plan's: seed-major
  return sorted(units, key=lambda u: order.index(u[2][0]))


def train(unit, num_steps, **kwargs):
  """Each member's history ([chunk dicts]) of training the unit."""
  if isinstance(unit, MultiSeedTrainer):
    return unit.train(num_steps, **kwargs)
  return [unit.train(num_steps, **kwargs)]


def members(unit):
  """The unit's JaxTrainers."""
  return unit.trainers if isinstance(unit, MultiSeedTrainer) else [unit]
