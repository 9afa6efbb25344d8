"""pretrain/arrays.py: a dataset's TFRecords (training and held-out
shards) as compact NumPy arrays that unpack to the same features."""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf

from pretrain import arrays
from pretrain import data
from tests import slot_data
from util.errors import UserError


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  root = tmp_path_factory.mktemp("arrays")
  data_dir = slot_data.build_data(str(root / "data"))
  meta = slot_data.export_arrays(data_dir, str(root / "arrays"),
                                 max_train_mb=0)
  return data_dir, str(root / "arrays"), meta


def parsed(files):
  out = [{k: v.numpy() for k, v in data._parse_batch(  # noqa
      batch, slot_data.SEQ).items()}
         for batch in tf.data.TFRecordDataset(files).batch(1000)]
  return {k: np.concatenate([o[k] for o in out]) for k in out[0]}


@pytest.mark.parametrize("split,pattern", [
    ("train", "pretrain_data.tfrecord-*"),
    ("heldout", "heldout_data.tfrecord-*")])
def test_arrays_unpack_to_the_tfrecords_features(exported, split, pattern):
  data_dir, path, meta = exported
  files = sorted(glob.glob(os.path.join(data_dir, "pretrain_tfrecords",
                                        pattern)))
  want = parsed(files)
  loaded = arrays.load(path)
  columns = loaded.splits[split]
  assert columns["input_ids"].dtype == np.uint16
  got = {k: np.asarray(v) for k, v in arrays.unpack(columns).items()}
  assert sorted(got) == sorted(want)
  for k in want:
    np.testing.assert_array_equal(got[k], want[k], err_msg=k)
  assert meta["eval_source"] == "held-out documents"
  assert meta["vocab_size"] == 7505 and meta["max_seq_length"] == 32
  assert os.path.isfile(meta["vocab_file"])


def test_export_draws_a_subset_within_the_size(exported, tmp_path):
  data_dir, path, _ = exported
  full = arrays.load(path).train["input_ids"]
  meta = slot_data.export_arrays(data_dir, str(tmp_path), max_train_mb=0.02)
  assert meta["train_examples"] == int(0.02e6 // (2 * slot_data.SEQ))
  subset = arrays.load(str(tmp_path)).train["input_ids"]
  rows = {r.tobytes() for r in full}
  assert all(r.tobytes() in rows for r in subset)


def test_config_is_checked_against_the_arrays(exported):
  from pretrain.config import PretrainingConfig
  loaded = arrays.load(exported[1])
  config = PretrainingConfig(max_seq_length=slot_data.SEQ)
  loaded.check(config)
  assert config.vocab_size == 7505
  with pytest.raises(UserError, match="max_seq_length 128 disagrees"):
    loaded.check(PretrainingConfig(max_seq_length=128))


def test_layouts_that_do_not_unpack_are_refused():
  ids = np.array([[2, 7, 3, 8, 3, 0]])
  mask = np.array([[1, 1, 1, 1, 1, 0]])
  segments = np.array([[0, 0, 0, 1, 1, 0]])
  packed = arrays.pack(ids, mask, segments, 100)
  assert packed["num_tokens"].tolist() == [5]
  assert packed["segment_a"].tolist() == [3]
  with pytest.raises(UserError, match="cannot be packed"):
    arrays.pack(ids, np.array([[1, 1, 0, 1, 1, 0]]), segments, 100)
  with pytest.raises(UserError, match="cannot be packed"):
    arrays.pack(ids, mask, np.array([[0, 1, 0, 1, 1, 0]]), 100)


def test_missing_arrays_are_named(tmp_path):
  with pytest.raises(UserError, match="prepare_gpu_slot.py"):
    arrays.load(str(tmp_path))


def test_each_epoch_visits_every_example_once():
  n, batch = 10, 4
  rows = arrays.batch_rows(7, n, batch, 0, 5).reshape(-1)  # two epochs
  assert sorted(rows[:n]) == list(range(n))
  assert sorted(rows[n:2 * n]) == list(range(n))
  assert list(rows[:n]) != list(rows[n:2 * n])  # reshuffled
  # Any step's batch without the ones before (what a chunk asks for).
  np.testing.assert_array_equal(arrays.batch_rows(7, n, batch, 3, 2),
                                rows[12:20].reshape(2, batch))


def test_arrays_without_token_counts_say_so_for_a_unigram_run():
  from util.errors import UserError
  loaded = arrays.Arrays({"vocab_size": 60}, {}, "/some/pretrain_arrays")
  with pytest.raises(UserError, match="/some/pretrain_arrays were exported "
                     "without the dataset's token counts"):
    loaded.token_counts()


@pytest.mark.parametrize("compressed", [True, False])
def test_lazy_training_columns_read_the_same_rows(exported, tmp_path,
                                                  compressed):
  """load(lazy_train=True): each range of rows read from the .npz alone
  (a process of several keeps only its shares) equals the whole column's;
  the shares of a process over them are those over the loaded arrays."""
  from pretrain.shares import Shares
  path = exported[1]
  whole = arrays.load(path)
  if not compressed:  # np.savez's stored members
    import shutil
    shutil.copy(os.path.join(path, arrays.META), tmp_path)
    for split in arrays.SPLITS:
      np.savez(str(tmp_path / f"{split}.npz"), **whole.splits[split])
    path = str(tmp_path)
  lazy = arrays.load(path, lazy_train=True)
  n = whole.num_examples()
  assert lazy.num_examples() == n and isinstance(
      lazy.train["input_ids"], arrays.NpzColumn)
  for c, column in whole.train.items():
    for a, b in ((0, 1), (3, n // 2), (n // 3, n), (n - 1, n), (5, 5)):
      got = lazy.train[c][a:b]
      assert got.dtype == column.dtype
      np.testing.assert_array_equal(got, column[a:b], err_msg=f"{c}[{a}:{b}]")
  shares = Shares(n, 4, own=[1, 3])
  held, want = shares.held(lazy.train), shares.held(whole.train)
  for c in want:
    np.testing.assert_array_equal(held[c], want[c])
    np.testing.assert_array_equal(shares.block(lazy.train[c], 3),
                                  shares.block(whole.train[c], 3))
  np.testing.assert_array_equal(lazy.heldout["input_ids"],
                                whole.heldout["input_ids"])
