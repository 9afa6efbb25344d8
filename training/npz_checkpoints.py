"""Resumable checkpoints of the JAX driver, with NumPy only (the GPU
machines carry no TensorFlow): MODEL_DIR/ckpt-<step>.npz holds every
variable of the training state (the model's and the optimizer's), written
to a temporary name and renamed, so a kill never leaves half a file under
the real name; MODEL_DIR/checkpoint.json, written the same way after it,
names the newest. The step's batches and masking noise follow from the step
(pretrain/arrays.py `batch_rows`, the key folded with the step), so the
state and the step are all a resumed run needs to go on as if uninterrupted.
"""

import json
import os
import re
import zipfile

import numpy as np

from util import storage
from util.errors import UserError
from util.errors import cause

INDEX = "checkpoint.json"
PATTERN = re.compile(r"^ckpt-(\d+)\.npz$")


def checkpoint_path(directory, step):
  return os.path.join(directory, f"ckpt-{step}.npz")


def save(directory, step, groups, keep=5, keep_steps=()):
  """Writes `groups` ({name: [arrays]}) as ckpt-<step>.npz, then the index;
  removes the older checkpoints beyond the newest `keep` (those at
  `keep_steps` stay). Returns the path."""
  path = checkpoint_path(directory, step)
  flat = {f"{name}/{i}": np.asarray(value)
          for name, values in groups.items()
          for i, value in enumerate(values)}
  temporary = path + ".tmp"
  steps = sorted(set(steps_in(directory)) | {step})
  kept = [s for s in steps if s in keep_steps or s in steps[-keep:]]
  previous = _previous(directory, step)
  try:
    with storage.open_file(temporary, "wb") as f:  # streamed: no copy held
      np.savez(f, **flat)
    storage.rename(temporary, path, overwrite=True)
    storage.write_text_atomic(os.path.join(directory, INDEX), json.dumps(
        {"latest": os.path.basename(path), "steps": kept}) + "\n")
  except OSError as e:  # a full disk: nothing of this save is left
    for partial in (temporary, path if step != previous else None):
      if partial and storage.exists(partial):
        storage.remove(partial)
    last = (f"the last complete checkpoint is "
            f"{checkpoint_path(directory, previous)}" if previous is not None
            else "no checkpoint was saved yet")
    raise UserError(f"cannot save checkpoint {path}: {cause(e)}; {last} "
                    "(nothing else was changed)") from None
  for old in steps:
    if old not in kept:
      storage.remove(checkpoint_path(directory, old))
  return path


def _previous(directory, step):
  """The step the index names before `step` is saved, or None."""
  try:
    return step_of(latest(directory)) if latest(directory) else None
  except UserError:
    return None


def steps_in(directory):
  """The steps of the complete checkpoint files in `directory`."""
  if not storage.isdir(directory):
    return []
  return sorted(int(m.group(1)) for name in storage.listdir(directory)
                if (m := PATTERN.match(os.path.basename(name.rstrip("/")))))


def latest(directory):
  """The newest checkpoint that the index names, or None when there is
  none. Checkpoints without an index, or an index naming a missing file,
  are one clear error: starting over would overwrite the run."""
  index = os.path.join(directory, INDEX)
  found = steps_in(directory)
  if not storage.exists(index):
    if not found:
      return None
    raise UserError(f"{directory} holds ckpt-{found[-1]}.npz but no {INDEX} "
                    "(the list of checkpoints): nothing was read or written;"
                    f" to go on from it, write {{\"latest\": \"ckpt-"
                    f"{found[-1]}.npz\"}} to {index}")
  try:
    name = json.loads(storage.read_text(index))["latest"]
  except (ValueError, KeyError, TypeError) as e:
    raise UserError(f"{index} (the list of checkpoints) is damaged: "
                    f"{type(e).__name__}: {e}") from None
  path = os.path.join(directory, os.path.basename(str(name)))
  if not storage.exists(path):
    raise UserError(f"{index} names {name}, which is not there: nothing was "
                    "read or written")
  return path


def step_of(path):
  return int(PATTERN.match(os.path.basename(path)).group(1))


def load(path, like):
  """The groups of `path`, checked against `like` ({name: [arrays]}: the
  state a fresh run builds): the same names, counts, shapes and dtypes."""
  try:
    with storage.open_file(path, "rb") as f, np.load(f) as data:
      flat = {k: data[k] for k in data.files}
  except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
    # A truncated file is not a zip archive (BadZipFile) or ends early.
    raise UserError(f"cannot read checkpoint {path}: {type(e).__name__}: "
                    f"{str(e)[:200]} (truncated or damaged; the one before "
                    "it may be whole: name it in checkpoint.json)") from None
  groups = {}
  for name, values in like.items():
    loaded = []
    for i, value in enumerate(values):
      key = f"{name}/{i}"
      if key not in flat:
        raise UserError(f"checkpoint {path} lacks {key}: it was written by "
                        "a different model or optimizer")
      array = flat.pop(key)
      shape, dtype = tuple(np.shape(value)), np.dtype(value.dtype)
      if array.shape != shape or array.dtype != dtype:
        raise UserError(f"checkpoint {path}: {key} is {array.dtype}"
                        f"{list(array.shape)}, the model's {dtype}"
                        f"{list(shape)}")
      loaded.append(array)
    groups[name] = loaded
  if flat:
    raise UserError(f"checkpoint {path} holds {sorted(flat)[0]}, which this "
                    "model does not have")
  return groups
