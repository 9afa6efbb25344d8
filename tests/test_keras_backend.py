"""The TensorFlow scripts run Keras on TensorFlow whatever ~/.keras/keras.json
says: a JAX run (the GPU slot's driver) writes "jax" there when it is the
first Keras import on a machine, which broke the multi-worker run in CI."""

import json
import os
import subprocess
import sys

import pytest
from tests.pretraining_runs import ROOT

SCRIPTS = ["run_pretraining", "run_finetuning", "run_scoring", "export_model",
           "build_pretraining_dataset", "run_comparison", "prepare_gpu_slot"]


def _env(tmp_path, **extra):
  (tmp_path / "keras.json").write_text(json.dumps({"backend": "jax"}))
  env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
  return dict(env, KERAS_HOME=str(tmp_path), PYTHONPATH=ROOT, **extra)


def test_scripts_pin_tensorflow_over_keras_json(tmp_path):
  code = (f"import {', '.join(SCRIPTS)}, keras\n"
          "print(keras.backend.backend())")
  out = subprocess.run([sys.executable, "-c", code], cwd=ROOT,
                       env=_env(tmp_path), capture_output=True, text=True)
  assert out.returncode == 0, out.stderr[-2000:]
  assert out.stdout.split() == ["tensorflow"]


@pytest.mark.parametrize("script,backend,also", [
    ("run_pretraining", "torch", " or jax"),
    ("run_finetuning", "torch", " or jax"),
    ("run_scoring", "jax", "")])
def test_explicit_other_backend_is_one_line(tmp_path, script, backend, also):
  out = subprocess.run([sys.executable, f"{script}.py", "--help"], cwd=ROOT,
                       env=_env(tmp_path, KERAS_BACKEND=backend),
                       capture_output=True, text=True)
  assert out.returncode == 2
  assert out.stderr == (f"error: {script}.py runs Keras on TensorFlow{also}, "
                        f"but KERAS_BACKEND={backend} is set: unset it\n")
