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
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
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
  checkpoint = (tf.train.latest_checkpoint(path) if storage.isdir(path)
                else path)
  if not checkpoint:
    raise UserError(f"no checkpoint found in {path} (train one with "
                    "run_pretraining.py)")
  config_path = os.path.join(model_dir, CONFIG_FILE)
  if not storage.exists(config_path):
    raise UserError(f"{config_path} not found: the checkpoint's model "
                    "config is unknown")
  return Pretrained(config_from_json(storage.read_text(config_path)),
                    checkpoint, model_dir)


def config_from_json(text):
  """The PretrainingConfig a run saved (keys this version lacks dropped)."""
  from configure_pretraining import PretrainingConfig
  values = json.loads(text)
  known = {f.name for f in dataclasses.fields(PretrainingConfig)}
  return PretrainingConfig(**{k: v for k, v in values.items() if k in known})


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
