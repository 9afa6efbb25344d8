"""A run's checkpoints: keep_checkpoint_max counts the scheduled saves
only; an off-schedule save (SIGTERM, timed) lasts until the next save."""

import os
import shutil

import numpy as np
import tensorflow as tf

from training.checkpointing import CheckpointSeries


def on_disk(directory):
  return sorted(int(f[len("ckpt-"):-len(".index")])
                for f in os.listdir(directory) if f.endswith(".index"))


def test_off_schedule_saves_never_push_out_scheduled_ones(tmp_path):
  directory = str(tmp_path / "run")
  value = tf.Variable(0.0)
  series = CheckpointSeries(tf.train.Checkpoint(v=value), directory, keep=2,
                            scheduled=lambda step: step % 4 == 0)
  expected = {4: [4], 5: [4, 5], 8: [4, 8], 9: [4, 8, 9], 10: [4, 8, 10],
              12: [8, 12], 13: [8, 12, 13], 16: [12, 16]}
  for step, kept in expected.items():
    value.assign(float(step))
    series.save(step)
    assert on_disk(directory) == kept, step
    assert {f.split(".")[0] for f in os.listdir(directory)} == {
        "checkpoint"} | {f"ckpt-{s}" for s in kept}  # no stray data files
    state = tf.train.get_checkpoint_state(directory)
    assert [os.path.basename(p) for p in
            state.all_model_checkpoint_paths] == [f"ckpt-{s}" for s in kept]
    assert series.latest_checkpoint == os.path.join(directory,
                                                    f"ckpt-{step}")
  assert series.steps() == [12, 16]

  # Paths in the state file are relative: a copied run finds its own.
  copy = str(tmp_path / "copy")
  shutil.copytree(directory, copy)
  shutil.rmtree(directory)
  latest = tf.train.latest_checkpoint(copy)
  assert latest == os.path.join(copy, "ckpt-16")
  restored = tf.Variable(0.0)
  tf.train.Checkpoint(v=restored).read(latest).assert_consumed()
  assert np.float32(restored.numpy()) == 16.0


def test_a_save_removes_the_part_files_of_a_killed_one(tmp_path):
  """A save killed before its merge leaves TensorFlow's ckpt-N_temp
  folder; when N is not saved again (an off-schedule save), the next save
  removes it."""
  directory = tmp_path / "run"
  (directory / "ckpt-7_temp").mkdir(parents=True)
  (directory / "ckpt-7_temp" / "part-00000-of-00001.index").write_bytes(b"x")
  series = CheckpointSeries(tf.train.Checkpoint(v=tf.Variable(1.0)),
                            str(directory), keep=2)
  series.save(8)
  assert sorted(os.listdir(directory)) == [
      "checkpoint", "ckpt-8.data-00000-of-00001", "ckpt-8.index"]
