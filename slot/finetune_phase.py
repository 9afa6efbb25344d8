"""The slot's fine-tuning through run_finetuning.py (its JAX path, the
tasks read as the exported arrays: --task-arrays): each model on each
task, seed by seed while time is left."""

import dataclasses
import json
import os
import tempfile
import time

import jax
import keras
import numpy as np

import run_finetuning
from finetune import arrays as ft_arrays
from finetune import task_arrays
from interop import npz_weights
from interop.weights import DISCRIMINATOR
from interop.weights import export_weights
from slot.control import control_name
from slot.control import control_pretrain_config
from util.errors import UserError

# The export's settings that are not the script's hparams: paths, what
# to run, and what the export fixed (task_arrays reads those itself).
NOT_PASSED = ("data_dir", "model_name", "task_names", "raw_data_dir",
              "task_arrays", "init_checkpoint", "vocab_file", "output_dir",
              "predict_file", "predict_output", "num_trials", "overwrite",
              "max_seq_length", "do_predict", "write_test_outputs",
              "write_dev_outputs", "keep_model")


def finetune_phase(args, clock, result, write, models):
  """Each of `models` ({name: npz folder}) fine-tuned on each task of the
  fine-tuning arrays, --finetune-seeds seeds, seed-major while time is
  left; dev outputs to $OUT/finetune_outputs.npz, figures to slot.json."""
  # Its metadata only: each call of the script loads the arrays itself.
  meta = task_arrays.read_export(args.finetune_data)
  config = ft_arrays.load_config(meta)
  device = jax.devices()[0]
  result.setdefault("device", device.device_kind)
  result.setdefault("platform", device.platform)
  result.setdefault("jax", jax.__version__)
  precision = ("bfloat16" if args.precision == "auto" and
               device.platform != "cpu" else
               "float32" if args.precision == "auto" else args.precision)
  tasks = list(meta["tasks"])
  if args.finetune_tasks:
    wanted = args.finetune_tasks.split(",")
    unknown = sorted(set(wanted) - set(tasks))
    if unknown:
      raise UserError(f"--finetune-tasks: {', '.join(unknown)} not in the "
                      f"fine-tuning arrays ({', '.join(tasks)})")
    tasks = [t for t in tasks if t in wanted]
  # A fresh folder per call: a record an earlier slot call left would be
  # resumed as this one's trials.
  work = tempfile.mkdtemp(prefix="slot_finetune_")
  models = dict(models)
  if args.random_init_control:
    name = control_name(args)
    models[name] = _control_weights(args, meta["vocab_size"], config.seed,
                                   os.path.join(work, name))
  hparams = {k: v for k, v in dataclasses.asdict(config).items()
             if k not in NOT_PASSED}
  hparams.update(mixed_precision=precision, write_dev_outputs=True,
                 keep_model="none")
  steps = {t: meta["tasks"][t]["train_steps"] for t in tasks}
  clock.log(f"fine-tuning {', '.join(models)} on {', '.join(tasks)} with "
            f"run_finetuning.py ({precision}, {args.finetune_seeds} seeds, "
            f"steps {steps})")
  entries = result["finetune"] = []
  outputs = {}
  deadline = clock.start + args.time_limit - 10
  per_trial = {}
  for index in range(args.finetune_first_seed - 1, args.finetune_seeds):
    seed = config.seed + index
    for name, weights in models.items():
      for task in tasks:
        guess = per_trial.get(task, 0.0)
        if time.time() + guess > deadline:
          clock.log(f"skipping {name} {task} seed {seed}: {guess:.0f} s "
                    "would pass the time limit")
          continue
        began = time.time()
        folder = os.path.join(work, name, task)
        # num_trials index + 1: the record's earlier trials stand, so the
        # script trains trial index + 1 alone (its seed: seed + index).
        run_finetuning.main([
            "--task-arrays", args.finetune_data, "--task-names", task,
            "--init-checkpoint", weights, "--output-dir", folder,
            "--hparams", json.dumps(dict(hparams, num_trials=index + 1))])
        trial_s = time.time() - began
        per_trial[task] = max(guess, trial_s)
        with open(os.path.join(folder, f"{task}_trials.json")) as f:
          record = json.load(f)
        dev, trained = record["trials"][index][task], record["training"][index]
        with np.load(os.path.join(
            folder, f"{task}_dev_outputs_trial{index + 1}.npz")) as found:
          for key in found.files:
            outputs[f"{name}/{task}/{seed}/{key}"] = found[key]
        entries.append({"model": name, "task": task, "seed": seed,
                        "trial_s": trial_s, "steps": steps[task],
                        "train_s": trained["train_seconds"],
                        "final_loss": trained["train_loss"],
                        "dev_loss": dev["loss"]})
        clock.log(f"{name} {task} seed {seed}: {steps[task]} steps in "
                  f"{trained['train_seconds']:.1f} s, loss "
                  f"{trained['train_loss']:.4f}, dev loss {dev['loss']:.4f}")
    np.savez_compressed(os.path.join(args.out, ft_arrays.OUTPUTS), **outputs)
    write()
  result["finetune_config"] = dict(dataclasses.asdict(config),
                                   mixed_precision=precision)
  write()
  return result


def _control_weights(args, vocab_size, seed, folder):
  """The control's encoder as initialised (the fine-tuning seed's draw),
  an .npz weights folder the script starts from."""
  # pylint: disable-next=g-import-not-at-top
  from pretrain.objectives import build_model
  config = control_pretrain_config(args, vocab_size)
  keras.utils.set_random_seed(seed)
  model = build_model(config)
  model.build_variables()
  npz_weights.write(folder, {DISCRIMINATOR: export_weights(
      model, DISCRIMINATOR)}, json.loads(json.dumps(dataclasses.asdict(
          config))))
  return folder
