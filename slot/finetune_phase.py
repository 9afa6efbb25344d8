"""The slot's fine-tuning: each model on each task, seed by seed."""

import dataclasses
import os
import time

import jax
import numpy as np

from finetune import arrays as ft_arrays
from finetune import task_builder
from finetune.jax_trainer import JaxFinetuner
from finetune.model import model_config_for
from finetune.model import pretrained_encoder_weights
from loading.sources import find_pretrained
from slot.control import control_config
from slot.control import control_name
from slot.measure import compile_all
from util.errors import UserError


def finetune_phase(args, clock, result, write, models):
  """Each of `models` ({name: npz folder}) fine-tuned on each task of the
  fine-tuning arrays, --finetune-seeds seeds, seed-major while time is
  left; dev outputs to $OUT/finetune_outputs.npz, figures to slot.json."""
  data = ft_arrays.load(args.finetune_data)
  config = data.config
  device = jax.devices()[0]
  result.setdefault("device", device.device_kind)
  result.setdefault("platform", device.platform)
  result.setdefault("jax", jax.__version__)
  config.mixed_precision = ("bfloat16" if args.precision == "auto" and
                            device.platform != "cpu" else
                            "float32" if args.precision == "auto" else
                            args.precision)
  tasks = task_builder.get_tasks(config, None)
  if args.finetune_tasks:
    wanted = args.finetune_tasks.split(",")
    unknown = sorted(set(wanted) - {t.name for t in tasks})
    if unknown:
      raise UserError(f"--finetune-tasks: {', '.join(unknown)} not in the "
                      f"fine-tuning arrays ({', '.join(data.task_names)})")
    tasks = [t for t in tasks if t.name in wanted]
  for task in tasks:
    task.restore_labels(data.meta["tasks"][task.name]["labels"])
  encoders, shapes = {}, {}
  for name, path in models.items():
    pretrained = find_pretrained(path)
    model_config = model_config_for(pretrained, config)
    encoders[name] = pretrained_encoder_weights(pretrained, config)
    shapes[name] = model_config
  models = list(models)
  if args.random_init_control:
    control = control_name(args)
    shapes[control] = control_config(args, config, data.meta["vocab_size"])
    models.append(control)
  # One compiled step per task and encoder shape (BERT-Small and
  # ELECTRA-Small's discriminator share one).
  distinct = {}
  for name, model_config in shapes.items():
    distinct.setdefault(repr(dataclasses.asdict(model_config)),
                        (name, model_config))
  finetuners = {}
  for key, (_, model_config) in distinct.items():
    for task in tasks:
      finetuners[(key, task.name)] = JaxFinetuner(
          config, model_config, [task], data, device, clock.log,
          chunk=args.finetune_chunk)
  if args.random_init_control:  # its encoder as a fresh model builds it
    key = repr(dataclasses.asdict(shapes[control]))
    first = finetuners[(key, tasks[0].name)]
    encoders[control] = first.initial_encoder_weights(config.seed)
  steps = {t.name: data.meta["tasks"][t.name]["train_steps"] for t in tasks}
  clock.log(f"fine-tuning {', '.join(models)} on "
            f"{', '.join(t.name for t in tasks)} "
            f"({config.mixed_precision}, {args.finetune_seeds} seeds, "
            f"steps {steps})")
  labelled = {(task if len(distinct) == 1 else f"{task}{i}"): f
              for i, ((_, task), f) in enumerate(finetuners.items())}
  result["finetune_compile"] = compile_all(labelled, 0, clock)
  entries = result["finetune"] = []
  outputs = {}
  deadline = clock.start + args.time_limit - 10
  per_trial = {}
  for seed_index in range(args.finetune_first_seed - 1, args.finetune_seeds):
    seed = config.seed + seed_index
    for name in models:
      key = repr(dataclasses.asdict(shapes[name]))
      for task in tasks:
        guess = per_trial.get(task.name, 0.0)
        if time.time() + guess > deadline:
          clock.log(f"skipping {name} {task.name} seed {seed}: "
                    f"{guess:.0f} s would pass the time limit")
          continue
        began = time.time()
        out, summary = finetuners[(key, task.name)].trial(encoders[name],
                                                          seed)
        per_trial[task.name] = max(guess, time.time() - began)
        for k, v in out.items():
          outputs[f"{name}/{task.name}/{seed}/{k}"] = v
        entries.append({"model": name, "task": task.name, "seed": seed,
                        "trial_s": time.time() - began, **summary})
        clock.log(f"{name} {task.name} seed {seed}: {summary['steps']} "
                  f"steps in {summary['train_s']:.1f} s, loss "
                  f"{summary['final_loss']:.4f}, dev loss "
                  f"{summary['dev_loss']:.4f}")
    np.savez_compressed(os.path.join(args.out, ft_arrays.OUTPUTS), **outputs)
    write()
  result["finetune_config"] = dataclasses.asdict(config)
  write()
  return result
