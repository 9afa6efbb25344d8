"""Whether anything is at a model path, said without TensorFlow (which
loading/sources.py needs to read it): a script checks this first, so that
a wrong --model-name is one line at once, not after TensorFlow loads."""

import os

from interop.npz_weights import MANIFEST
from pretrain.run_config import CONFIG_FILE
from util.errors import UserError


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
