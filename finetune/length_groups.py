"""Length-grouped training batches (`group_by_length`, off by default).

The original release batches its shuffled rows as they come; with batches
cut to their longest row (finetune/padding.py) the cost of a step follows
its longest row. Grouping, as transformers' `group_by_length` does with
its mega-batches: each window of `window` consecutive batches (the same
rows, drawn as before) is sorted by length and split again, so rows of a
batch have similar lengths, and the window's batches are then shuffled
(seeded), so short and long steps stay spread over the run. Every epoch
still visits every row once; which rows share a batch changes: a deviation
from the original (docs/mirroring.md).
"""

import numpy as np


def grouped_order(lengths, seed, window_index):
  """Where each row of a window goes: `lengths` [W, B] of the window's
  batches (as drawn) -> indices [W, B] into its flattened rows, each
  batch's rows of similar length, the batches in a seeded random order."""
  lengths = np.asarray(lengths)
  w, b = lengths.shape
  by_length = np.argsort(lengths.reshape(-1), kind="stable").reshape(w, b)
  shuffle = np.random.default_rng([seed, int(window_index)]).permutation(w)
  return by_length[shuffle].astype(np.int64)


def group_rows(order, lengths, window, seed):
  """The JAX path's train rows [steps, B] (example ids), regrouped window
  by window; `lengths` of every example. window 0: as they are."""
  if not window:
    return order
  out = np.empty_like(order)
  for i, first in enumerate(range(0, len(order), window)):
    rows = order[first:first + window]
    out[first:first + len(rows)] = rows.reshape(-1)[
        grouped_order(lengths[rows], seed, i)]
  return out


def tf_grouper(window, seed):
  """The TensorFlow path: a map over an enumerated dataset of windows (its
  batches batched by `window`; a repeated dataset's are all full), then
  unbatched: the same `grouped_order`."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  def regroup(index, batches):
    mask = batches["input_mask"]
    w, b = tf.shape(mask)[0], tf.shape(mask)[1]
    flat = tf.reshape(mask, [w * b, -1, mask.shape[-1]])
    lengths = tf.reduce_max(tf.reduce_sum(
        tf.cast(tf.not_equal(flat, 0), tf.int32), -1), -1)
    order = tf.numpy_function(
        lambda lengths, i: grouped_order(lengths.reshape(window, -1), seed,
                                         i),
        [lengths, index], tf.int64, stateful=False)

    def take(value):
      rows = tf.reshape(value, tf.concat([[w * b], tf.shape(value)[2:]], 0))
      out = tf.gather(rows, order)
      out.set_shape(value.shape)
      return out
    return {k: take(v) for k, v in batches.items()}
  return regroup
