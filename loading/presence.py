"""Whether anything is at a model path, said without TensorFlow (which
loading/sources.py needs to read it): a script checks this first, so that
a wrong --model-name (or a vocabulary that is not there) is one line at
once, not after TensorFlow loads."""

import os

from interop.npz_weights import MANIFEST
from pretrain.run_config import CONFIG_FILE
from pretrain.run_config import config_from_json
from util import storage
from util import tokenization
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


def run_config_at(path):
  """The pretrain_config.json of one of our (local) runs at `path`, a run
  folder or a checkpoint prefix in one; None for anything else (or one
  that does not parse: loading says why)."""
  if not path or "://" in path:
    return None
  folder = path if os.path.isdir(path) else os.path.dirname(path)
  config_path = os.path.join(folder, CONFIG_FILE)
  if not os.path.isfile(config_path):
    return None
  try:
    return config_from_json(read_text(config_path), config_path)
  except UserError:
    return None


def vocab_entries(path):
  """The number of entries of a WordPiece vocab.txt, counted as
  util/tokenization.py's parse_wordpiece_vocab does (a line each), after
  its strict read: a binary or UTF-16 file is named as such, not counted."""
  source = tokenization.read_vocab_source(path)
  return len(source.data.decode("utf-8").removeprefix("\ufeff").splitlines())


def check_vocab_present(path, vocab_file="", data_dir=""):
  """For one of our runs at `path`: the vocabulary vocab_path_for finds
  is there and has the model's vocab_size entries (other formats carry
  their own, checked as they load)."""
  pretrain_config = run_config_at(path)
  if pretrain_config is None or "://" in vocab_file:
    return
  vocab = vocab_path_for(pretrain_config, vocab_file, data_dir)
  folder = path if os.path.isdir(path) else os.path.dirname(path)
  if not os.path.exists(vocab):
    given = ("" if vocab_file else
             f" (named by {os.path.join(folder, CONFIG_FILE)})")
    raise UserError(f"vocab file not found: {vocab}{given}; pass the "
                    "pretraining vocab with --vocab-file")
  if vocab.endswith(".txt") and os.path.isfile(vocab) and (
      pretrain_config.vocab_size):
    size = vocab_entries(vocab)
    if size != pretrain_config.vocab_size:  # as loading/runs.py says it
      raise UserError(
          f"vocab file {vocab} has {size} entries but the pretrained model "
          f"has {pretrain_config.vocab_size}; pass the pretraining vocab "
          "with --vocab-file")
