"""Pretraining: its config, data packing, objectives, losses and sampling."""

import os


def load_objectives():
  """The pretrain.objectives registry, imported on first use.

  The one place a delayed import is the point: the registry imports Keras,
  and so TensorFlow, whose seconds of start-up (and C++ banner, muted
  first) a bad flag or path should not wait for. Under another Keras
  backend (KERAS_BACKEND=jax) TensorFlow is not imported at all.
  """
  if os.environ.get("KERAS_BACKEND", "tensorflow") == "tensorflow":
    from util.tf_quiet import import_tensorflow
    import_tensorflow()
  from pretrain import objectives
  return objectives
