"""A pretraining run's directory: created, its config recorded; a resumed
run checked against the config it was trained with (run_config.py)."""

import dataclasses
import json
import os

import tensorflow as tf

from pretrain.run_config import CONFIG_FILE
from pretrain.run_config import describe_changes
from pretrain.run_config import hparam_changes
from pretrain.run_config import keep_config
from util import storage
from util.errors import UserError

# Changing these between a checkpoint and a resumed run changes the model.
ARCHITECTURE_KEYS = (
    "objective", "model_size", "model_hparam_overrides", "vocab_size",
    "max_seq_length", "generator_hidden_size", "generator_ffn_size",
    "generator_heads", "generator_layers", "uniform_generator",
    "unigram_generator", "two_tower_generator", "weight_sharing",
    "cross_layer_sharing", "training_algorithm", "optimizer")


def prepare(config, is_chief):
  """Creates model_dir and records the config; on resume, checks it."""
  path = os.path.join(config.model_dir, CONFIG_FILE)
  try:
    storage.makedirs(config.model_dir)
    write = True
    if storage.exists(path):
      text = storage.read_text(path)
      old = json.loads(text)
      for key in ARCHITECTURE_KEYS:
        if key in old and old[key] != getattr(config, key):
          raise UserError(
              f"{config.model_dir} holds a model trained with {key}="
              f"{old[key]!r}, but this run has "
              f"{key}={getattr(config, key)!r}; "
              "use another --model-name or the same hparams")
      write = _check_resume(config, old, text, is_chief)
    if is_chief and write:
      storage.write_text_atomic(
          path,
          json.dumps(dataclasses.asdict(config), indent=2, sort_keys=True))
  except (OSError, tf.errors.OpError) as e:
    raise UserError(
        f"cannot write to model_dir {config.model_dir}: {e}") from None


def _check_resume(config, old, text, is_chief):
  """A trained run goes on only with the hparams it was trained with
  (raising num_train_steps aside), unless accept_hparam_changes; then its
  old config is kept beside the new one. Returns whether to write the
  new config (never for an eval-only run of a trained model)."""
  latest = tf.train.latest_checkpoint(config.model_dir)
  if not latest:
    return True  # nothing trained yet: the saved config describes nothing
  step = latest.rsplit("-", 1)[-1]
  changes = hparam_changes(old, config)
  raised = [ch for ch in changes
            if ch[0] == "num_train_steps" and ch[2] > ch[1]]
  others = [ch for ch in changes if ch not in raised]
  if others and not config.accept_hparam_changes:
    raise UserError(
        f"{config.model_dir} was trained (to step {step}) with other hparams: "
        f"{describe_changes(others)}; pass the run's own hparams (see its "
        f"{CONFIG_FILE}), or --accept-hparam-changes to go on with these "
        "(its old config is kept)")
  if not config.do_train:
    if others:
      print(f"note: evaluating with hparams that differ from the run's "
            "(--accept-hparam-changes): "
            f"{describe_changes(others)}", flush=True)
    return False
  if raised:
    print(f"num_train_steps raised from {raised[0][1]} to {raised[0][2]}: "
          f"continuing the run from step {step} (the learning-rate "
          "schedule now ends at the new count)", flush=True)
  if others:
    print(f"hparams changed from step {step} on (--accept-hparam-changes):"
          f" {describe_changes(others)}", flush=True)
  if changes and is_chief:
    kept = keep_config(config.model_dir, text, step)
    print(f"the run's previous config is kept as {kept}", flush=True)
  return True
