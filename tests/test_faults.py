"""Faults no user input causes (issue 54): a disk that fills while a
checkpoint, a TFRecord shard, an export or a results file is written; a
SIGKILL in the middle of a checkpoint save; a shard corrupted while a run
reads it; a loss that diverges; a read-only output folder for each script.

The disk is a real tmpfs of a few MB (tests/small_disk.py), filled at a
point the code signals (a save returned, a log line written), or where
mounting is not allowed, the same write fails with an injected ENOSPC.
Each fault must end in one `error:` line and a non-zero exit, leave every
file that was there before byte-identical (or atomically replaced) with
nothing half-written beside it, and a resume must lose at most the steps
since the last complete checkpoint.
"""

import os
import re
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import build_pretraining_dataset
import export_model
import run_comparison
import run_finetuning
import run_pretraining
import run_scoring
from tests.pretraining_runs import ROOT
from tests.pretraining_runs import hparams
from tests.script_checks import snapshot
from tests.small_disk import no_space
from tests.small_disk import small_disk
from training import checkpointing

SEQ = 64


@pytest.fixture(scope="module")
def small_data(tmp_path_factory):
  """Two documents in two shards: an epoch is 36 steps of 8, so a run
  opens its shards again within a test."""
  root = tmp_path_factory.mktemp("faults")
  code = build_pretraining_dataset.main([
      "--corpus-dir", os.path.join(ROOT, "sample_data", "corpus"),
      "--vocab-file", os.path.join(ROOT, "sample_data", "vocab.txt"),
      "--output-dir", str(root / "pretrain_tfrecords"), "--max-seq-length",
      str(SEQ), "--max-docs", "2", "--num-out-files", "2",
      "--heldout-fraction", "0"])
  assert code == 0
  return str(root)


def _pt(data_dir, model_dir, *extra, **kw):
  run = hparams(**dict(dict(num_train_steps=20, save_checkpoints_steps=10,
                            shuffle_buffer_size=16, num_eval_steps=1), **kw))
  return ["--data-dir", data_dir, "--model-dir", str(model_dir),
          "--hparams", run, *[str(x) for x in extra]]


def _one_error(main, argv, capsys):
  """main(argv) ends in exit 2 and exactly one `error:` line, its last."""
  with pytest.raises(SystemExit) as info:
    main(argv)
  out, err = capsys.readouterr()
  assert info.value.code == 2, (out[-2000:], err[-2000:])
  assert "Traceback" not in err, err
  errors = [l for l in err.splitlines() if l.startswith("error:")]
  assert len(errors) == 1 and err.strip().splitlines()[-1] == errors[0], err
  return out, errors[0]


def _kept(before, after, may_grow=()):
  """Every file of `before` is in `after` with the same bytes (files whose
  name matches `may_grow`, the running session's own log, aside), and no
  file half-written by the fault is left."""
  changed = [p for p in before if after.get(p) != before[p] and
             not any(re.search(g, p) for g in may_grow)]
  assert not changed, changed
  left = [p for p in after if re.search(r"_temp|incomplete\.|\.tmp$", p)]
  assert not left, left


def _after_save(monkeypatch, step, action):
  """Runs action() once the checkpoint of `step` is complete."""
  real_save = checkpointing.CheckpointSeries.save

  def save(self, at):
    path = real_save(self, at)
    if at == step:
      action()
    return path
  monkeypatch.setattr(checkpointing.CheckpointSeries, "save", save)


def _variables_finite(model_dir):
  for prefix in checkpointing.complete_checkpoints(str(model_dir)):
    reader = tf.train.load_checkpoint(prefix)
    for name, dtype in reader.get_variable_to_dtype_map().items():
      if name.startswith("model/") and dtype.is_floating:
        assert np.isfinite(reader.get_tensor(name)).all(), (prefix, name)


# The running session's own files: its TensorBoard log grows, and the lock
# records who holds the folder.
EVENTS = (r"/train/events\.out", r"/training\.lock$")


# ------------------------------------------------------------ full disk
def test_full_disk_while_a_checkpoint_is_written(small_data, tmp_path, capsys,
                                                 monkeypatch):
  """ckpt-10 is saved, then the disk is full: saving ckpt-20 fails. The
  index still names ckpt-10, ckpt-20's part files are gone, and with room
  again the same command resumes from step 10."""
  with small_disk(tmp_path / "disk", "64m") as disk:
    model_dir = disk.path / "run"
    at_fault = {}

    def fill():
      at_fault.update(snapshot(model_dir))
      if disk.mounted:
        disk.fill()
      else:  # TensorFlow's own error for a full disk, from its SaveV2
        from tensorflow.python.ops import io_ops

        def save_v2(prefix, *args, **kwargs):
          raise tf.errors.ResourceExhaustedError(
              None, None, f"{prefix.numpy().decode()}.tempstate1; No space "
              "left on device")
        monkeypatch.setattr(io_ops, "save_v2", save_v2)

    _after_save(monkeypatch, 10, fill)
    out, error = _one_error(run_pretraining.main, _pt(small_data, model_dir),
                            capsys)
    assert error == (
        f"error: cannot save checkpoint {model_dir}/ckpt-20: No space left "
        f"on device; the last complete checkpoint is {model_dir}/ckpt-10 "
        "(nothing else was changed)")
    assert "step 20/20" in out
    _kept(at_fault, snapshot(model_dir), EVENTS)
    monkeypatch.undo()
    disk.free()
    run_pretraining.main(_pt(small_data, model_dir))
    out = capsys.readouterr().out
    assert f"resumed from {model_dir}/ckpt-10 at step 10" in out
    assert f"saved {model_dir}/ckpt-20" in out
    assert checkpointing.latest_checkpoint(str(model_dir)).endswith("ckpt-20")


def test_full_disk_while_eval_results_are_written(small_data, tmp_path,
                                                  capsys, monkeypatch):
  """The earlier eval_results.json stays whole; no .tmp is left."""
  with small_disk(tmp_path / "disk", "64m") as disk:
    model_dir = disk.path / "run"
    run_pretraining.main(_pt(small_data, model_dir, "--do-eval",
                             num_train_steps=10))
    capsys.readouterr()
    before = snapshot(model_dir)
    if disk.mounted:
      disk.fill()
    else:
      from util import storage
      real_open = storage.open_file

      def open_file(path, mode="r"):
        if "w" in mode and str(path).startswith(str(model_dir)):
          raise no_space(path)
        return real_open(path, mode)
      monkeypatch.setattr(storage, "open_file", open_file)
    _, error = _one_error(run_pretraining.main, _pt(
        small_data, model_dir, "--no-do-train", "--do-eval",
        num_train_steps=10), capsys)
    assert re.fullmatch(rf"error: cannot write {model_dir}/eval_results"
                        r"\.json: No space left on device", error), error
    _kept(before, snapshot(model_dir), (r"/eval/events\.out",
                                      r"/training\.lock$"))


def _build(out, *extra):
  return build_pretraining_dataset.main([
      "--corpus-dir", os.path.join(ROOT, "sample_data", "corpus"),
      "--vocab-file", os.path.join(ROOT, "sample_data", "vocab.txt"),
      "--output-dir", str(out), "--max-seq-length", str(SEQ),
      "--max-docs", "3", "--num-out-files", "2", *extra])


def test_full_disk_while_a_shard_is_written(tmp_path, capsys, monkeypatch):
  """An earlier build is rebuilt with --overwrite on a disk that fills
  half way through the shards: the earlier build is left whole (its files
  are replaced only once the new one is complete), nothing incomplete is
  left, and with room again the build completes."""
  with small_disk(tmp_path / "disk", "4m") as disk:
    out = disk.path / "data"
    assert _build(out) == 0
    capsys.readouterr()
    before = snapshot(out)
    if disk.mounted:
      disk.fill(leave=64 << 10)  # room for part of the new shards
    else:
      real_writer = tf.io.TFRecordWriter

      class FullAfterOne(real_writer):
        written = 0

        def write(self, record):
          FullAfterOne.written += 1
          if FullAfterOne.written > 20:
            raise tf.errors.ResourceExhaustedError(
                None, None, "No space left on device")
          super().write(record)
      monkeypatch.setattr(tf.io, "TFRecordWriter", FullAfterOne)
    _, error = _one_error(build_pretraining_dataset.main, [
        "--corpus-dir", os.path.join(ROOT, "sample_data", "corpus"),
        "--vocab-file", os.path.join(ROOT, "sample_data", "vocab.txt"),
        "--output-dir", str(out), "--max-seq-length", str(SEQ),
        "--max-docs", "6", "--num-out-files", "2", "--overwrite"], capsys)
    assert re.fullmatch(rf"error: cannot write (the shards in )?{out}\S*: No "
                        r"space left on device", error), error
    after = snapshot(out)
    _kept(before, after)
    assert after == before
    monkeypatch.undo()
    disk.free()
    assert _build(out, "--max-docs", "6", "--overwrite") == 0
    assert '"num_documents": 6' in (out / "metadata.json").read_text()


def test_full_disk_while_an_export_is_written(runs, tmp_path, capsys,
                                              monkeypatch):
  """The empty folder the user gave stays empty; no staging folder."""
  data_dir, _ = runs
  with small_disk(tmp_path / "disk", "1m") as disk:
    out = disk.path / "export"
    out.mkdir()
    if disk.mounted:
      disk.fill(leave=32 << 10)
    else:
      from interop import hf

      def save(*args, **kwargs):
        raise no_space()
      monkeypatch.setattr(hf, "save", save)
    _, error = _one_error(export_model.main, [
        "--data-dir", data_dir, "--model-name", "electra", "--output-dir",
        str(out), "--format", "hf"], capsys)
    assert re.fullmatch(rf"error: cannot write {out}\S*: No space left on "
                        r"device", error), error
    assert os.listdir(disk.path) in (["export"],
                                     sorted(["export", ".ballast"]))
    assert not os.listdir(out)


# ------------------------------------------------ SIGKILL during a save
KILLED_IN_SAVE = """
import os, signal, sys
from tensorflow.python.ops import io_ops
real_save_v2 = io_ops.save_v2
def save_v2(prefix, *args, **kwargs):
  # ckpt-20's data is half written when the process dies.
  done = real_save_v2(prefix, *args, **kwargs)
  part = prefix.numpy().decode()
  if "ckpt-20_temp" in part:
    data = part + ".data-00000-of-00001"
    with open(data, "r+b") as f:
      f.truncate(os.path.getsize(data) // 2)
    os.kill(os.getpid(), signal.SIGKILL)
  return done
io_ops.save_v2 = save_v2
import run_pretraining
run_pretraining.main(sys.argv[1:])
"""


def test_sigkill_in_the_middle_of_a_checkpoint_save(small_data, tmp_path):
  """Killed while ckpt-20's data is half written: the index names
  ckpt-10, which is intact; the same command resumes from step 10 and the
  half-written part files are removed."""
  model_dir = tmp_path / "run"
  argv = _pt(small_data, model_dir, num_train_steps=30)
  env = dict(os.environ, PYTHONPATH=ROOT)
  killed = subprocess.run([sys.executable, "-c", KILLED_IN_SAVE, *argv],
                          capture_output=True, text=True, timeout=600,
                          cwd=ROOT, env=env)
  assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
  assert "saved" in killed.stdout and "ckpt-20" not in killed.stdout
  assert checkpointing.latest_checkpoint(str(model_dir)).endswith("ckpt-10")
  assert (model_dir / "ckpt-20_temp").is_dir()  # what the kill left
  resumed = subprocess.run([sys.executable, "run_pretraining.py", *argv],
                           capture_output=True, text=True, timeout=600,
                           cwd=ROOT, env=env)
  assert resumed.returncode == 0, resumed.stderr[-2000:]
  assert f"resumed from {model_dir}/ckpt-10 at step 10" in resumed.stdout
  assert f"saved {model_dir}/ckpt-30" in resumed.stdout
  assert not [p for p in os.listdir(model_dir) if "_temp" in p]
  _variables_finite(model_dir)


# ------------------------------------------------ a shard corrupted mid-run
def test_a_shard_corrupted_while_a_run_reads_it(small_data, tmp_path, capsys,
                                                monkeypatch):
  """After ckpt-10 a shard is cut in half; the run notices before its
  next save (issue 65, 1: tf.data's readers may hold the old bytes for
  epochs): one line naming the shard and the damage, the checkpoints it
  made intact. Repaired, it resumes from the last of them."""
  data_dir = tmp_path / "data"
  shutil.copytree(small_data, data_dir)
  shard = data_dir / "pretrain_tfrecords" / "pretrain_data.tfrecord-0-of-2"
  whole = shard.read_bytes()
  model_dir = tmp_path / "run"
  argv = _pt(str(data_dir), model_dir, num_train_steps=200)
  half = tmp_path / "half"
  half.write_bytes(whole[:len(whole) // 2])
  # Replaced at once: a reader opens the whole shard or the cut one.
  _after_save(monkeypatch, 10, lambda: os.replace(half, shard))
  out, error = _one_error(run_pretraining.main, argv, capsys)
  assert re.fullmatch(rf"error: corrupt or truncated TFRecord: {shard} "
                      r"\(truncated record at byte \d+, after \d+ good "
                      r"records\), changed while the run read it; stopping "
                      r"without saving, the last good checkpoint is "
                      rf"{model_dir}/ckpt-10", error), error
  saved = [int(s) for s in re.findall(r"^saved .*ckpt-(\d+)$", out, re.M)]
  last = max(int(s) for s in re.findall(r"^step (\d+)/", out, re.M))
  assert saved and saved[-1] == last < 200
  assert checkpointing.latest_checkpoint(str(model_dir)).endswith(
      f"ckpt-{last}")
  monkeypatch.undo()
  shard.write_bytes(whole)
  run_pretraining.main(argv)
  out = capsys.readouterr().out
  assert f"resumed from {model_dir}/ckpt-{last} at step {last}" in out
  assert f"saved {model_dir}/ckpt-200" in out


def _damage_in_place(shard):
  """64 random bytes written into the middle of the shard (issue 65, 1)."""
  size = os.path.getsize(shard)
  with open(shard, "r+b") as f:
    f.seek(size // 2)
    f.write(np.random.default_rng(0).bytes(64))


@pytest.mark.parametrize("how,match", [
    ("damaged", r"corrupt or truncated TFRecord: {shard} \(corrupted record "
     r"at byte \d+, after \d+ good records\), changed while the run read "
     r"it"),
    ("deleted", r"TFRecord shard {shard} was deleted while the run read it"),
])
def test_a_shard_damaged_or_deleted_in_place_mid_run(small_data, tmp_path,
                                                     capsys, monkeypatch, how,
                                                     match):
  """Issue 65, 1: damage written into a shard the readers hold (or the
  shard deleted) after ckpt-10 stops the run before its next save, in one
  line naming it; every checkpoint file as it was."""
  data_dir = tmp_path / "data"
  shutil.copytree(small_data, data_dir)
  shard = data_dir / "pretrain_tfrecords" / "pretrain_data.tfrecord-1-of-2"
  model_dir = tmp_path / "run"
  at_fault = {}

  def fault():
    at_fault.update(snapshot(model_dir))
    _damage_in_place(shard) if how == "damaged" else os.remove(shard)
  _after_save(monkeypatch, 10, fault)
  _, error = _one_error(run_pretraining.main, _pt(
      str(data_dir), model_dir, num_train_steps=200), capsys)
  assert re.fullmatch("error: " + match.format(shard=re.escape(str(shard))) +
                      rf"; stopping without saving, the last good checkpoint"
                      rf" is {model_dir}/ckpt-10", error), error
  _kept(at_fault, snapshot(model_dir), EVENTS)
  assert checkpointing.latest_checkpoint(str(model_dir)).endswith("ckpt-10")


def test_eval_over_a_corrupt_shard_is_one_line(small_data, tmp_path, capsys):
  """Issue 65, 2: a dataset without held-out shards evaluates on its
  training shards; a damaged one is named, not a DataLossError."""
  data_dir = tmp_path / "data"
  shutil.copytree(small_data, data_dir)
  shard = data_dir / "pretrain_tfrecords" / "pretrain_data.tfrecord-0-of-2"
  _damage_in_place(shard)
  model_dir = tmp_path / "run"
  _, error = _one_error(run_pretraining.main, _pt(
      str(data_dir), model_dir, "--no-do-train", "--do-eval",
      num_eval_steps=40), capsys)
  assert re.fullmatch(rf"error: corrupt or truncated TFRecord: {shard} "
                      r"\(corrupted record at byte \d+, after \d+ good "
                      r"records\)", error), error
  assert not os.path.exists(model_dir / "eval_results.json")


def _arrays_config(data_dir, model_dir):
  from pretrain.config import PretrainingConfig  # pylint: disable=g-import-not-at-top
  config = PretrainingConfig(data_dir=str(data_dir), model_dir=str(model_dir),
                             max_seq_length=SEQ)
  config.resolve()
  return config


def test_jax_arrays_of_a_read_only_data_folder_go_to_the_model_dir(
    small_data, tmp_path, monkeypatch):
  """Issue 65, 4: the JAX path's arrays (pretrain/jax_run.py load_arrays)
  are exported to MODEL_DIR/pretrain_arrays when DATA_DIR cannot be
  written; the data folder is left byte-identical."""
  from pretrain import arrays  # pylint: disable=g-import-not-at-top
  with small_disk(tmp_path / "disk", "4m") as disk:
    data_dir = disk.path / "data"
    shutil.copytree(small_data, data_dir)
    before = snapshot(disk.path)
    _read_only(disk, monkeypatch)
    config = _arrays_config(data_dir, tmp_path / "run")
    folder, fallback = arrays.cache_folder(config)
    assert (folder, fallback) == (str(tmp_path / "run" / "pretrain_arrays"),
                                  True)
    arrays.export(config, folder, max_train_mb=0)
    assert arrays.cache_folder(config) == (folder, True)  # found again
    assert arrays.load(folder).num_examples() > 0
    assert snapshot(disk.path) == before
  # A writable data folder keeps them beside the TFRecords, for every run.
  assert arrays.cache_folder(_arrays_config(small_data, tmp_path / "r2")) == (
      os.path.join(small_data, "pretrain_arrays"), False)


def test_jax_export_of_a_damaged_shard_names_it(small_data, tmp_path):
  """Issue 65, 2 under JAX: its arrays come from the TFRecords at first
  use; a damaged shard is named with its byte, nothing is written."""
  from pretrain import arrays  # pylint: disable=g-import-not-at-top
  from util.errors import UserError  # pylint: disable=g-import-not-at-top
  data_dir = tmp_path / "data"
  shutil.copytree(small_data, data_dir)
  shard = data_dir / "pretrain_tfrecords" / "pretrain_data.tfrecord-1-of-2"
  _damage_in_place(shard)
  with pytest.raises(UserError, match=rf"^corrupt or truncated TFRecord: "
                     rf"{re.escape(str(shard))} \(corrupted record at byte "
                     r"\d+, after \d+ good records\)$"):
    arrays.export(_arrays_config(data_dir, tmp_path / "run"),
                  str(tmp_path / "arrays"), max_train_mb=0)
  assert not (tmp_path / "arrays").exists()


# ------------------------------------------------------ a diverging loss
@pytest.mark.parametrize("extra,match", [
    # The step after the first huge update is NaN; the loop stops.
    (("--learning-rate", "1e6"),
     r"non-finite loss or gradients at step 11-20; stopping without saving, "
     r"the last good checkpoint is .*/ckpt-10\. Try a lower learning_rate"),
    # Skipped steps: the run goes on while some steps are finite, then
    # stops once a whole loop is not.
    (("--learning-rate", "1e6", "--skip-nonfinite-steps"),
     r"all \d+ steps up to \d+ were non-finite; stopping without saving, "
     r"the last good checkpoint is .*/ckpt-\d+\. Try a lower learning_rate"),
    # A rate past float32 makes the weights inf in the update after a
    # finite loss: never saved.
    (("--learning-rate", "1e39", "--iterations-per-loop", "1",
      "--save-checkpoints-steps", "1"),
     r"the weights after step 11 are not finite \(\d+ variable\(s\), e\.g\. "
     r".*\); stopping without saving, the last good checkpoint is "
     r".*/ckpt-10\. Try a lower learning_rate"),
], ids=["lr_1e6", "lr_1e6_skipping", "lr_1e39"])
def test_a_diverging_loss_never_saves_non_finite_weights(
    small_data, tmp_path, capsys, extra, match):
  model_dir = tmp_path / "run"
  run_pretraining.main(_pt(small_data, model_dir, num_train_steps=10))
  capsys.readouterr()
  before = snapshot(model_dir)
  _, error = _one_error(run_pretraining.main, _pt(
      small_data, model_dir, *extra, "--accept-hparam-changes",
      num_train_steps=40), capsys)
  assert re.search(match, error), error
  # ckpt-10 and its index as they were. The changed hparams are recorded
  # only with a checkpoint trained with them (issue 65, 12): while none
  # was saved, pretrain_config.json is as it was too.
  after = snapshot(model_dir)
  latest = checkpointing.latest_checkpoint(str(model_dir))
  saved = not latest.endswith("ckpt-10")
  _kept(before, after, EVENTS + (r"/checkpoint$",) + (
      (r"pretrain_config\.json$",) if saved else ()))
  assert saved == any("pretrain_config.step-10" in p for p in after)
  _variables_finite(model_dir)
  assert re.search(r"last good checkpoint is (\S+)\.", error).group(1) == \
      latest


# ----------------------------------------------- read-only output folders
def _read_only(disk, monkeypatch):
  """disk's folder read-only: remounted so, or reported so by os.access
  (which is what the scripts ask)."""
  if disk.mounted:
    disk.read_only()
    return "read-only file system"
  real_access = os.access
  monkeypatch.setattr(os, "access", lambda path, mode: (
      False if os.path.abspath(path).startswith(str(disk.path)) and
      mode & os.W_OK else real_access(path, mode)))
  return "permission denied"


@pytest.mark.parametrize("script", [
    "build_pretraining_dataset", "run_pretraining", "run_finetuning",
    "run_scoring", "export_model", "run_comparison"])
def test_a_read_only_output_folder(runs, small_data, tmp_path, capsys,
                                   monkeypatch, script):
  data_dir, _ = runs
  model = ["--data-dir", data_dir, "--model-name", "electra"]
  with small_disk(tmp_path / "disk", "1m") as disk:
    out = disk.path / "out"
    why = _read_only(disk, monkeypatch)
    main, argv, name = {
        "build_pretraining_dataset": (build_pretraining_dataset.main, [
            "--corpus-dir", os.path.join(ROOT, "sample_data", "corpus"),
            "--vocab-file", os.path.join(ROOT, "sample_data", "vocab.txt"),
            "--output-dir", str(out)], "output_dir"),
        "run_pretraining": (run_pretraining.main,
                            _pt(small_data, out), "model_dir"),
        "run_finetuning": (run_finetuning.main, model + [
            "--task-names", "rte", "--output-dir", str(out)], "output_dir"),
        "run_scoring": (run_scoring.main, model + [
            "--input-file", os.path.join(ROOT, "sample_data", "vocab.txt"),
            "--output-file", str(disk.path / "scores.tsv")], "output_file"),
        "export_model": (export_model.main, model + [
            "--output-dir", str(out)], "output_dir"),
        "run_comparison": (run_comparison.main, [
            "--output-dir", str(out), "--tasks", "", "--objectives",
            "electra", "--dry-run"], "output_dir"),
    }[script]
    before = snapshot(disk.path)
    _, error = _one_error(main, argv, capsys)
    assert re.fullmatch(rf"error: cannot write to {name} {disk.path}\S*(: "
                        rf"{disk.path})?: {why}", error), error
    assert snapshot(disk.path) == before

