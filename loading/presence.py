"""Whether anything is at a model path, said without TensorFlow (which
loading/sources.py needs to read it): a script checks this first, so that
a wrong --model-name (or a vocabulary that is not there) is one line at
once, not after TensorFlow loads."""

import os

from interop.npz_weights import MANIFEST
from pretrain.run_config import CONFIG_FILE
from pretrain.run_config import config_from_json
from util import storage
from util.errors import UserError
from util.text_files import read_text


def check_model_present(path):
  """One error when nothing at `path` can be a model: no file or folder
  there (nor a checkpoint prefix), an empty folder, or a run of ours with
  no checkpoint yet. Anything else is left to loading/sources.py."""
  if not path:
    raise UserError("no pretrained model: pass --init-checkpoint or "
                    "--data-dir and --model-name")
  if "://" in path:  # remote: only TensorFlow's gfile can look
    return
  if os.path.isdir(path):
    try:
      names = os.listdir(path)
    except OSError:  # unreadable: loading/sources.py says how
      return
    weights = [n for n in names if n in ("checkpoint", MANIFEST) or
               n.endswith(".index")]
    if not names or (CONFIG_FILE in names and not weights):
      raise UserError(f"no checkpoint found in {path} (train one with "
                      "run_pretraining.py)")
    return
  if os.path.exists(path) or os.path.exists(path + ".index"):
    return
  if path.endswith(".keras"):
    raise UserError(f"no .keras archive at {path}")
  raise UserError(f"no checkpoint found at {path} (train one with "
                  "run_pretraining.py, or pass --init-checkpoint)")
def vocab_path_for(pretrain_config, vocab_file="", data_dir=""):
  """`vocab_file`, else the run's, else DATA_DIR/vocab.txt, else the copy
  beside the run's TFRecords (build_pretraining_dataset.py writes one; a
  run of an earlier version recorded DATA_DIR/vocab.txt without it)."""
  if vocab_file:
    paths = [vocab_file]
  else:
    records = pretrain_config.pretrain_tfrecords.split(",")[0].strip()
    paths = [p for p in (
        pretrain_config.vocab_file,
        data_dir and os.path.join(data_dir, "vocab.txt"),
        records and os.path.join(os.path.dirname(records), "vocab.txt"))
             if p]
  if not paths:
    raise UserError("the run names no vocab file: pass --vocab-file")
  return next((p for p in paths if storage.exists(p)), paths[0])


def check_vocab_present(path, vocab_file="", data_dir=""):
  """For one of our runs at `path`: the vocabulary vocab_path_for finds
  is there (other formats carry their own, checked as they load)."""
  if not path or "://" in path + vocab_file:
    return
  folder = path if os.path.isdir(path) else os.path.dirname(path)
  config_path = os.path.join(folder, CONFIG_FILE)
  if not os.path.isfile(config_path):
    return
  try:
    pretrain_config = config_from_json(read_text(config_path), config_path)
  except UserError:
    return  # loading says what is wrong with it
  vocab = vocab_path_for(pretrain_config, vocab_file, data_dir)
  if not os.path.exists(vocab):
    given = "" if vocab_file else f" (named by {config_path})"
    raise UserError(f"vocab file not found: {vocab}{given}; pass the "
                    "pretraining vocab with --vocab-file")
