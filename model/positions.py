"""Gather/scatter at per-example positions, with keras.ops only."""

from keras import ops


def gather_positions(sequence, positions):
  """sequence [B, T, ...], positions [B, P] int -> [B, P, ...]."""
  shape = ops.shape(sequence)
  batch, seq_len = shape[0], shape[1]
  offsets = ops.expand_dims(ops.arange(batch, dtype="int32") * seq_len, 1)
  flat_index = ops.reshape(ops.cast(positions, "int32") + offsets, (-1,))
  flat = ops.reshape(sequence, (-1,) + tuple(shape[2:]))
  gathered = ops.take(flat, flat_index, axis=0)
  return ops.reshape(gathered, (batch, -1) + tuple(shape[2:]))


REPEATED = ("average", "first")  # how a position picked twice is written


def scatter_positions(ids, positions, updates, weights, repeated="average"):
  """Writes updates [B, P] into ids [B, T] at positions where weights > 0.

  A position picked by several slots (masking draws with replacement)
  takes, by `repeated`: "average", the original release's
  floordiv(sum of the slots' updates, count) (its scatter_update: an id no
  slot sampled, most often a token unlike the text); "first", the first
  slot's update (a real sample of the generator). Uses a [B, P, T] one-hot
  over positions (P and T are small), which works the same on every
  backend and never touches the vocabulary axis.
  """
  seq_len = ops.shape(ids)[1]
  hits = ops.one_hot(ops.cast(positions, "int32"), seq_len, dtype="int32")
  hits = hits * ops.cast(ops.expand_dims(weights > 0, -1), "int32")
  replaced = ops.max(hits, axis=1)  # [B, T] 1 where an update lands
  updates = ops.cast(updates, "int32")
  if repeated == "first":
    values = first_slot_values(hits, updates)
  else:
    sums = ops.sum(hits * ops.expand_dims(updates, -1), axis=1)
    values = ops.floor_divide(sums, ops.maximum(ops.sum(hits, axis=1), 1))
  return ops.where(replaced > 0, values, ops.cast(ids, "int32")), replaced


def first_slot_values(hits, updates):
  """hits [B, P, T] (0/1), updates [B, P] -> [B, T]: at each position, the
  update of the first slot that writes it (argmax takes the first max)."""
  first = ops.cast(ops.argmax(hits, axis=1), "int32")
  return ops.take_along_axis(updates, first, axis=1)
