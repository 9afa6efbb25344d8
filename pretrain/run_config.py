"""A run's config file, as pretrain/trainer.py writes and checks it on
resume: its name (pretrain_config.json), the hparams a resumed run may
change, the previous config kept beside the new one, and the config read
back. The loading layer (loading/) finds runs and restores models on top
of this; pretrain/ does not import loading/."""

import dataclasses
import json
import os

from pretrain.config import PretrainingConfig
from util import storage
from util.config import apply_overrides
from util.errors import UserError
from util.text_files import read_text

CONFIG_FILE = "pretrain_config.json"  # written by pretrain/trainer.py

# Fields that do not change what a run computes: where things are, what to
# do now, how often to log and save, eval settings, reliability switches,
# and hardware. A change to any other field of a trained run is refused
# unless accept_hparam_changes; raising num_train_steps is allowed.
RUN_SETTINGS = frozenset((
    "data_dir", "model_name", "pretrain_tfrecords", "eval_tfrecords",
    "vocab_file", "model_dir",
    "init_checkpoint", "eval_checkpoint", "accept_hparam_changes",
    "do_train", "do_eval", "debug", "seeds", "iterations_per_loop", "log_every_steps",
    "save_checkpoints_steps", "save_checkpoints_secs", "keep_checkpoint_max",
    "num_eval_steps",
    "eval_batch_size", "skip_nonfinite_steps", "skip_corrupt_records",
    "input_sharding", "mixed_precision", "xla", "strategy",
    "tpu_job_name", "tpu_name", "tpu_zone", "gcp_project",
    "num_gpus", "keep_worker_checkpoints", "intra_op_threads",
    "inter_op_threads"))


# Changing these between a checkpoint and a resumed run changes the model.
ARCHITECTURE_KEYS = (
    "objective", "model_size", "model_hparam_overrides", "vocab_size",
    "max_seq_length", "generator_hidden_size", "generator_ffn_size",
    "generator_heads", "generator_layers", "uniform_generator",
    "unigram_generator", "two_tower_generator", "weight_sharing",
    "cross_layer_sharing", "training_algorithm", "optimizer")


def hparam_changes(saved, config, fields=None):
  """[(field, saved value, new value)] of the hparams that change the math,
  between a saved config (a dict from pretrain_config.json) and `config`
  (only `fields` when given). Fields the saved config lacks (an older
  version) are not compared."""
  new = json.loads(json.dumps(dataclasses.asdict(config)))
  return [(k, saved[k], new[k]) for k in sorted(new)
          if k in saved and k not in RUN_SETTINGS and saved[k] != new[k]
          and (fields is None or k in fields)]


def check_architecture(config, saved, fields=None):
  """A model_dir's saved config and `config` describe the same model."""
  for key in ARCHITECTURE_KEYS:
    if fields is not None and key not in fields:
      continue
    if key in saved and saved[key] != getattr(config, key):
      raise UserError(
          f"{config.model_dir} holds a model trained with {key}="
          f"{saved[key]!r}, but this run has "
          f"{key}={getattr(config, key)!r}; "
          "use another --model-name or the same hparams")


def check_resumable(config, saved, step, fields=None):
  """A run trained to `step` goes on only with the hparams it was trained
  with (raising num_train_steps aside), unless accept_hparam_changes.
  Returns (the raise of num_train_steps, [] or one change; the other
  changes)."""
  changes = hparam_changes(saved, config, fields)
  raised = [ch for ch in changes
            if ch[0] == "num_train_steps" and ch[2] > ch[1]]
  others = [ch for ch in changes if ch not in raised]
  if others and not config.accept_hparam_changes:
    raise UserError(
        f"{config.model_dir} was trained (to step {step}) with other hparams: "
        f"{describe_changes(others)}; pass the run's own hparams (see its "
        f"{CONFIG_FILE}), or --accept-hparam-changes to go on with these "
        "(its old config is kept)")
  return raised, others


def describe_changes(changes):
  return ", ".join(f"{k} {old!r} -> {new!r}" for k, old, new in changes)


def keep_config(model_dir, text, step):
  """Writes a run's previous config beside the new one, as
  pretrain_config.step-N.json (never over an existing file)."""
  stem = os.path.join(model_dir, CONFIG_FILE[:-len(".json")] + f".step-{step}")
  path, n = stem + ".json", 1
  while storage.exists(path):
    path, n = f"{stem}.{n}.json", n + 1
  storage.write_text_atomic(path, text)
  return path


def read_saved_config(path):
  """(text, dict) of a run's saved config; one clear error when it is not
  a readable JSON object (truncated by a full disk, edited, binary)."""
  text = read_text(path)  # not UTF-8, a folder, unreadable: named
  try:
    values = json.loads(text)
  except (ValueError, RecursionError) as e:
    raise UserError(f"{path} is not valid JSON ({str(e)[:80]}); the run's "
                    "checkpoints are left alone") from None
  if not isinstance(values, dict):
    raise UserError(f"{path} is not a JSON object of hparams")
  return text, values


def config_from_json(text, where=CONFIG_FILE):
  """The PretrainingConfig a run saved (keys this version lacks dropped,
  values checked against the fields' types)."""
  try:
    values = json.loads(text)
  except (ValueError, RecursionError) as e:
    raise UserError(f"{where} is not valid JSON ({str(e)[:80]})") from None
  if not isinstance(values, dict):
    raise UserError(f"{where} is not a JSON object of hparams")
  known = {f.name for f in dataclasses.fields(PretrainingConfig)}
  try:
    return apply_overrides(PretrainingConfig(),
                           {k: v for k, v in values.items() if k in known},
                           source=where)
  except UserError as e:
    raise UserError(f"{where}: {e}") from None


def check_data_shape(config, meta, label, where, remedy):
  """The data's max_seq_length must be the config's, and so its vocab_size
  (filled into config when unset). Errors name `label` ("the dataset"),
  the data's value and `where`; `remedy` ends the length error."""
  if meta["max_seq_length"] != config.max_seq_length:
    raise UserError(
        f"max_seq_length {config.max_seq_length} disagrees with {label} "
        f"({meta['max_seq_length']}, {where}); set max_seq_length to "
        f"{meta['max_seq_length']} or {remedy}")
  if config.vocab_size is None:
    config.vocab_size = meta["vocab_size"]
  elif config.vocab_size != meta["vocab_size"]:
    raise UserError(f"vocab_size {config.vocab_size} disagrees with {label} "
                    f"({meta['vocab_size']}, {where})")
