"""Checkpoints that name every variable by its Keras path.

Keras 3 layers are not tracked by name in tf.train.Checkpoint, so we build
the tree ourselves: keys like `model/electra.Sdiscriminator.Slayer_0...`
are stable across processes and readable by other tools.
"""

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
