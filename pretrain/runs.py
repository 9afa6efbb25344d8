"""A finished (or running) pretraining run, as other scripts load it:
its config (pretrain_config.json), latest checkpoint, tokenizer and
restored model. Fine-tuning and scoring both start here."""

import dataclasses
import json
import os

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


def find_pretrained(path):
  """A pretraining model_dir (or a checkpoint prefix inside one)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from configure_pretraining import PretrainingConfig
  if not path:
    raise UserError("no pretrained model: pass --init-checkpoint or "
                    "--data-dir and --model-name")
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
  values = json.loads(storage.read_text(config_path))
  known = {f.name for f in dataclasses.fields(PretrainingConfig)}
  config = PretrainingConfig(**{k: v for k, v in values.items()
                                if k in known})
  return Pretrained(config, checkpoint, model_dir)


def load_tokenizer_for(hparams, vocab_file="", data_dir=""):
  """The run's tokenizer: `vocab_file`, else the run's, else
  DATA_DIR/vocab.txt; its size must be the model's."""
  if vocab_file:
    paths = [vocab_file]
  else:
    paths = [p for p in (hparams.vocab_file, data_dir and os.path.join(
        data_dir, "vocab.txt")) if p]
  if not paths:
    raise UserError("the run names no vocab file: pass --vocab-file")
  path = next((p for p in paths if storage.exists(p)), paths[0])
  tokenizer = load_tokenizer(path, hparams.do_lower_case)
  if tokenizer.vocab_size != hparams.vocab_size:
    raise UserError(f"vocab file {path} has {tokenizer.vocab_size} entries "
                    f"but the pretrained model has {hparams.vocab_size}; "
                    "pass the pretraining vocab with --vocab-file")
  return tokenizer


def restore_model(pretrained, token_counts=None, special_ids=()):
  """The run's whole pretraining model, its variables restored."""
  from pretrain.checkpointing import make_checkpoint
  from pretrain.checkpointing import read_checkpoint
  from pretrain.objectives import build_model
  model = build_model(pretrained.config, token_counts, special_ids)
  model.build_variables()
  read_checkpoint(make_checkpoint(model), pretrained.checkpoint)
  return model
