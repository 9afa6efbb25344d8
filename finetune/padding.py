"""Each fine-tuning batch padded to its longest row, not max_seq_length
(`pad_to_multiple`): in training, evaluation and prediction, on both
backends, with the batches and their order unchanged.

The length is the batch's last column with any real token, rounded up to
`pad_to_multiple` (at least the task's min_trimmed_length), so a step is
traced or jitted for a handful of lengths. Every feature of input_ids'
shape ([B, T], or [B, C, T] for multiple choice: ids, mask, segments, a
tagging task's label_ids and label_weights, SQuAD's answer_mask) is cut
on its last axis. Nothing else changes: padded keys are masked out of
attention, position embeddings are those of the kept positions, layer
norm is per token, and per-token losses and the CRF weigh padding 0; per-
token outputs are padded back to T for the scorers.
"""

import numpy as np


def trimmed_length(mask, min_length=1, multiple=1):
  """The length a batch of [..., T] padding mask runs at: its last column
  with any real token, rounded up to `multiple`, at least min_length, at
  most T (the inference engine's rule too, inference/engine.py)."""
  mask = np.asarray(mask)
  real = np.flatnonzero(mask.reshape(-1, mask.shape[-1]).any(axis=0))
  length = max(int(real[-1]) + 1 if real.size else 1, min_length)
  return min(mask.shape[-1], -(-length // multiple) * multiple)


def multiple_for(config, seq_len):
  """The multiple a run pads its batches to, or 0: off (pad_to_multiple 0,
  or one at least max_seq_length, pads every batch to T as before)."""
  multiple = config.pad_to_multiple
  return multiple if 0 < multiple < seq_len else 0


def is_sequence(value, ids_shape):
  """Whether a feature is per token: input_ids' shape."""
  return tuple(value.shape) == tuple(ids_shape)


def batch_length(features, multiple, min_length=1):
  """The length (NumPy features of one batch) runs at."""
  return trimmed_length(features["input_mask"], min_length, multiple)


def cut(features, length):
  """Every per-token feature cut to `length` on its last axis."""
  shape = tuple(features["input_ids"].shape)
  return {k: v[..., :length] if is_sequence(v, shape) else v
          for k, v in features.items()}


def trimmed(features, multiple, min_length=1):
  """NumPy features of one batch at the batch's length (multiple 0: as
  they are)."""
  if not multiple:
    return features
  return cut(features, batch_length(features, multiple, min_length))


def padded_back(outputs, keys, seq_len):
  """Per-token outputs ([B, L]: `keys`) padded with zeros back to T, as
  the scorers index them."""
  out = dict(outputs)
  for key in keys:
    value = np.asarray(out[key])
    out[key] = np.pad(value, [(0, 0)] * (value.ndim - 1) +
                      [(0, seq_len - value.shape[-1])])
  return out


def tf_trimmer(multiple, min_length=1):
  """A tf.data map of batched features to their batch's length (the
  rule of `batch_length`, in TensorFlow ops)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  def trim(features):
    mask = features["input_mask"]
    seq_len = mask.shape[-1]
    real = tf.reduce_any(tf.not_equal(tf.reshape(mask, [-1, seq_len]), 0),
                         axis=0)
    last = tf.reduce_max(tf.where(real, tf.range(1, seq_len + 1), 0))
    length = tf.maximum(tf.maximum(last, 1), min_length)
    length = tf.minimum((length + multiple - 1) // multiple * multiple,
                        seq_len)
    return cut(features, length)
  return trim
