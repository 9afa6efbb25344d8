"""A pretraining run -> (its config, the restored model, its tokenizer).

The run is found as fine-tuning finds it (finetune/model.find_pretrained:
pretrain_config.json + the latest checkpoint); the whole pretraining model
is rebuilt and restored, heads and generator included.
"""

import os

import numpy as np
import tensorflow as tf

from finetune.model import find_pretrained
from pretrain import data
from pretrain.checkpointing import make_checkpoint
from pretrain.objectives import build_model
from util import storage
from util.errors import UserError
from util.tokenization import load_tokenizer


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


def _token_counts(hparams, need_table):
  """A unigram generator's table is rebuilt from the dataset's counts (it
  is not a variable); a scorer that never asks the generator skips it."""
  if not hparams.unigram_generator:
    return None
  if not need_table:
    return np.ones(hparams.vocab_size)
  return data.load_token_counts(data.load_metadata(hparams))


def load_run(path, vocab_file="", data_dir="", need_generator=True):
  """(hparams, model, tokenizer) of the pretraining run at `path` (a
  model_dir or a checkpoint prefix inside one)."""
  pretrained = find_pretrained(path)
  hparams = pretrained.config
  if not hparams.vocab_size:
    raise UserError(f"{pretrained.model_dir}: pretrain_config.json has no "
                    "vocab_size")
  tokenizer = load_tokenizer_for(hparams, vocab_file, data_dir)
  model = build_model(hparams, _token_counts(hparams, need_generator),
                      tokenizer.special_ids.values())
  model.build_variables()
  try:
    status = make_checkpoint(model).read(pretrained.checkpoint)
    status.expect_partial()
    status.assert_existing_objects_matched()
  except (tf.errors.OpError, AssertionError, ValueError) as e:
    first = str(e).strip().splitlines()[0][:300]
    raise UserError(f"cannot restore {pretrained.checkpoint}: {first}") \
        from None
  return hparams, model, tokenizer
