"""The Keras dtype policy of a precision setting, for both backends (no
TensorFlow import: the JAX paths set it too)."""

import keras

POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16",
            "float16": "mixed_float16"}


def set_precision(precision):
  """Sets the Keras dtype policy; call before building the model."""
  policy = POLICIES[precision]
  keras.mixed_precision.set_dtype_policy(policy)
  return policy
