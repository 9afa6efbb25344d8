"""The training data's order as the original's get_input_fn reads it
(pretrain/pretrain_data.py there: shards interleaved min(4, n) at a time,
records shuffled in a buffer of 100): the default, with the order ours had
before one hparam away (input_cycle_length 16, shuffle_buffer_size 10000;
docs/mirroring.md)."""

import os

import numpy as np
import tensorflow as tf

import build_pretraining_dataset
import configure_pretraining
from pretrain import data
from tests.pretraining_runs import ROOT

SHARDS, SEQ = 16, 64


def first_batches_shards(tmp_path, **hparams):
  """How many shards each of the first batches of 8 draws from."""
  out = tmp_path / "pretrain_tfrecords"
  if not out.exists():
    build_pretraining_dataset.main([
        "--corpus-dir", os.path.join(ROOT, "sample_data", "corpus"),
        "--vocab-file", os.path.join(ROOT, "sample_data", "vocab.txt"),
        "--output-dir", str(out), "--max-seq-length", str(SEQ),
        "--num-out-files", str(SHARDS)])
  shard_of = {}
  spec = {"input_ids": tf.io.FixedLenFeature([SEQ], tf.int64)}
  for path in sorted(out.glob("pretrain_data.tfrecord-*")):
    for record in tf.data.TFRecordDataset(str(path)):
      ids = tf.io.parse_single_example(record, spec)["input_ids"]
      shard_of[ids.numpy().tobytes()] = path.name
  config = configure_pretraining.PretrainingConfig(
      data_dir=str(tmp_path), model_name="m", max_seq_length=SEQ,
      vocab_file=os.path.join(ROOT, "sample_data", "vocab.txt"), **hparams)
  config.validate()
  meta = data.load_metadata(config)
  data.check_metadata(meta, config)
  counts = []
  for batch in data.make_dataset(config, meta, 8).take(20):
    rows = batch["input_ids"].numpy().astype(np.int64)
    counts.append(len({shard_of[r.tobytes()] for r in rows}))
  return counts


def test_training_reads_four_shards_at_a_time_by_default(tmp_path):
  assert max(first_batches_shards(tmp_path)) <= 4
  # Ours before: 16 shards in the interleave, a buffer of 10,000: 8 rows
  # drawn from about all 16 (6.3 distinct shards on average).
  before = first_batches_shards(tmp_path, input_cycle_length=16,
                                shuffle_buffer_size=10000)
  assert np.mean(before) > 5
