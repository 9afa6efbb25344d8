"""Length-grouped training batches (finetune/length_groups.py,
group_by_length): each window of batches keeps its rows, its batches hold
rows of similar length (so less padding), TensorFlow's and the NumPy
(JAX) path's grouping agree, and 0 leaves the original's batches."""

import numpy as np

from finetune import length_groups

N, SEQ, BATCH, WINDOW = 64, 64, 8, 4


class OneDevice:
  num_replicas_in_sync = 1


def tf_batches(group_by_length, count, multiple=0, seed=5):
  from finetune.config import FinetuningConfig
  from finetune.task_data import TaskData
  lengths = np.random.default_rng(0).integers(3, SEQ, N)
  mask = (np.arange(SEQ) < lengths[:, None]).astype(np.int32)
  features = {"input_ids": mask * np.arange(N)[:, None].astype(np.int32),
              "input_mask": mask, "segment_ids": mask * 0,
              "label_ids": np.arange(N, dtype=np.int32)}
  data = TaskData(FinetuningConfig(pad_to_multiple=multiple,
                                   group_by_length=group_by_length), [],
                  OneDevice())
  batches = data.batches(features, BATCH, seed=seed)
  return lengths, [{k: v.numpy() for k, v in next(batches).items()}
                   for _ in range(count)]


def padded_tokens(lengths, batches):
  return sum(int(lengths[b].max()) * len(b) for b in batches)


def test_a_window_keeps_its_rows_in_batches_of_similar_length():
  lengths = np.random.default_rng(1).integers(1, 128, (WINDOW, BATCH))
  order = length_groups.grouped_order(lengths, seed=3, window_index=0)
  flat = lengths.reshape(-1)
  assert sorted(order.reshape(-1)) == list(range(WINDOW * BATCH))
  grouped = flat[order]
  # Sorted then split: batches' ranges do not interleave.
  spans = sorted((b.min(), b.max()) for b in grouped)
  assert all(hi <= lo for (_, hi), (lo, _) in zip(spans, spans[1:]))
  assert grouped.max(1).sum() < lengths.max(1).sum()
  # Seeded: another window (or seed) shuffles its batches otherwise.
  orders = {tuple(length_groups.grouped_order(lengths, 3, i)[:, 0])
            for i in range(6)}
  assert len(orders) > 1


def test_tf_batches_regroup_each_window_and_cut_less():
  lengths, plain = tf_batches(0, 3 * WINDOW)
  _, grouped = tf_batches(WINDOW, 3 * WINDOW)
  for w in range(3):
    window = slice(w * WINDOW, (w + 1) * WINDOW)
    rows = np.stack([b["label_ids"] for b in plain[window]])
    got = np.stack([b["label_ids"] for b in grouped[window]])
    # The same rows as the original's draws; grouped as grouped_order says.
    np.testing.assert_array_equal(
        got, rows.reshape(-1)[length_groups.grouped_order(lengths[rows], 5,
                                                          w)])
    for b in grouped[window]:  # each row's features moved together
      np.testing.assert_array_equal(b["input_ids"].max(1), b["label_ids"])
  rows = [b["label_ids"] for b in grouped]
  assert padded_tokens(lengths, rows) < 0.8 * padded_tokens(
      lengths, [b["label_ids"] for b in plain])


def test_grouped_batches_are_cut_to_their_longest_row():
  lengths, grouped = tf_batches(WINDOW, WINDOW, multiple=16)
  for b in grouped:
    longest = int(lengths[b["label_ids"]].max())
    assert b["input_ids"].shape == (BATCH, -(-longest // 16) * 16)


def test_the_jax_path_groups_its_rows_the_same_way():
  lengths = np.random.default_rng(2).integers(1, 128, N)
  order = np.random.default_rng(3).integers(0, N, (10, BATCH))
  got = length_groups.group_rows(order, lengths, WINDOW, seed=7)
  for i, first in enumerate(range(0, 10, WINDOW)):
    rows = order[first:first + WINDOW]
    np.testing.assert_array_equal(
        got[first:first + len(rows)],
        rows.reshape(-1)[length_groups.grouped_order(lengths[rows], 7, i)])
  assert length_groups.group_rows(order, lengths, 0, 7) is order
