"""The slot's runs trained at equal FLOPs, each then saved and evaluated."""

import os
import shutil
import time

from slot.plan import budget_steps
from slot.plan import equal_flops_steps
from util.config import load_hparams


def train_runs(args, clock, trainers, entries, peak, returned, write):
  """Trains each measured run for its share of the budget (held-out evals
  at --checkpoints marks), writes its weights (a copy in `returned` too,
  when it is a folder) and evaluates it; returns the train FLOPs per
  run."""
  if args.budget_flops:
    budget, steps = args.budget_flops, budget_steps(
        entries, args.budget_flops, args.chunk)
    clock.log(f"budget {budget:.3g} FLOPs per run -> steps "
              f"{dict(zip(trainers, steps))}")
  else:
    left = args.time_limit - clock.elapsed() - args.reserve_seconds
    seconds = max(0.0, min(args.train_seconds, left))
    budget, steps = equal_flops_steps(entries, seconds, args.chunk)
    clock.log(f"training budget {seconds:.0f} s: {budget:.3g} FLOPs per "
              f"objective -> steps {dict(zip(trainers, steps))}")
  deadline = clock.start + args.time_limit - args.reserve_seconds
  given_warmup = any("num_warmup_steps" in load_hparams(spec)
                     for spec in args.hparams)
  for entry, num_steps in zip(entries, steps):
    trainer = trainers[entry["run"]]
    if not given_warmup:  # else the --hparams' num_warmup_steps
      trainer.config.num_warmup_steps = int(round(args.warmup_fraction *
                                                  num_steps))
    start, history, entry["curve"] = time.time(), [], []
    marks = sorted({max(args.chunk, int(round(num_steps * j / args.checkpoints
                                              / args.chunk)) * args.chunk)
                    for j in range(1, args.checkpoints + 1)} - {num_steps})
    for mark in marks + [num_steps]:
      # The schedule is the whole run's at every mark.
      history += trainer.train(num_steps, chunk=args.chunk,
                               deadline=deadline, stop_at=mark)
      if trainer.step < mark:  # past the deadline
        break
      if mark != num_steps:
        entry["curve"].append(dict(trainer.evaluate(), flops=mark * entry[
            "train_flops_per_step"]))
    entry["train_s"] = time.time() - start
    entry["steps"] = trainer.step
    entry["planned_steps"] = num_steps
    entry["warmup_steps"] = trainer.config.num_warmup_steps
    entry["train_flops"] = trainer.step * entry["train_flops_per_step"]
    entry["model_flops"] = trainer.step * entry["model_flops_per_step"]
    entry["train_mfu"] = entry["model_flops"] / entry["train_s"] / (
        peak * 1e12)
    entry["last_train_logs"] = history[-1] if history else {}
    paths = trainer.save(entry["weights_dir"],
                         dtype=args.weights_dtype,
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
  return budget
