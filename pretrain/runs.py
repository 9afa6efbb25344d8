"""A finished (or running) pretraining run, as other scripts load it:
its config (pretrain_config.json), latest checkpoint, tokenizer and
restored model. Fine-tuning and scoring both start here. A model in
another format (transformers, the TF1 release, .keras) loads through
interop/sources.py and looks the same from here on."""

import dataclasses
import json
import os

import numpy as np

from util import storage
from util.errors import UserError
from util.tokenization import load_tokenizer

CONFIG_FILE = "pretrain_config.json"  # written by pretrain/trainer.py


@dataclasses.dataclass
class Pretrained:
  """A run's config and checkpoint."""
  config: object  # PretrainingConfig
  checkpoint: str  # checkpoint path prefix
  model_dir: str
  source: object = None  # an interop Source when not one of our runs


def find_pretrained(path):
  """A pretraining model_dir (or a checkpoint prefix inside one)."""
  if not path:
    raise UserError("no pretrained model: pass --init-checkpoint or "
                    "--data-dir and --model-name")
  if not is_our_run(path):
    from interop.sources import open_source
    source = open_source(path)
    return Pretrained(source.config, source.path, path, source)
  if not storage.isdir(path) and not storage.exists(path + ".index"):
    raise UserError(f"no checkpoint found at {path} (train one with "
                    "run_pretraining.py, or pass --init-checkpoint)")
  model_dir = path if storage.isdir(path) else os.path.dirname(path)
  checkpoint = latest_checkpoint(path) if storage.isdir(path) else path
  if not checkpoint:
    raise UserError(f"no checkpoint found in {path} (train one with "
                    "run_pretraining.py)")
  config_path = os.path.join(model_dir, CONFIG_FILE)
  if not storage.exists(config_path):
    raise UserError(f"{config_path} not found: the checkpoint's model "
                    "config is unknown")
  from util.text_files import read_text
  return Pretrained(config_from_json(read_text(config_path), config_path),
                    checkpoint, model_dir)


def latest_checkpoint(model_dir):
  """The newest checkpoint named in model_dir's `checkpoint` file (None
  when there is none); one clear error when that file is damaged."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    return tf.train.latest_checkpoint(model_dir)
  except Exception as e:  # pylint: disable=broad-except
    # A damaged index file raises decode or protobuf parse errors.
    first = (str(e).strip().splitlines() or [type(e).__name__])[0][:120]
    raise UserError(f"{os.path.join(model_dir, 'checkpoint')} (the list of "
                    f"checkpoints) is damaged: {first}") from None


# Fields that do not change what a run computes: where things are, what to
# do now, how often to log and save, eval settings, reliability switches,
# hardware, and the original release's aliases (their effect shows in the
# fields they set). A change to any other field of a trained run is refused
# unless accept_hparam_changes; raising num_train_steps is allowed.
RUN_SETTINGS = frozenset((
    "data_dir", "model_name", "pretrain_tfrecords", "vocab_file", "model_dir",
    "init_checkpoint", "eval_checkpoint", "accept_hparam_changes",
    "do_train", "do_eval", "debug", "iterations_per_loop", "log_every_steps",
    "save_checkpoints_steps", "keep_checkpoint_max", "num_eval_steps",
    "eval_batch_size", "skip_nonfinite_steps", "skip_corrupt_records",
    "input_sharding", "mixed_precision", "xla", "strategy", "use_tpu",
    "num_tpu_cores", "tpu_job_name", "tpu_name", "tpu_zone", "gcp_project",
    "num_gpus", "keep_worker_checkpoints", "intra_op_threads",
    "inter_op_threads", "electra_objective", "electric_objective",
    "untied_generator_embeddings", "untied_generator"))


def hparam_changes(saved, config):
  """[(field, saved value, new value)] of the hparams that change the math,
  between a saved config (a dict from pretrain_config.json) and `config`.
  Fields the saved config lacks (an older version) are not compared."""
  new = json.loads(json.dumps(dataclasses.asdict(config)))
  return [(k, saved[k], new[k]) for k in sorted(new)
          if k in saved and k not in RUN_SETTINGS and saved[k] != new[k]]


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


def config_from_json(text, where=CONFIG_FILE):
  """The PretrainingConfig a run saved (keys this version lacks dropped,
  values checked against the fields' types)."""
  from configure_pretraining import PretrainingConfig
  from util.config import apply_overrides
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


def is_our_run(path):
  """A model_dir of ours, or a checkpoint prefix in one (or a path that
  does not exist, which find_pretrained reports)."""
  if storage.isdir(path):
    return (storage.exists(os.path.join(path, CONFIG_FILE)) or
            not storage.listdir(path))
  if storage.exists(path + ".index"):
    return storage.exists(os.path.join(os.path.dirname(path), CONFIG_FILE))
  return not path.endswith(".keras")


def vocab_path_for(hparams, vocab_file="", data_dir=""):
  """`vocab_file`, else the run's, else DATA_DIR/vocab.txt."""
  if vocab_file:
    paths = [vocab_file]
  else:
    paths = [p for p in (hparams.vocab_file, data_dir and os.path.join(
        data_dir, "vocab.txt")) if p]
  if not paths:
    raise UserError("the run names no vocab file: pass --vocab-file")
  return next((p for p in paths if storage.exists(p)), paths[0])


def load_tokenizer_for(hparams, vocab_file="", data_dir=""):
  """The run's tokenizer (vocab_path_for); its size must be the model's."""
  path = vocab_path_for(hparams, vocab_file, data_dir)
  tokenizer = load_tokenizer(path, hparams.do_lower_case)
  if tokenizer.vocab_size != hparams.vocab_size:
    raise UserError(f"vocab file {path} has {tokenizer.vocab_size} entries "
                    f"but the pretrained model has {hparams.vocab_size}; "
                    "pass the pretraining vocab with --vocab-file")
  return tokenizer


def restore_model(pretrained, token_counts=None, special_ids=(), need=()):
  """The run's whole pretraining model, its variables restored. From
  another format, only the networks it holds are restored; `need` names
  the roles (discriminator, generator) the caller cannot do without."""
  from pretrain.checkpointing import make_checkpoint
  from pretrain.checkpointing import read_checkpoint
  from pretrain.objectives import build_model
  config = pretrained.config
  if config.unigram_generator and token_counts is None:
    # Its table is no weight; any table builds the model (a caller that
    # samples from the generator passes the dataset's counts).
    token_counts = np.ones(config.vocab_size)
  model = build_model(config, token_counts, special_ids)
  model.build_variables()
  if pretrained.source is None:
    read_checkpoint(make_checkpoint(model), pretrained.checkpoint)
    return model
  from interop.weights import import_weights
  import_weights(model, pretrained.source.weights(),
                 source=pretrained.checkpoint, require=need)
  return model
