"""Checkpoints that name every variable by its Keras path.

Keras 3 layers are not tracked by name in tf.train.Checkpoint, so we build
the tree ourselves: keys like `model/electra.Sdiscriminator.Slayer_0...`
are stable across processes and readable by other tools.
"""

import os
import re

import tensorflow as tf

from util.errors import UserError


def stable_key(path):
  """Keras numbers auto-named objects per process (`seed_generator_12/`,
  `adam_w_1/`); dropping that number keeps keys independent of whatever
  else the process built. Repeats are told apart by order below."""
  return re.sub(r"^([^/]*?)_\d+/", r"\1/", path)


def variable_tree(variables):
  """A trackable holding each variable under its (de-duplicated) path."""
  named = {}
  for variable in variables:
    base = stable_key(variable.path)
    key, n = base, 1
    while key in named:
      key, n = f"{base}_{n}", n + 1
    named[key] = variable
  return tf.train.Checkpoint(**named)


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
  except (tf.errors.OpError, AssertionError, ValueError, IndexError,
          OSError) as e:  # a truncated data file raises IndexError
    first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
    raise UserError(f"cannot restore checkpoint {path}: {first}") from None


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
    return tf.train.latest_checkpoint(self.directory)

  def save(self, step):
    tf.io.gfile.makedirs(self.directory)
    path = self.checkpoint.write(self._prefix(step))
    steps = self.steps()
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
    for s in steps:
      if s not in kept:
        for f in tf.io.gfile.glob(self._prefix(s) + ".*"):
          tf.io.gfile.remove(f)
    return path
