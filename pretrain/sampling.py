"""Sampling replacement tokens from generator logits (keras.random only)."""

import keras
from keras import ops


def sample_from_softmax(logits, seed, temperature=1.0, disallow_ids=None):
  """One id per row of logits [..., V] from softmax(logits / T), no gradient.

  Uses keras.random.categorical: Gumbel-max on JAX, TensorFlow's exact
  multinomial kernel on TF (2.5x faster there than drawing V Gumbel
  variables per row). Returns int32 ids, never one-hot samples.
  `disallow_ids` ([...] ids, e.g. the originals) are excluded.
  """
  logits = ops.stop_gradient(ops.cast(logits, "float32")) / temperature
  if disallow_ids is not None:
    vocab = ops.shape(logits)[-1]
    logits = logits - 1e9 * ops.one_hot(disallow_ids, vocab, dtype="float32")
  flat = ops.reshape(logits, (-1, ops.shape(logits)[-1]))
  ids = keras.random.categorical(flat, 1, seed=seed, dtype="int32")
  # NaN logits (a diverged generator) make TF's kernel return V, which no
  # embedding holds: kept in range, so the step's NaN loss is what stops
  # the run (one clear line), not an index error. Finite logits never
  # give V, so this changes no sample.
  ids = ops.minimum(ids, ops.shape(logits)[-1] - 1)
  return ops.reshape(ids, ops.shape(logits)[:-1])


def gumbel_max_sample(logits, seed, temperature=1.0):
  """argmax(logits / T + Gumbel noise): the original release's sampler."""
  logits = ops.stop_gradient(ops.cast(logits, "float32")) / temperature
  uniform = keras.random.uniform(ops.shape(logits), seed=seed)
  gumbel = -ops.log(-ops.log(uniform + 1e-9) + 1e-9)
  return ops.cast(ops.argmax(logits + gumbel, axis=-1), "int32")
