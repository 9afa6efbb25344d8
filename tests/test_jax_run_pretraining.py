"""run_pretraining.py under KERAS_BACKEND=jax (pretrain/jax_run.py): a run
killed anywhere, checkpoint writes included, resumes and ends with the
weights of an uninterrupted run, bit for bit; two devices train as one;
its weights fine-tune; the run directory's checks hold as on TensorFlow."""

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tests import hosts
from tests.pretraining_runs import ROOT
from tests.pretraining_runs import build_data_dir
from tests.pretraining_runs import hparams
from tests.shared_data import SHARED

STEPS = 40
HPARAMS = hparams(num_train_steps=STEPS, iterations_per_loop=10,
                  save_checkpoints_steps=10)

# run_pretraining.py, killed (SIGKILL: nothing runs after it) when the save
# of step KILL_STEP reaches KILL_AT: "file" before the checkpoint file is
# renamed into place, "index" after it but before checkpoint.json names it.
KILLING = """
import os, signal, sys
sys.path.insert(0, os.getcwd())
from training import npz_checkpoints
step, at = os.environ["KILL_STEP"], os.environ["KILL_AT"]
storage = npz_checkpoints.storage
rename, write = storage.rename, storage.write_text_atomic
def killing_rename(src, dst, overwrite=False):
  if at == "file" and dst.endswith(f"ckpt-{step}.npz"):
    os.kill(os.getpid(), signal.SIGKILL)
  return rename(src, dst, overwrite)
def killing_write(path, text):
  if at == "index" and f"ckpt-{step}.npz" in text:
    os.kill(os.getpid(), signal.SIGKILL)
  return write(path, text)
storage.rename, storage.write_text_atomic = killing_rename, killing_write
import run_pretraining
run_pretraining.main(sys.argv[1:])
"""

# run_pretraining.py, Ctrl-C'd (SIGINT) as its last loop ends.
INTERRUPTING = """
import os, signal, sys
sys.path.insert(0, os.getcwd())
from pretrain import jax_trainer
advance = jax_trainer.JaxTrainer.advance
def interrupted(self, steps, total_steps):
  out = advance(self, steps, total_steps)
  if self.step >= total_steps:
    os.kill(os.getpid(), signal.SIGINT)
  return out
jax_trainer.JaxTrainer.advance = interrupted
import run_pretraining
run_pretraining.main(sys.argv[1:])
"""


def env(**extra):
  out = dict(os.environ, PYTHONPATH=ROOT, KERAS_BACKEND="jax",
             JAX_PLATFORMS="cpu")
  out.pop("XLA_FLAGS", None)
  return dict(out, **extra)


def run(data_dir, name, *extra, script=None, **env_extra):
  head = ["-c", script] if script else [os.path.join(ROOT,
                                                     "run_pretraining.py")]
  return subprocess.run(
      [sys.executable, *head, "--data-dir", data_dir, "--model-name", name,
       "--hparams", HPARAMS, *extra], capture_output=True, text=True,
      timeout=600, cwd=ROOT, env=env(**env_extra))


def state(model_dir, step=STEPS):
  with np.load(os.path.join(model_dir, f"ckpt-{step}.npz")) as f:
    return {k: f[k] for k in f.files}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  return build_data_dir(tmp_path_factory.mktemp("jax_run"))


@pytest.fixture(scope="module")
def reference(data_dir):
  """An uninterrupted run, evaluated."""
  done = run(data_dir, "whole", "--do-eval")
  assert done.returncode == 0, done.stderr[-3000:]
  return os.path.join(data_dir, "models", "whole"), done.stdout


def test_a_run_trains_saves_and_evaluates(reference):
  model_dir, log = reference
  assert "1 device(s)" in log and f"from step 0 to {STEPS}" in log
  assert ("compiling the training step (first call); a line every 15 s "
          "until it runs\n") in log
  losses = [float(m) for m in re.findall(r"\| loss ([0-9.]+)", log)]
  assert len(losses) == STEPS // 10 and losses[-1] < losses[0]
  index = json.load(open(os.path.join(model_dir, "checkpoint.json")))
  assert index["latest"] == f"ckpt-{STEPS}.npz"
  with open(os.path.join(model_dir, "eval_results.json")) as f:
    results = json.load(f)
  assert results["global_step"] == STEPS and 0 <= results["disc_auc"] <= 1
  scalars = [json.loads(line) for line in open(
      os.path.join(model_dir, "train", "scalars.jsonl"))]
  assert [s["step"] for s in scalars] == [10, 20, 30, 40]
  assert scalars[-1]["loss"] == pytest.approx(losses[-1], abs=1e-4)
  # The same scalars as TensorBoard events, written without TensorFlow.
  from tensorboard.backend.event_processing import event_accumulator  # pylint: disable=g-import-not-at-top
  events = event_accumulator.EventAccumulator(
      os.path.join(model_dir, "train"))
  events.Reload()
  assert [e.step for e in events.Scalars("loss")] == [10, 20, 30, 40]
  assert events.Scalars("loss")[-1].value == pytest.approx(losses[-1],
                                                           abs=1e-4)
  with open(os.path.join(model_dir, "pretrain_config.json")) as f:
    assert json.load(f)["num_train_steps"] == STEPS


def test_a_killed_run_resumes_as_if_uninterrupted(data_dir, reference):
  """Killed inside each write of a save (before the file is in place, then
  before the index names it), resumed each time from the save before."""
  model_dir = os.path.join(data_dir, "models", "killed")
  resumed_from = 0
  for at, step in (("file", 20), ("index", 30)):
    killed = run(data_dir, "killed", script=KILLING, KILL_STEP=str(step),
                 KILL_AT=at)
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert f"from step {resumed_from} to {STEPS}" in killed.stdout
    assert f"step {step}/{STEPS}" in killed.stdout  # died saving that step
    resumed_from = step - 10
  resumed = run(data_dir, "killed")
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert f"from step {resumed_from} to {STEPS}" in resumed.stdout
  expected, got = state(reference[0]), state(model_dir)
  assert sorted(got) == sorted(expected)
  for key, value in expected.items():
    np.testing.assert_array_equal(got[key], value, err_msg=key)
  assert not [f for f in os.listdir(model_dir) if f.endswith(".tmp")]


def test_a_finished_run_is_not_trained_again(data_dir, reference):
  again = run(data_dir, "whole")
  assert again.returncode == 0, again.stderr[-2000:]
  assert f"already trained: step {STEPS}" in again.stdout


def test_a_run_stopped_in_its_last_loop_leaves_its_weights(data_dir):
  """Ctrl-C in the last loop saves the final step and writes the weights
  fine-tuning reads; a rerun that finds it already trained writes them
  where they are missing (as a stop before this fix left it)."""
  from interop import npz_weights  # pylint: disable=g-import-not-at-top
  model_dir = os.path.join(data_dir, "models", "stopped")
  done = run(data_dir, "stopped", "--num-train-steps", "10",
             script=INTERRUPTING)
  assert done.returncode == 130, done.stderr[-3000:]
  assert "weights for fine-tuning (step 10)" in done.stdout
  assert npz_weights.read_manifest(model_dir)["step"] == 10
  os.remove(os.path.join(model_dir, npz_weights.MANIFEST))
  again = run(data_dir, "stopped", "--num-train-steps", "10")
  assert again.returncode == 0, again.stderr[-3000:]
  assert "already trained: step 10" in again.stdout
  assert "weights for fine-tuning (step 10)" in again.stdout
  assert npz_weights.read_manifest(model_dir)["step"] == 10


def test_changed_hparams_are_refused_as_on_tensorflow(data_dir, reference):
  changed = subprocess.run(
      [sys.executable, "run_pretraining.py", "--data-dir", data_dir,
       "--model-name", "whole", "--hparams", HPARAMS,
       "--hparams", '{"mask_prob": 0.25}'], capture_output=True, text=True,
      timeout=600, cwd=ROOT, env=env())
  assert changed.returncode != 0
  lines = changed.stderr.strip().splitlines()
  assert lines[-1].startswith("error: ") and "mask_prob" in lines[-1]


def test_a_broken_index_is_one_line_and_nothing_is_written(data_dir,
                                                           reference):
  model_dir = reference[0]
  index = os.path.join(model_dir, "checkpoint.json")
  saved = open(index).read()
  before = sorted(os.listdir(model_dir))
  try:
    with open(index, "w") as f:
      f.write('{"latest": "ckpt-999.npz"}')
    broken = run(data_dir, "whole")
    assert broken.returncode != 0
    assert broken.stderr.strip().splitlines()[-1] == (
        f"error: {index} names ckpt-999.npz, which is not there: nothing "
        "was read or written")
    assert sorted(os.listdir(model_dir)) == before
  finally:
    with open(index, "w") as f:
      f.write(saved)


def test_two_devices_train_as_one(data_dir, reference):
  """input_sharding batches: every device draws from all the rows, so the
  run is one device's (files, the default, gives each device a share)."""
  two = run(data_dir, "two_devices", "--input-sharding", "batches",
            XLA_FLAGS="--xla_force_host_platform_device_count=2")
  assert two.returncode == 0, two.stderr[-3000:]
  assert "2 device(s)" in two.stdout
  expected = state(reference[0])
  got = state(os.path.join(data_dir, "models", "two_devices"))
  # The same batches and masks; only the order of the gradient sums differs.
  for key, value in expected.items():
    np.testing.assert_allclose(got[key], value, rtol=1e-3, atol=2e-4,
                               err_msg=key)


def test_the_weights_fine_tune_under_jax(data_dir, reference):
  from loading import sources  # pylint: disable=g-import-not-at-top
  source = sources.open_source(reference[0])
  assert source.kind == "npz" and source.config.objective == "electra"
  from interop import npz_weights  # pylint: disable=g-import-not-at-top
  assert npz_weights.read_manifest(reference[0])["step"] == STEPS
  assert os.path.isfile(source.config.vocab_file)
  assert set(source.weights()) == {"discriminator", "generator"}
  tasks = os.path.join(data_dir, "finetuning_data")
  os.makedirs(tasks, exist_ok=True)
  if not os.path.exists(os.path.join(tasks, "RTE")):
    os.symlink(os.path.join(SHARED, "glue", "RTE"), os.path.join(tasks, "RTE"))
  out = os.path.join(data_dir, "ft")
  done = subprocess.run(
      [sys.executable, "run_finetuning.py", "--data-dir", data_dir,
       "--model-name", "whole", "--task-names", "rte", "--output-dir", out,
       "--hparams", json.dumps({
           "num_trials": 1, "train_examples_limit": 32,
           "eval_examples_limit": 32, "num_train_epochs": 1.0,
           "train_batch_size": 16, "eval_batch_size": 16,
           "max_seq_length": 48})],
      capture_output=True, text=True, timeout=600, cwd=ROOT, env=env())
  assert done.returncode == 0, done.stderr[-3000:]
  with open(os.path.join(out, "rte_trials.json")) as f:
    trials = json.load(f)["trials"]
  assert len(trials) == 1 and 0 <= trials[0]["rte"]["accuracy"] <= 100


def test_init_checkpoint_starts_from_those_weights(data_dir, reference):
  """init_checkpoint under JAX (loading/sources.py's formats; here a JAX
  run's .npz weights): a run evaluated from it, untrained, scores the
  generator as the run it came from on the same held-out masks (the
  discriminator sees other samples: the sampler's seed state is no
  weight)."""
  model_dir, _ = reference
  out = run(data_dir, "from_whole", "--no-do-train", "--do-eval",
            "--hparams", json.dumps({"init_checkpoint": model_dir}))
  assert out.returncode == 0, out.stderr[-3000:]
  assert f"initialised weights from {model_dir} (npz: " in out.stdout
  results = [json.load(open(os.path.join(d, "eval_results.json")))
             for d in (model_dir, os.path.join(data_dir, "models",
                                               "from_whole"))]
  for key in ("masked_lm_loss", "masked_lm_accuracy"):
    assert results[1][key] == pytest.approx(results[0][key], abs=1e-6), key
  # Fresh weights read ~10.3 nats (log 30522); these are the trained run's.
  assert results[1]["masked_lm_loss"] < 9.5


def test_a_unigram_generator_trains_from_the_exported_counts(data_dir,
                                                              reference):
  """The arrays carry the dataset's token counts (token_counts.txt, as
  build_pretraining_dataset.py wrote them), which a unigram run reads."""
  out = run(data_dir, "unigram", "--hparams",
            json.dumps({"unigram_generator": True, "num_train_steps": 10}))
  assert out.returncode == 0, out.stderr[-3000:]
  assert "| loss " in out.stdout
  tfrecords = os.path.join(data_dir, "pretrain_tfrecords")
  with open(os.path.join(tfrecords, "token_counts.txt")) as f:
    counted = [int(line) for line in f.read().split()]
  with open(os.path.join(data_dir, "pretrain_arrays",
                         "token_counts.json")) as f:
    assert json.load(f) == counted


def test_float16_trains_with_dynamic_loss_scaling(data_dir):
  """float16 under JAX: Keras' LossScaleOptimizer, as on TensorFlow (the
  scale lives in the checkpoint), the logged norms and losses unscaled."""
  out = run(data_dir, "fp16", "--hparams",
            json.dumps({"mixed_precision": "float16"}))
  assert out.returncode == 0, out.stderr[-3000:]
  assert "(float16, 1 device(s)" in out.stdout
  losses = [float(m) for m in re.findall(r"\| loss ([0-9.]+)", out.stdout)]
  assert len(losses) == STEPS // 10 and losses[-1] < losses[0]
  assert 5 < losses[0] < 100  # the loss, not the loss times 2^15
  # The optimizer's scalars: the loss scaler's (step count, scale) and the
  # inner optimizer's (applied steps, lr). Each overflowing step halves
  # 2^15 and is not applied: halvings + applied steps = all 40.
  saved = state(os.path.join(data_dir, "models", "fp16"))
  scalars = [float(saved[f"optimizer/{i}"]) for i in range(6)]
  scale, applied = scalars[3], scalars[4]
  halvings = np.log2(2.0 ** 15 / scale)
  assert halvings == int(halvings) and halvings + applied == STEPS


def test_tensorflow_only_options_are_one_line(data_dir):
  out = run(data_dir, "tpu", "--hparams", '{"strategy": "tpu"}')
  assert out.returncode != 0
  lines = out.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(
      "error: strategy tpu is TensorFlow's")


def test_a_run_of_the_other_backend_is_refused(data_dir, reference):
  """Neither backend starts over beside the other's checkpoints."""
  tf_dir = os.path.join(data_dir, "models", "tf_run")
  os.makedirs(tf_dir)
  open(os.path.join(tf_dir, "ckpt-20.index"), "w").close()
  out = run(data_dir, "tf_run")
  assert out.returncode != 0 and sorted(os.listdir(tf_dir)) == [
      "ckpt-20.index"]
  assert out.stderr.strip().splitlines()[-1] == (
      f"error: {tf_dir} holds checkpoints of a run trained with "
      "KERAS_BACKEND=tensorflow (ckpt-20.index): go on with "
      "KERAS_BACKEND=tensorflow, or use another --model-name")
  on_tf = subprocess.run(
      [sys.executable, "run_pretraining.py", "--data-dir", data_dir,
       "--model-name", "whole", "--hparams", HPARAMS], capture_output=True,
      text=True, timeout=600, cwd=ROOT,
      env={k: v for k, v in env().items() if k != "KERAS_BACKEND"})
  assert on_tf.returncode != 0
  assert "trained with KERAS_BACKEND=jax (ckpt-40.npz)" in (
      on_tf.stderr.strip().splitlines()[-1])


def test_two_stage_training_switches_and_resumes_past_the_switch(data_dir):
  """Two-stage training under JAX (pretrain/loop.py's schedule boundaries
  on the JAX trainer): the discriminator is copied from the generator at
  step 20, the generator is frozen from then on, and a run killed saving
  step 30 resumes from ckpt-20 (already in stage two) to the weights of
  an uninterrupted run, bit for bit."""
  two_stage = ("--hparams", json.dumps({
      "training_algorithm": "two_stage", "two_stage_generator_steps": 20,
      "generator_hidden_size": 1.0}))
  whole = run(data_dir, "two_stage", *two_stage)
  assert whole.returncode == 0, whole.stderr[-3000:]
  assert ("two-stage training: step 20, discriminator initialised from the "
          "generator, which is now frozen") in whole.stdout
  model_dir = os.path.join(data_dir, "models", "two_stage")
  switched, end = state(model_dir, 20), state(model_dir)
  moved = [k for k in end if not np.array_equal(end[k], switched[k])]
  assert moved and len(moved) < len(end)  # the generator's stayed
  killed = run(data_dir, "two_stage_killed", *two_stage, script=KILLING,
               KILL_STEP="30", KILL_AT="file")
  assert killed.returncode == -9, killed.stderr[-3000:]
  resumed = run(data_dir, "two_stage_killed", *two_stage)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert f"from step 20 to {STEPS}" in resumed.stdout
  assert "two-stage training: step" not in resumed.stdout
  got = state(os.path.join(data_dir, "models", "two_stage_killed"))
  for key, value in end.items():
    np.testing.assert_array_equal(got[key], value, err_msg=key)


def test_non_finite_weights_are_never_saved(data_dir):
  """The shared loop's checks under JAX: a rate past float32 makes the
  weights inf in an update after a finite loss; the run stops in one line
  before saving them, and ckpt-10 stays the newest checkpoint."""
  first = run(data_dir, "diverging", "--num-train-steps", "10")
  assert first.returncode == 0, first.stderr[-3000:]
  model_dir = os.path.join(data_dir, "models", "diverging")
  out = run(data_dir, "diverging", "--learning-rate", "1e39",
            "--iterations-per-loop", "1", "--save-checkpoints-steps", "1",
            "--accept-hparam-changes")
  assert out.returncode != 0, out.stderr[-3000:]
  assert re.fullmatch(
      r"error: the weights after step 11 are not finite \(\d+ variable\(s\), "
      r"e\.g\. .*\); stopping without saving, the last good checkpoint is "
      rf"{re.escape(model_dir)}/ckpt-10\.npz\. Try a lower learning_rate",
      out.stderr.strip().splitlines()[-1]), out.stderr[-2000:]
  assert json.load(open(os.path.join(model_dir, "checkpoint.json")))[
      "latest"] == "ckpt-10.npz"
  assert not [f for f in os.listdir(model_dir) if f.startswith("ckpt-11")]


# A process other than 0 fails the moment it writes, makes or moves a file.
CHIEF_WRITES = hosts.only_process_0_writes("run_pretraining")


# Process KILL_PROCESS SIGKILLs itself once every process is past the save
# of step KILL_STEP (the checkpoint whole and named by checkpoint.json).
KILLED_AFTER_SAVE = """
import os, signal, sys
sys.path.insert(0, os.getcwd())
from pretrain import jax_run
barrier = jax_run.barrier
def killing(name):
  barrier(name)
  if (name == "saved step " + os.environ["KILL_STEP"] and
      os.environ["KERAS_DISTRIBUTION_PROCESS_ID"] ==
      os.environ["KILL_PROCESS"]):
    os.kill(os.getpid(), signal.SIGKILL)
jax_run.barrier = killing
import run_pretraining
run_pretraining.main(sys.argv[1:])
"""


def launch(data_dir, name, script, **env_extra):
  """The two processes of a run on the loopback (one CPU device each)."""
  return hosts.launch(
      script, ["--data-dir", data_dir, "--model-name", name, "--hparams",
               HPARAMS, "--do-eval"], lambda **v: env(**v, **env_extra))


@pytest.fixture(scope="module")
def two_processes(data_dir):
  """One process with two devices, and two processes with one each, both
  input_sharding files (the default): their model dirs, the second's
  outputs."""
  one = run(data_dir, "hosts_one", "--do-eval",
            XLA_FLAGS="--xla_force_host_platform_device_count=2")
  assert one.returncode == 0, one.stderr[-3000:]
  # Exported again, by process 0 alone while process 1 waits.
  shutil.rmtree(os.path.join(data_dir, "pretrain_arrays"))
  outs = hosts.finished(launch(data_dir, "hosts_two", CHIEF_WRITES))
  return ([os.path.join(data_dir, "models", n)
           for n in ("hosts_one", "hosts_two")], one.stdout, outs)


def assert_same_run(dirs):
  """Weights and held-out eval within 1e-4."""
  expected, got = state(dirs[0]), state(dirs[1])
  assert sorted(got) == sorted(expected)
  for key, value in expected.items():
    np.testing.assert_allclose(got[key], value, rtol=1e-4, atol=1e-4,
                               err_msg=key)
  results = [json.load(open(os.path.join(d, "eval_results.json")))
             for d in dirs]
  for key, value in results[0].items():
    assert results[1][key] == pytest.approx(value, abs=1e-4), key


def test_two_processes_train_as_one_process_with_two_devices(two_processes):
  """Several hosts (jax.distributed, joined through Keras' launch
  variables; here two processes on the loopback, one CPU device each):
  the run of one process with two devices, weights and held-out eval;
  each process holds only its device's share of the training rows
  (input_sharding files), and only process 0 writes."""
  dirs, one_log, outs = two_processes
  total = re.search(r"holds [\d,]+ of ([\d,]+) training rows", one_log)[1]
  assert f"holds {total} of {total} training rows (the shares of 2 of 2 " \
      "devices)" in one_log
  held = []
  for k, (out, _) in enumerate(outs):
    found = re.search(rf"process {k} holds ([\d,]+) of {total} training rows "
                      r"\(the shares of 1 of 2 devices\)", out)
    assert found, out[-3000:]
    held.append(int(found[1].replace(",", "")))
  total = int(total.replace(",", ""))
  assert sum(held) == total and max(held) - min(held) <= 1
  assert "2 device(s)" in outs[0][0] and "saved " in outs[0][0]
  assert "exporting the TFRecords" in outs[0][0]
  assert "exporting" not in outs[1][0]  # it read process 0's
  assert "eval results" in outs[1][0]  # evaluated too, wrote nothing
  assert_same_run(dirs)


def test_a_process_killed_mid_run_resumes_as_if_uninterrupted(
    data_dir, two_processes):
  """Process 1 SIGKILLed after the save of step 20: process 0 can go no
  further than its next collective (it is ended here, as jax.distributed's
  heartbeat timeout would end it) and writes nothing more; both commands
  run again resume from step 20 to the uninterrupted run's weights and
  eval."""
  model_dir = os.path.join(data_dir, "models", "hosts_killed")
  procs = launch(data_dir, "hosts_killed", KILLED_AFTER_SAVE,
                 KILL_STEP="20", KILL_PROCESS="1")
  try:
    assert procs[1].wait(timeout=600) == -9, procs[1].communicate()
  finally:
    for p in procs:
      p.kill()
  assert json.load(open(os.path.join(model_dir, "checkpoint.json")))[
      "latest"] == "ckpt-20.npz"
  outs = hosts.finished(launch(data_dir, "hosts_killed", CHIEF_WRITES))
  for out, _ in outs:
    assert f"from step 20 to {STEPS}" in out, out[-3000:]
  assert_same_run([two_processes[0][1], model_dir])
