"""Imports TensorFlow without its C++ start-up banner on stderr.

TF 2.21 prints oneDNN/CUDA-probe lines from C++ before logging is set up,
which TF_CPP_MIN_LOG_LEVEL cannot hide; they bury our own messages. Set
ELECTRA_TF_VERBOSE=1 to see them.
"""

import os
import sys

_QUIETED = set()  # modules already imported behind a muted stderr


def import_tensorflow(with_text=False):
  """Returns the tensorflow module, imported with fd 2 muted.

  with_text also imports tensorflow_text, whose kernels log the banner again.
  """
  wanted = {"tensorflow", "tensorflow_text"} if with_text else {"tensorflow"}
  if wanted <= _QUIETED or os.environ.get("ELECTRA_TF_VERBOSE"):
    import tensorflow as tf
    if with_text:
      import tensorflow_text  # noqa: F401
    return tf
  saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
  os.dup2(devnull, 2)
  try:
    import tensorflow as tf
    tf.config.list_physical_devices()  # the CUDA probe logs here
    if with_text:
      import tensorflow_text  # noqa: F401
    _QUIETED.update(wanted)
    return tf
  finally:
    os.dup2(saved, 2)
    os.close(saved)
    os.close(devnull)



def tensorflow_script(name, jax=False):
  """Readies a TensorFlow script; call before anything imports Keras.
  Returns the backend it runs on: "tensorflow", or "jax" for a script that
  also runs under KERAS_BACKEND=jax (`jax=True`: run_pretraining.py and
  run_finetuning.py).

  Keras takes its backend from KERAS_BACKEND, else from ~/.keras/keras.json,
  which the first Keras import on a machine writes with the backend then in
  use: after a JAX run (the GPU slot's driver) wrote "jax" there, a script
  would come up on JAX and fail deep inside tf.data. So an unset
  KERAS_BACKEND means TensorFlow, and any other is refused in one line.
  """
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  backend = os.environ.setdefault("KERAS_BACKEND", "tensorflow")
  allowed = ("tensorflow", "jax") if jax else ("tensorflow",)
  if backend not in allowed:
    also = " or jax" if jax else ""
    print(f"error: {name} runs Keras on TensorFlow{also}, but KERAS_BACKEND="
          f"{backend} is set: unset it", file=sys.stderr, flush=True)
    sys.exit(2)
  return backend
