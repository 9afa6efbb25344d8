"""Raw text -> TFRecords -> ELECTRA training -> interruption -> resume."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import run_pretraining
from tests.pretraining_runs import MICRO
from tests.pretraining_runs import ROOT
from tests.pretraining_runs import eval_results_from
from tests.pretraining_runs import hparams
from tests.pretraining_runs import losses_from
from tests.pretraining_runs import run_cli
from tests.pretraining_runs import variables
from tests.script_checks import error_line


def run_and_kill(argv, model_dir):
  """Starts a run, SIGKILLs it after its first checkpoint; returns the step."""
  proc = subprocess.Popen(
      argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT,
      env=dict(os.environ, PYTHONPATH=ROOT, TF_DETERMINISTIC_OPS="1"))
  deadline = time.time() + 300
  while not tf.io.gfile.exists(os.path.join(model_dir, "checkpoint")):
    assert proc.poll() is None, "run ended before its first checkpoint"
    assert time.time() < deadline
    time.sleep(0.01)
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  return int(tf.train.latest_checkpoint(model_dir).rsplit("-", 1)[1])


STEPS = 400  # of the reference run that interrupted runs must reproduce


@pytest.fixture(scope="module")
def reference(data_dir):
  """An uninterrupted run; returns (model_dir, stdout)."""
  ref = run_cli(data_dir, "ref", "--hparams", hparams(num_train_steps=STEPS))
  assert ref.returncode == 0, ref.stderr[-2000:]
  return os.path.join(data_dir, "models", "ref"), ref.stdout


def test_train_interrupt_resume_matches_uninterrupted_run(data_dir,
                                                          reference):
  steps = STEPS
  ref_dir, ref_out = reference
  losses = losses_from(ref_out)
  assert len(losses) == steps // 10
  assert np.mean(losses[-3:]) < 0.8 * np.mean(losses[:2]), losses

  # Same run, killed (SIGKILL) right after its first checkpoint...
  model_dir = os.path.join(data_dir, "models", "killed")
  killed_at = run_and_kill(
      [sys.executable, os.path.join(ROOT, "run_pretraining.py"),
       "--data-dir", data_dir, "--model-name", "killed",
       "--hparams", hparams(num_train_steps=steps)], model_dir)
  assert killed_at < steps, "the run finished before it could be killed"

  # ...then resumed: it continues from the checkpoint, not from scratch.
  resumed = run_cli(data_dir, "killed", "--hparams",
                    hparams(num_train_steps=steps))
  assert resumed.returncode == 0, resumed.stderr[-2000:]
  assert "resumed from" in resumed.stdout
  assert f"from step {killed_at} to {steps}" in resumed.stdout

  # Same data order, masks, samples and optimizer state: same weights.
  expected, got = variables(ref_dir), variables(model_dir)
  assert expected.keys() == got.keys() and len(expected) > 20
  for name in expected:
    np.testing.assert_allclose(got[name], expected[name], rtol=1e-5,
                               atol=1e-6, err_msg=name)


def test_eval_reports_the_original_metrics(data_dir, capsys):
  run_pretraining.main(["--data-dir", data_dir, "--model-name", "evalme",
                        "--hparams", hparams(num_train_steps=20),
                        "--do-eval"])
  out = capsys.readouterr().out
  results = eval_results_from(out)
  # Once as a table; not on a terminal, one JSON line for scripts too.
  assert out.count("eval results") == 1
  line = json.loads(out.strip().splitlines()[-1])
  assert {k: round(v, 4) for k, v in line.items()} == results
  for key in ("masked_lm_accuracy", "masked_lm_loss",
              "sampled_masked_lm_accuracy", "disc_loss", "disc_auc",
              "disc_accuracy", "disc_precision", "disc_recall"):
    assert key in results and np.isfinite(results[key]), key
  assert results["global_step"] == 20
  saved = json.load(open(os.path.join(data_dir, "models", "evalme",
                                      "eval_results.json")))
  assert abs(saved["disc_loss"] - results["disc_loss"]) < 1e-4
  assert os.listdir(os.path.join(data_dir, "models", "evalme", "train"))


def expect_user_error(capsys, argv, match):
  line = error_line(run_pretraining.main, argv, capsys)
  assert re.search(match, line), line


def test_config_data_mismatches_are_clear_errors(data_dir, capsys):
  base = ["--data-dir", data_dir, "--model-name", "bad", "--hparams",
          hparams(num_train_steps=2)]
  expect_user_error(capsys, base + ["--max-seq-length", "128"],
                    r"max_seq_length 128 disagrees with the dataset \(64")
  expect_user_error(capsys, base + ["--vocab-size", "1000"],
                    r"vocab_size 1000 disagrees with the dataset \(30522")
  expect_user_error(capsys, base + ["--hparams", '{"mask_prb": 0.2}'],
                    r"unknown hparam 'mask_prb'")
  expect_user_error(capsys, ["--data-dir", "/nonexistent/dir", "--model-name",
                             "x"], r"^error: data_dir /nonexistent/dir does "
                                   r"not exist$")
  empty = os.path.join(data_dir, "empty")
  os.makedirs(empty, exist_ok=True)
  expect_user_error(capsys, ["--data-dir", empty, "--model-name", "x"],
                    r"no pretraining TFRecords match")


def test_changed_architecture_does_not_clobber_a_model(data_dir, capsys):
  name = ["--data-dir", data_dir, "--model-name", "keep"]
  run_pretraining.main(name + ["--hparams", hparams(num_train_steps=20)])
  before = sorted(os.listdir(os.path.join(data_dir, "models", "keep")))
  other = dict(MICRO["model_hparam_overrides"], hidden_size=64)
  expect_user_error(capsys, name + ["--hparams", hparams(
      num_train_steps=40, model_hparam_overrides=other)],
                    r"model_hparam_overrides")
  assert sorted(os.listdir(os.path.join(data_dir, "models", "keep"))) == before


def test_corrupt_shard_is_named(data_dir, tmp_path):
  broken = tmp_path / "broken"
  shutil.copytree(data_dir, broken, ignore=shutil.ignore_patterns("models"))
  shard = sorted((broken / "pretrain_tfrecords").glob("pretrain_data*"))[1]
  data = shard.read_bytes()
  shard.write_bytes(data[:len(data) // 10] + b"\x00garbage" * 10)
  result = run_cli(str(broken), "m", "--hparams", hparams(num_train_steps=40))
  assert result.returncode == 2
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith("error: corrupt or truncated TFRecord")
  assert shard.name in last


MIRRORED_SCRIPT = """
import sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import run_pretraining
run_pretraining.main(sys.argv[1:])
"""


def test_mirrored_strategy_on_two_devices_and_resume(data_dir):
  """The multi-replica path (all-reduce, clipping, per-replica data) runs,
  and resumes (by skipping batches) exactly like an uninterrupted run."""
  def argv(name):
    return [sys.executable, "-c", MIRRORED_SCRIPT, "--data-dir", data_dir,
            "--model-name", name, "--strategy", "mirrored",
            "--skip-nonfinite-steps",  # the cross-replica cond path
            "--hparams", hparams(num_train_steps=60)]
  env = dict(os.environ, PYTHONPATH=ROOT, TF_DETERMINISTIC_OPS="1")
  ref = subprocess.run(argv("mirrored") + ["--do-eval"], capture_output=True,
                       text=True, timeout=600, cwd=ROOT, env=env)
  assert ref.returncode == 0, ref.stderr[-3000:]
  assert "2 replica(s)" in ref.stdout
  losses = losses_from(ref.stdout)
  assert len(losses) == 6 and all(np.isfinite(losses))
  assert eval_results_from(ref.stdout)["global_step"] == 60

  model_dir = os.path.join(data_dir, "models", "mirrored_killed")
  killed_at = run_and_kill(argv("mirrored_killed"), model_dir)
  assert killed_at < 60
  resumed = subprocess.run(argv("mirrored_killed"), capture_output=True,
                           text=True, timeout=600, cwd=ROOT, env=env)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert f"from step {killed_at} to 60" in resumed.stdout
  expected = variables(os.path.join(data_dir, "models", "mirrored"))
  got = variables(model_dir)
  for name in expected:
    np.testing.assert_allclose(got[name], expected[name], rtol=1e-5,
                               atol=1e-6, err_msg=name)


def test_init_checkpoint_starts_from_other_weights(data_dir, capsys):
  source = os.path.join(data_dir, "models", "source")
  run_pretraining.main(["--data-dir", data_dir, "--model-name", "source",
                        "--hparams", hparams(num_train_steps=20)])
  run_pretraining.main(["--data-dir", data_dir, "--model-name", "warm",
                        "--init-checkpoint", source, "--hparams",
                        hparams(num_train_steps=20, learning_rate=1e-9,
                                num_warmup_steps=0)])
  assert "initialised weights from" in capsys.readouterr().out
  warm = variables(os.path.join(data_dir, "models", "warm"))
  cold = variables(source)
  name = next(n for n in cold if "word_embeddings" in n)
  np.testing.assert_allclose(warm[name], cold[name], atol=1e-3)


@pytest.mark.parametrize("extra", [
    {"mixed_precision": "float16"},
    {"mixed_precision": "float32", "xla": True},
    {"optimizer": "lamb", "mask_scheme": "bert"},
    {"electra_objective": False},  # the original's switch: BERT's MLM
])
def test_precision_xla_and_optimizer_options_train(data_dir, capsys, extra):
  name = "opt_" + "_".join(str(v) for v in extra.values())
  run_pretraining.main(["--data-dir", data_dir, "--model-name", name,
                        "--hparams", hparams(num_train_steps=20, **extra)])
  out = capsys.readouterr().out
  losses = losses_from(out)
  assert len(losses) == 2 and all(np.isfinite(losses)), out
  precision = extra.get("mixed_precision")
  if precision:
    assert f"({precision}," in out
  if extra.get("electra_objective") is False:
    assert "training mlm" in out and "disc_loss" not in out


def test_unwritable_model_dir_is_a_clear_error(data_dir, tmp_path, capsys):
  blocker = tmp_path / "file"
  blocker.write_text("not a directory")
  expect_user_error(capsys, ["--data-dir", data_dir, "--model-dir",
                             str(blocker / "model"), "--model-name", "x",
                             "--hparams", hparams(num_train_steps=2)],
                    r"model_dir .*/file/model: .*/file is a file, not a "
                    r"folder")


def test_non_finite_loss_stops_without_saving(data_dir, capsys, monkeypatch):
  from pretrain import trainer as trainer_lib
  name = ["--data-dir", data_dir, "--model-name", "nan"]
  run_pretraining.main(name + ["--hparams", hparams(num_train_steps=20)])
  model_dir = os.path.join(data_dir, "models", "nan")
  before = tf.train.latest_checkpoint(model_dir)
  real_build = trainer_lib.Trainer._build_train_loop

  def poisoned(self):
    loop = real_build(self)
    def run(iterator, steps):
      logs = loop(iterator, steps)
      return dict(logs, nonfinite_steps=tf.cast(steps, tf.float32))
    return run

  monkeypatch.setattr(trainer_lib.Trainer, "_build_train_loop", poisoned)
  expect_user_error(capsys, name + ["--hparams", hparams(num_train_steps=40)],
                    r"non-finite loss or gradients at step 21-30; .*ckpt-20")
  assert tf.train.latest_checkpoint(model_dir) == before


def test_nonfinite_steps_can_be_skipped_and_counted(data_dir, capsys,
                                                    monkeypatch):
  """Every 4th step's loss is NaN: skipped, counted, weights stay finite."""
  from pretrain import trainer as trainer_lib
  real_grads = trainer_lib.Trainer._grads

  def poisoned(self, batch):
    grads, logs = real_grads(self, batch)
    bad = tf.equal(self.optimizer.iterations % 4, 1)
    scale = tf.where(bad, float("nan"), 1.0)
    grads = [tf.convert_to_tensor(g) * scale for g in grads]
    return grads, dict(logs, loss=logs["loss"] * scale)

  monkeypatch.setattr(trainer_lib.Trainer, "_grads", poisoned)
  run_pretraining.main(["--data-dir", data_dir, "--model-name", "skipnan",
                        "--skip-nonfinite-steps", "--hparams",
                        hparams(num_train_steps=20)])
  out = capsys.readouterr().out
  assert "skipped 3 non-finite step(s) before step 10 (3 in this run)" in out
  assert "(5 in this run)" in out
  weights = variables(os.path.join(data_dir, "models", "skipnan"))
  assert all(np.all(np.isfinite(w)) for w in weights.values())
  assert all(np.isfinite(losses_from(out)))


SIGTERM_CHECK = """
import glob, os, signal, sys, threading, time
import run_pretraining

def notice():  # the preemption notice, once a save matching argv[1] is done
  while not glob.glob(sys.argv[1]):
    time.sleep(0.05)
  time.sleep(0.5)  # into the next loop
  os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=notice, daemon=True).start()
run_pretraining.main(sys.argv[2:])
"""


def test_sigterm_saves_a_checkpoint_then_exits(data_dir):
  model_dir = os.path.join(data_dir, "models", "preempted")
  # A timed save (every second) comes first; the notice follows it.
  result = subprocess.run(
      [sys.executable, "-c", SIGTERM_CHECK,
       os.path.join(model_dir, "ckpt-*.index"), "--data-dir", data_dir,
       "--model-name", "preempted", "--hparams",
       hparams(num_train_steps=100000, save_checkpoints_steps=100000,
               iterations_per_loop=10, save_checkpoints_secs=1)],
      capture_output=True, text=True, timeout=600, cwd=ROOT,
      env=dict(os.environ, PYTHONPATH=ROOT))
  assert result.returncode == 143, result.stderr[-2000:]
  saved = int(tf.train.latest_checkpoint(model_dir).rsplit("-", 1)[1])
  assert 10 < saved < 100000 and saved % 10 == 0
  assert f"SIGTERM: saved step {saved} and stopped" in result.stdout
  # The timed save before it was a resume point, superseded by the
  # SIGTERM's save: only the newest is left.
  assert len(re.findall(r"^saved ", result.stdout, re.M)) >= 2, result.stdout
  assert [f for f in os.listdir(model_dir) if f.endswith(".index")] == [
      f"ckpt-{saved}.index"]


FAULTY_SCRIPT = """
import os, sys, time
import tensorflow as tf
if os.environ.get("SLOW_CHECKPOINT_STATE"):
  # Widen the window between a checkpoint's data write and the update of
  # the `checkpoint` state file (training/checkpointing.py), so the test can
  # kill inside it.
  original = tf.__internal__.train.update_checkpoint_state
  def slow(*args, **kwargs):
    print("WRITING CHECKPOINT", flush=True)
    time.sleep(2)
    return original(*args, **kwargs)
  tf.__internal__.train.update_checkpoint_state = slow
import run_pretraining
run_pretraining.main(sys.argv[1:])
"""


def readable(path):
  reader = tf.train.load_checkpoint(path)
  for name, dtype in reader.get_variable_to_dtype_map().items():
    if dtype != tf.variant:  # the data iterator's state: read on restore
      reader.get_tensor(name)
  return True


def test_random_sigkills_never_lose_more_than_an_interval(data_dir,
                                                         reference):
  """Fault injection: SIGKILL at random steps and inside checkpoint writes,
  resume each time; the run finishes with the uninterrupted weights."""
  import random
  import threading
  rng = random.Random(7)
  interval, name = 20, "faulty"
  model_dir = os.path.join(data_dir, "models", name)
  argv = [sys.executable, "-c", FAULTY_SCRIPT, "--data-dir", data_dir,
          "--model-name", name, "--hparams", hparams(num_train_steps=STEPS)]
  saved = 0
  for mode in ("random", "during_write", "random"):
    env = dict(os.environ, PYTHONPATH=ROOT, TF_DETERMINISTIC_OPS="1")
    if mode == "during_write":
      env["SLOW_CHECKPOINT_STATE"] = "1"
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, cwd=ROOT,
                            env=env)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout))
    reader.start()
    target = rng.randrange(saved + 20, saved + 70, 10)
    deadline = time.time() + 300
    while proc.poll() is None and time.time() < deadline:
      text = "".join(lines)
      reached = [int(m) for m in re.findall(r"^step (\d+)/", text, re.M)]
      if mode == "random" and reached and reached[-1] >= target:
        time.sleep(rng.uniform(0, 0.05))
        break
      if mode == "during_write" and reached and reached[-1] >= target and \
          text.rstrip().endswith("WRITING CHECKPOINT"):
        break
      time.sleep(0.002)
    assert proc.poll() is None, "the run ended before it was killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    reader.join()
    text = "".join(lines)
    if saved:
      assert f"from step {saved} to {STEPS}" in text  # resumed, not restarted
    reached = max(int(m) for m in re.findall(r"^step (\d+)/", text, re.M))
    saved = int(tf.train.latest_checkpoint(model_dir).rsplit("-", 1)[1])
    assert 0 <= reached - saved <= interval, (mode, reached, saved)
    state = tf.train.get_checkpoint_state(model_dir)
    assert all(readable(p) for p in state.all_model_checkpoint_paths)

  final = run_cli(data_dir, name, "--hparams", hparams(num_train_steps=STEPS))
  assert final.returncode == 0, final.stderr[-2000:]
  assert f"from step {saved} to {STEPS}" in final.stdout
  expected, got = variables(reference[0]), variables(model_dir)
  for key in expected:
    np.testing.assert_allclose(got[key], expected[key], rtol=1e-5,
                               atol=1e-6, err_msg=key)


def test_corrupt_shard_can_be_skipped_and_counted(data_dir, tmp_path,
                                                  capsys):
  broken = tmp_path / "broken"
  shutil.copytree(data_dir, broken, ignore=shutil.ignore_patterns("models"))
  shard = sorted((broken / "pretrain_tfrecords").glob("pretrain_data*"))[1]
  data = shard.read_bytes()
  shard.write_bytes(data[:len(data) // 10] + b"\x00garbage" * 10)
  run_pretraining.main(["--data-dir", str(broken), "--model-name", "m",
                        "--skip-corrupt-records", "--hparams",
                        hparams(num_train_steps=40)])
  out = capsys.readouterr().out
  assert re.search(rf"warning: skipping the rest of .*{shard.name} after "
                   r"record \d+", out)
  assert "1 of 4 shards are damaged" in out
  assert len(losses_from(out)) == 4
