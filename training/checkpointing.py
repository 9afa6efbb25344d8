"""Checkpoints that name every variable by its Keras path.

Keras 3 layers are not tracked by name in tf.train.Checkpoint, so we build
the tree ourselves: keys like `model/electra.Sdiscriminator.Slayer_0...`
are stable across processes and readable by other tools.
"""

import os
import re

import tensorflow as tf

from util.errors import UserError
from util.errors import cause


def stable_key(path):
  """Keras numbers auto-named objects per process (`seed_generator_12/`,
  `adam_w_1/`); dropping that number keeps keys independent of whatever
  else the process built. Repeats are told apart by order below."""
  return re.sub(r"^([^/]*?)_\d+/", r"\1/", path)


def variable_keys(variables):
  """{key: variable}: each under its stable path, repeats numbered in
  order (the names variable_tree saves them by)."""
  named = {}
  for variable in variables:
    base = stable_key(variable.path)
    key, n = base, 1
    while key in named:
      key, n = f"{base}_{n}", n + 1
    named[key] = variable
  return named


def stored_name(part, key):
  """The name a checkpoint file holds variable `key` of `part` ("model",
  "optimizer") under, as tf.train.Checkpoint escapes it."""
  escaped = key.replace(".", "..").replace("/", ".S")
  return f"{part}/{escaped}/.ATTRIBUTES/VARIABLE_VALUE"


def variable_tree(variables):
  """A trackable holding each variable under its (de-duplicated) path."""
  return tf.train.Checkpoint(**variable_keys(variables))


def make_checkpoint(model, optimizer=None, iterator=None):
  """Model variables (incl. RNG states), optimizer slots, data position."""
  parts = {"model": variable_tree(model.variables)}
  if optimizer is not None:
    parts["optimizer"] = variable_tree(optimizer.variables)
  if iterator is not None:
    parts["data"] = iterator
  return tf.train.Checkpoint(**parts)


def read_checkpoint(checkpoint, path):
  """Reads `path` into `checkpoint`: every object of ours must be found
  there (parts of the file we do not hold, e.g. the data position, may be
  left). A mismatch is one clear line."""
  try:
    status = checkpoint.read(path)
    status.expect_partial()
    status.assert_existing_objects_matched()
  except RESTORE_ERRORS as e:
    raise restore_error(path, e) from None


# What a failed read raises (a truncated data file: IndexError).
RESTORE_ERRORS = (tf.errors.OpError, AssertionError, ValueError, IndexError,
                  OSError)


def restore_error(path, e):
  first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
  return UserError(f"cannot restore checkpoint {path}: {first}")


def _step_of(prefix):
  match = re.search(r"-(\d+)$", prefix)
  return int(match.group(1)) if match else -1


def complete_checkpoints(directory):
  """Prefixes of the complete checkpoints in `directory` (the .index file
  is written last), oldest step first."""
  found = [p[:-len(".index")] for p in
           tf.io.gfile.glob(os.path.join(directory, "*.index"))]
  return sorted(found, key=lambda p: (_step_of(p), p))


def latest_checkpoint(directory):
  """The checkpoint that `directory`'s index (its `checkpoint` file) leads
  to, or None when it holds none. Checkpoints that the index does not lead
  to (it is missing, or names one that is not there) are one clear error:
  going on from step 0 would overwrite the run, and evaluating would
  report random weights as the run's."""
  index = os.path.join(directory, "checkpoint")
  try:
    state = tf.train.get_checkpoint_state(directory)
  except Exception as e:  # pylint: disable=broad-except
    # A damaged index file raises decode or protobuf parse errors.
    first = (str(e).strip().splitlines() or [type(e).__name__])[0][:120]
    raise UserError(f"{index} (the list of checkpoints) is damaged: "
                    f"{first}") from None
  named = state.model_checkpoint_path if state else ""
  if named and tf.io.gfile.exists(named + ".index"):
    return named
  if named:  # a copied run whose index holds the old absolute paths
    here = os.path.join(directory, os.path.basename(named))
    if tf.io.gfile.exists(here + ".index"):
      return here
  found = complete_checkpoints(directory)
  if not found:
    return None
  names = ", ".join(os.path.basename(p) for p in found)
  newest = os.path.basename(found[-1])
  what = (f"{index} names {os.path.basename(named)}, which is not there,"
          if named else f"{index}, the list of checkpoints, is missing"
          if not tf.io.gfile.exists(index) else f"{index} names none,")
  raise UserError(f"{what} but {directory} holds {names}: nothing was read "
                  f"or written; to go on from {newest}, put the line "
                  f"model_checkpoint_path: \"{newest}\" in {index}")


class CheckpointSeries:
  """A run's checkpoints `<directory>/ckpt-<step>`: the last `keep` saves
  that `scheduled(step)` calls regular, plus the newest save when it was
  off schedule (a SIGTERM's or a timed one), which the next save supersedes.
  So resume points, however many sessions a run spans, never push out a
  checkpoint that the schedule made (e.g. one a learning curve evaluates)."""

  def __init__(self, checkpoint, directory, keep, scheduled=lambda step: True):
    self.checkpoint, self.directory = checkpoint, directory
    self.keep, self.scheduled = keep, scheduled

  def _prefix(self, step):
    return os.path.join(self.directory, f"ckpt-{step}")

  def steps(self):
    """Steps of the complete checkpoints on disk (the index is written
    last), oldest first."""
    found = tf.io.gfile.glob(os.path.join(self.directory, "ckpt-*.index"))
    return sorted(int(m.group(1)) for m in
                  (re.search(r"ckpt-(\d+)\.index$", p) for p in found) if m)

  @property
  def latest_checkpoint(self):
    return latest_checkpoint(self.directory)

  def save(self, step):
    """Writes ckpt-<step>, then names it in the index. A failed write (a
    full disk) removes what it wrote and is one clear error: the index
    still names the last complete checkpoint."""
    prefix = self._prefix(step)
    before = set(tf.io.gfile.glob(prefix + "*"))
    try:
      tf.io.gfile.makedirs(self.directory)
      path = self.checkpoint.write(prefix)
      steps = self.steps()
      kept = self._update_index(path, step, steps)
    except (tf.errors.OpError, OSError) as e:
      for f in set(tf.io.gfile.glob(prefix + "*")) - before:
        _remove_quietly(f)
      last = latest_checkpoint(self.directory)
      raise UserError(
          f"cannot save checkpoint {prefix}: {cause(e)}; the last complete "
          f"checkpoint is {last or 'none'} (nothing else was changed)"
      ) from None
    for s in steps:
      if s not in kept:
        for f in tf.io.gfile.glob(self._prefix(s) + ".*"):
          tf.io.gfile.remove(f)
    # Part files of a save that a kill interrupted (TensorFlow's
    # `<prefix>_temp`): never read, so removed once a save succeeds.
    for f in tf.io.gfile.glob(os.path.join(self.directory, "ckpt-*_temp")):
      _remove_quietly(f)
    return path

  def _update_index(self, path, step, steps):
    """Names `path` the latest in the index; returns the steps kept."""
    kept = [s for s in steps if self.scheduled(s) and s != step]
    room = self.keep - 1 if self.scheduled(step) else self.keep
    kept = kept[-room:] if room > 0 else []
    kept.append(step)  # the newest, whatever its step
    # The state file first: a kill while deleting leaves files no state
    # names, never a state naming a missing checkpoint. Relative paths, so
    # a copied run directory still finds its checkpoints.
    tf.__internal__.train.update_checkpoint_state(
        self.directory, path,
        all_model_checkpoint_paths=[self._prefix(s) for s in kept],
        save_relative_paths=True)
    return kept


def _remove_quietly(path):
  try:
    if tf.io.gfile.isdir(path):
      tf.io.gfile.rmtree(path)
    else:
      tf.io.gfile.remove(path)
  except (tf.errors.OpError, OSError):
    pass  # a leftover is never read: only complete checkpoints are
