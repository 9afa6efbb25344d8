"""run_finetuning.py --task-arrays: GLUE tasks exported as arrays
(prepare_gpu_slot.py --glue-dir) fine-tuned under JAX where TensorFlow
cannot import (a GPU slot), giving the run that read the raw files."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from loading import finetuned as finetuned_files
from tests import tiny_runs
from tests.shared_data import SHARED
from tests.slot_data import slot_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Featurization (the export's) and training: a quick two-task run.
FEATURES = {"train_examples_limit": 48, "eval_examples_limit": 32,
            "max_seq_length": 48}
HPARAMS = dict(FEATURES, num_train_epochs=1.0, train_batch_size=16,
               eval_batch_size=16, warmup_proportion=0.0, num_trials=2)


def script(env, *argv, name="run_finetuning.py"):
  return subprocess.run([sys.executable, os.path.join(ROOT, name), *argv],
                        capture_output=True, text=True, timeout=600,
                        cwd=ROOT, env=env)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
  """(data dir, the export, an .npz copy of models/pre, tmp): RTE and
  STS-B slices exported with the run's vocabulary."""
  # pylint: disable=g-import-not-at-top
  from interop import npz_weights
  from loading.sources import open_source
  root = tmp_path_factory.mktemp("task_arrays")
  data = tiny_runs.tiny_run_with_rte(root / "data")
  os.symlink(os.path.join(SHARED, "glue", "STS-B"),
             os.path.join(data, "finetuning_data", "STS-B"))
  source = open_source(os.path.join(data, "models", "pre"))
  npz = str(root / "pre_npz")
  npz_weights.write(npz, source.weights(), dataclasses.asdict(source.config))
  done = script(dict(os.environ), "--glue-dir",
                os.path.join(data, "finetuning_data"), "--tasks", "rte,sts",
                "--vocab-file", source.config.vocab_file, "--model-size",
                "tiny", "--finetune-hparams", json.dumps(FEATURES),
                "--out", str(root / "slot_data"), name="prepare_gpu_slot.py")
  assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
  return data, str(root / "slot_data" / "finetune"), npz, root


def jax_env(tmp, blocked):
  env = slot_env(tmp) if blocked else dict(os.environ, PYTHONPATH=ROOT,
                                             JAX_PLATFORMS="cpu")
  env = dict(env, KERAS_BACKEND="jax")
  env.pop("XLA_FLAGS", None)
  return env


def results(out):
  with open(os.path.join(out, "rte_sts_trials.json")) as f:
    return [{t: trial[t] for t in ("rte", "sts")}
            for trial in json.load(f)["trials"]]


def test_exported_tasks_fine_tune_without_tensorflow_as_from_raw_files(made):
  data, exported, npz, root = made
  common = ["--task-names", "rte,sts", "--init-checkpoint", npz,
            "--hparams", json.dumps(HPARAMS)]
  raw_out, arrays_out = str(root / "raw"), str(root / "arrays")
  raw = script(jax_env(str(root), blocked=False), *common, "--raw-data-dir",
               os.path.join(data, "finetuning_data"), "--output-dir",
               raw_out)
  assert raw.returncode == 0, (raw.stdout + raw.stderr)[-3000:]
  done = script(jax_env(str(root), blocked=True), *common, "--task-arrays",
                exported, "--output-dir", arrays_out)
  assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
  # The same rows in the same order, through the same scorers: every
  # metric and dev loss of both trials, and the kept model's trial.
  assert results(arrays_out) == results(raw_out)
  for out in (raw_out, arrays_out):
    assert finetuned_files.is_finetuned(os.path.join(out, "rte_sts_model"))
  assert "rte: 48 train examples" in done.stdout


@pytest.mark.parametrize("extra, message", [
    (["--task-names", "rte,squadv1"],
     "error: task_arrays {arrays} has no squadv1 (it holds rte, sts)"),
    (["--task-names", "rte", "--max-seq-length", "64"],
     "error: max_seq_length 64: task_arrays {arrays} was featurized with 48"),
    (["--task-names", "rte", "--hparams", '{"train_examples_limit": 8}'],
     "error: train_examples_limit 8: task_arrays {arrays} was featurized "
     "with 48"),
    (["--task-names", "rte", "--do-predict", "--predict-file", "{arrays}/"
      "finetune.json"],
     "error: task_arrays hold the train and dev rows only: --do-predict and "
     "write_test_outputs read the raw files"),
])
def test_what_the_export_cannot_give_is_one_line(made, extra, message):
  _, exported, npz, root = made
  done = script(jax_env(str(root), blocked=True), "--task-arrays", exported,
                "--init-checkpoint", npz, "--output-dir", str(root / "no"),
                *[e.replace("{arrays}", exported) for e in extra])
  assert done.returncode != 0
  assert done.stderr.strip().splitlines()[-1] == message.format(
      arrays=exported), done.stderr[-2000:]
  assert not os.path.exists(root / "no")
