"""What run_pretraining.py checks before TensorFlow loads (seconds): the
data directory, the dataset's metadata.json against the config, the
vocabulary later scripts need, and a trained run's saved config against
this one. Pure Python on the config as parsed (not yet resolved: resolve()
imports the objectives, and so TensorFlow); the trainer checks the
resolved config again after. Local paths only (gs:// needs TensorFlow)."""

import dataclasses
import glob
import json
import os
import re

from loading.presence import vocab_entries
from pretrain.config import PretrainingConfig
from pretrain.run_dir import check_backend
from pretrain.run_config import CONFIG_FILE
from pretrain.run_config import check_architecture
from pretrain.run_config import check_data_shape
from pretrain.run_config import check_resumable
from pretrain.run_config import read_saved_config
from util.config import check_data_dir
from util.config import check_tpu_name
from util.errors import UserError

METADATA_FILE = "metadata.json"  # build_pretraining_dataset.py writes it
# Epochs over the training examples above which a run is said to repeat
# its data (the quickstart does 5, the comparisons up to 12).
MANY_EPOCHS = 20
# Reads of each eval example above which eval is said to repeat them:
# each read is masked anew, so a few still measure (the quickstart reads
# its 184 held-out examples 3.5 times); 160 do not.
MANY_EVAL_READS = 4

# Fields resolve() (or the dataset) fills in: their parsed value is not the
# one a run saves, so the early check leaves them to the trainer's.
DERIVED = frozenset((
    "generator_hidden_size", "weight_sharing", "two_stage_generator_steps",
    "model_hparam_overrides", "objective_hparams", "mask_scheme",
    "max_predictions_per_seq", "two_tower_generator", "vocab_size",
    "do_lower_case"))


def compared_fields(config):
  """The fields whose parsed value is final (None in debug mode, which
  rewrites sizes and steps: then nothing is compared early)."""
  if config.debug:
    return frozenset()
  return frozenset(f.name for f in dataclasses.fields(PretrainingConfig)
                   if f.name not in DERIVED)


def _paths(config):
  """(the TFRecords pattern, model_dir) as resolve() will set them."""
  records = config.pretrain_tfrecords or (config.data_dir and os.path.join(
      config.data_dir, "pretrain_tfrecords", "pretrain_data.tfrecord*"))
  model_dir = config.model_dir or (
      config.data_dir and config.model_name and
      os.path.join(config.data_dir, "models", config.model_name))
  return records or "", model_dir or ""


def _metadata(records):
  """The dataset's metadata.json as a dict (None when there is none or it
  does not parse: the trainer says why), and its folder."""
  files = sorted(f for p in records.split(",") if p.strip()
                 for f in glob.glob(p.strip()) if not f.endswith(".tmp"))
  if not files:
    return None, ""
  folder = os.path.dirname(files[0])
  try:
    with open(os.path.join(folder, METADATA_FILE), encoding="utf-8") as f:
      meta = json.load(f)
  except (OSError, ValueError):
    return None, folder
  return (meta if isinstance(meta, dict) else None), folder


def _trained_step(model_dir):
  """The newest checkpoint's step in model_dir (TensorFlow's or the JAX
  driver's), or None."""
  steps = [int(m.group(1)) for p in glob.glob(os.path.join(model_dir,
                                                           "ckpt-*"))
           if (m := re.search(r"ckpt-(\d+)\.(index|npz)$", p))]
  return max(steps) if steps else None


def find_vocab(config, meta, folder):
  """Sets config.vocab_file to the vocabulary this run uses, which its
  pretrain_config.json records for scoring, export and fine-tuning: the
  one given, else DATA_DIR/vocab.txt, else the copy
  build_pretraining_dataset.py wrote beside the TFRecords."""
  if config.vocab_file:
    if not os.path.exists(config.vocab_file):
      raise_missing(config.vocab_file, "")
    return
  default = os.path.join(config.data_dir, "vocab.txt")
  if os.path.exists(default):
    config.vocab_file = default
    return
  name = (meta or {}).get("vocab_file")
  copy = os.path.join(folder, name) if name and folder else ""
  if copy and os.path.exists(copy):
    print(f"note: no {default}; using the dataset's copy {copy} (recorded "
          f"in the run's {CONFIG_FILE})", flush=True)
    config.vocab_file = copy
    return
  raise_missing(default, copy)


def check_vocab_size(config, meta, folder):
  """A vocab.txt whose entries are not the dataset's vocab_size, as
  pretrain/data.py's check_metadata says it, before TensorFlow loads."""
  size = (meta or {}).get("vocab_size")
  path = config.vocab_file
  if (not isinstance(size, int) or not path.endswith(".txt") or
      (meta or {}).get("tokenizer", "wordpiece") != "wordpiece" or
      not os.path.isfile(path)):
    return
  entries = vocab_entries(path)
  if entries != size:
    raise UserError(f"vocab file {path} has {entries} entries but the "
                    f"dataset was built with {size} "
                    f"({os.path.join(folder, METADATA_FILE)})")


def raise_missing(path, copy):
  also = f" nor the dataset's copy {copy}" if copy else ""
  raise UserError(f"vocab file not found: {path}{also}; scoring, export and "
                  "fine-tuning need the run's vocabulary: pass --vocab-file")


def warn_small_data(config, meta):
  """Warnings, not errors: a run that repeats a few examples many times,
  or ends before its warmup does."""
  if config.debug:
    return
  if config.do_train:
    if config.num_train_steps <= config.num_warmup_steps:
      print(f"warning: num_train_steps {config.num_train_steps} <= "
            f"num_warmup_steps {config.num_warmup_steps}: the learning rate "
            "is still warming up when training ends (lower "
            "num_warmup_steps)", flush=True)
    examples = (meta or {}).get("num_examples")
    if examples:
      epochs = config.num_train_steps * config.train_batch_size / examples
      if epochs > MANY_EPOCHS:
        print(f"warning: {config.num_train_steps} steps x batch "
              f"{config.train_batch_size} read the dataset's {examples:,} "
              f"training examples ~{epochs:.0f} times: a model that "
              "memorises them; build more data or train fewer steps",
              flush=True)
  if config.do_eval and not config.eval_tfrecords and meta:
    held_out = meta.get("num_heldout_examples") or 0
    examples = held_out or meta.get("num_examples") or 0
    read = config.num_eval_steps * config.eval_batch_size
    if examples and read > MANY_EVAL_READS * examples:
      what = "held-out" if held_out else "training"
      print(f"warning: eval reads {read:,} sequences (num_eval_steps "
            f"{config.num_eval_steps} x eval_batch_size "
            f"{config.eval_batch_size}) from {examples:,} {what} examples: "
            "each is counted about "
            f"{read / examples:.0f} times (lower num_eval_steps to "
            f"{max(1, examples // config.eval_batch_size)} to read each "
            "about once)", flush=True)


def check(config):
  """The early checks (run_pretraining.py's check_first)."""
  check_data_dir(config)
  check_tpu_name(config)
  records, model_dir = _paths(config)
  if "://" in records + model_dir + config.vocab_file:
    return
  meta, folder = _metadata(records) if records else (None, "")
  if meta and isinstance(meta.get("max_seq_length"), int) and isinstance(
      meta.get("vocab_size"), int):
    check_data_shape(dataclasses.replace(config), meta, "the dataset",
                     f"from {os.path.join(folder, METADATA_FILE)}",
                     "rebuild the data with build_pretraining_dataset.py "
                     "--max-seq-length " + str(config.max_seq_length))
  if folder:  # no TFRecords at all: the trainer's error says so first
    find_vocab(config, meta, folder)
    check_vocab_size(config, meta, folder)
  if model_dir and os.path.isdir(model_dir):  # before the backend loads
    check_backend(model_dir, os.environ.get("KERAS_BACKEND", "tensorflow"))
  saved = os.path.join(model_dir, CONFIG_FILE) if model_dir else ""
  if saved and os.path.isfile(saved):
    fields = compared_fields(config)
    config = dataclasses.replace(config, model_dir=model_dir)
    _, old = read_saved_config(saved)
    check_architecture(config, old, fields)
    step = _trained_step(model_dir)
    if step is not None:
      check_resumable(config, old, step, fields)
  warn_small_data(config, meta)
