"""Checkpoints that name every variable by its Keras path.

Keras 3 layers are not tracked by name in tf.train.Checkpoint, so we build
the tree ourselves: keys like `model/electra.Sdiscriminator.Slayer_0...`
are stable across processes and readable by other tools.
"""

import tensorflow as tf


def variable_tree(variables):
  """A trackable holding each variable under its (de-duplicated) path."""
  named = {}
  for variable in variables:
    key, n = variable.path, 1
    while key in named:
      key, n = f"{variable.path}_{n}", n + 1
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
