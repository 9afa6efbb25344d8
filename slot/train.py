"""The slot's runs trained at equal FLOPs, each then saved and evaluated."""

import os
import shutil
import time

from slot.plan import budget_steps
from slot.plan import equal_flops_steps
from slot.plan import fit_budget
from slot import units as units_lib
from util.config import load_hparams


def train_runs(args, clock, units, trainers, entries, peak, returned, write):
  """Trains each measured unit (a run, or several seeds in one step) for
  its share of the budget (held-out evals at --checkpoints marks), writes
  each run's weights (a copy in `returned` too, when it is a folder) and
  evaluates it; returns the train FLOPs per run. --budget-flops that does
  not fit the time left at the measured speeds is cut to what fits."""
  by_run = {e["run"]: e for e in entries}
  # One entry per unit: its seeds share its steps and its step time.
  heads = [by_run[names[0]] for _, _, names in units]
  left = args.time_limit - clock.elapsed() - args.reserve_seconds
  if args.budget_flops:
    budget, need = fit_budget(heads, args.budget_flops, left)
    clock.log(f"budget {args.budget_flops:.3g} FLOPs per run: {need:.0f} s "
              f"of training at the measured speeds, {left:.0f} s left")
    if budget < args.budget_flops:
      clock.log(f"does not fit: training {budget:.3g} FLOPs per run "
                f"instead ({budget / args.budget_flops:.0%} of it)")
    steps = budget_steps(heads, budget, args.chunk)
  else:
    seconds = max(0.0, min(args.train_seconds, left))
    budget, steps = equal_flops_steps(heads, seconds, args.chunk)
    clock.log(f"training budget {seconds:.0f} s: {budget:.3g} FLOPs per "
              "objective")
  clock.log(f"steps {dict(zip([u[0] for u in units], steps))}")
  deadline = clock.start + args.time_limit - args.reserve_seconds
  given_warmup = any("num_warmup_steps" in load_hparams(spec)
                     for spec in args.hparams)
  for (_, unit, names), num_steps in zip(units, steps):
    group = [by_run[n] for n in names]
    if not given_warmup:  # else the --hparams' num_warmup_steps
      for name in names:
        trainers[name].config.num_warmup_steps = int(round(
            args.warmup_fraction * num_steps))
    start, histories = time.time(), [[] for _ in names]
    for entry in group:
      entry["curve"] = []
    marks = sorted({max(args.chunk, int(round(num_steps * j / args.checkpoints
                                              / args.chunk)) * args.chunk)
                    for j in range(1, args.checkpoints + 1)} - {num_steps})
    for mark in marks + [num_steps]:
      # The schedule is the whole run's at every mark.
      for history, more in zip(histories, units_lib.train(
          unit, num_steps, chunk=args.chunk, deadline=deadline,
          stop_at=mark)):
        history += more
      if trainers[names[0]].step < mark:  # past the deadline
        break
      if mark != num_steps:
        for entry in group:
          entry["curve"].append(dict(trainers[entry["run"]].evaluate(),
                                     flops=mark * entry[
                                         "train_flops_per_step"]))
    train_s = time.time() - start
    for entry, history in zip(group, histories):
      finish(args, clock, trainers[entry["run"]], entry, history, train_s,
             peak, returned, write)
  return budget


def finish(args, clock, trainer, entry, history, train_s, peak, returned,
           write):
  """A trained run's figures, weights and held-out eval into `entry`."""
  entry["train_s"] = train_s  # its unit's: the seeds trained together
  entry["steps"] = trainer.step
  entry["planned_steps"] = trainer.config.num_train_steps
  entry["warmup_steps"] = trainer.config.num_warmup_steps
  entry["train_flops"] = trainer.step * entry["train_flops_per_step"]
  entry["model_flops"] = trainer.step * entry["model_flops_per_step"]
  entry["train_mfu"] = entry["model_flops"] / train_s / (peak * 1e12)
  entry["unit_train_mfu"] = entry["train_mfu"] * entry["seeds_per_step"]
  entry["last_train_logs"] = history[-1] if history else {}
  paths = trainer.save(entry["weights_dir"], dtype=args.weights_dtype,
                       extra={"slot": {k: entry[k] for k in (
                           "name", "steps", "train_flops")}})
  entry["weights"] = [os.path.relpath(p, os.path.dirname(
      entry["weights_dir"])) for p in paths]
  if returned:
    shutil.copytree(entry["weights_dir"],
                    os.path.join(returned, entry["folder"]),
                    dirs_exist_ok=True)
  clock.log(f"wrote {len(paths)} files to {entry['folder']}/" + (
      " (and $OUT)" if returned else ""))
  write()
  entry["eval"] = trainer.evaluate()
  entry["curve"].append(dict(entry["eval"], flops=entry["train_flops"]))
  clock.log(f"{entry['name']} eval ({entry['steps']} steps, "
            f"{entry['train_flops']:.3g} FLOPs): " + ", ".join(
                f"{k} {v:.4f}" for k, v in entry["eval"].items()
                if isinstance(v, float)))
  write()
