"""run_pretraining.py --seeds 1,2 under JAX (pretrain/multi_seed.py): each
seed of one vmapped run ends where its separate run ends (weights,
optimizer and RNG state, eval results) and writes what that run writes;
under TensorFlow the flag is one line."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.pretraining_runs import ROOT
from tests.pretraining_runs import build_data_dir
from tests.pretraining_runs import hparams

STEPS = 20
HPARAMS = hparams(num_train_steps=STEPS, iterations_per_loop=10,
                  save_checkpoints_steps=10)


def run(data_dir, name, *extra, backend="jax"):
  env = dict(os.environ, PYTHONPATH=ROOT, KERAS_BACKEND=backend,
             JAX_PLATFORMS="cpu")
  env.pop("XLA_FLAGS", None)
  return subprocess.run(
      [sys.executable, os.path.join(ROOT, "run_pretraining.py"),
       "--data-dir", data_dir, "--model-name", name, "--hparams", HPARAMS,
       *extra], capture_output=True, text=True, timeout=600, cwd=ROOT,
      env=env)


def checkpoint(model_dir):
  with np.load(os.path.join(model_dir, f"ckpt-{STEPS}.npz")) as f:
    return {k: f[k] for k in f.files}


def read_json(model_dir, name):
  with open(os.path.join(model_dir, name)) as f:
    return json.load(f)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """A 2-seed run ("pair", "pair.seed2") and the two separate runs."""
  data_dir = build_data_dir(tmp_path_factory.mktemp("multi_seed"))
  together = run(data_dir, "pair", "--seeds", "1,2", "--do-eval")
  assert together.returncode == 0, together.stderr[-3000:]
  for name, seed in (("solo", 1234), ("solo.seed2", 1235)):
    done = run(data_dir, name, "--seed", str(seed), "--do-eval")
    assert done.returncode == 0, done.stderr[-3000:]
  return data_dir, together.stdout


@pytest.mark.parametrize("pair,solo", [("pair", "solo"),
                                       ("pair.seed2", "solo.seed2")])
def test_each_seed_equals_its_separate_run(runs, pair, solo):
  data_dir, _ = runs
  models = os.path.join(data_dir, "models")
  got, expected = (checkpoint(os.path.join(models, n)) for n in (pair, solo))
  assert sorted(got) == sorted(expected)
  for key, value in expected.items():
    np.testing.assert_allclose(got[key], value, rtol=0, atol=1e-5,
                               err_msg=key)
  # The seeds differ from each other (else the test shows nothing).
  other = checkpoint(os.path.join(models, "solo" if solo != "solo" else
                                  "solo.seed2"))
  assert any(not np.allclose(other[k], v, atol=1e-3)
             for k, v in expected.items() if v.dtype.kind == "f")
  results, alone = (read_json(os.path.join(models, n), "eval_results.json")
                    for n in (pair, solo))
  assert results.keys() == alone.keys()
  for key, value in alone.items():
    assert results[key] == pytest.approx(value, abs=1e-5), key
  # What the separate run wrote, the seed's run wrote: its config (but
  # its name and folder), scalars, weights.
  configs = [read_json(os.path.join(models, n), "pretrain_config.json")
             for n in (pair, solo)]
  for config in configs:
    for key in ("model_name", "model_dir"):
      config.pop(key)
  assert configs[0] == configs[1]
  for name in ("train/scalars.jsonl", "weights.json", "checkpoint.json"):
    assert os.path.exists(os.path.join(models, pair, name)), name
  lines = [json.loads(x) for x in open(
      os.path.join(models, pair, "train", "scalars.jsonl"))]
  assert [x["step"] for x in lines] == [10, 20]


def test_the_log_names_each_seed(runs):
  _, log = runs
  assert "x 2 seeds [1, 2] in one step" in log
  assert log.count("seed 2: step 20/20") == 1
  printed = [json.loads(line) for line in log.splitlines()
             if line.startswith("{")]
  assert [p["pretrain_seed"] for p in printed] == [1, 2]


def test_seeds_under_tensorflow_and_bad_seeds_are_one_line(runs):
  for backend, seeds, says in (
      ("tensorflow", "1,2", "KERAS_BACKEND=jax only"),
      ("jax", "2,2", "each once")):
    done = run(runs[0], "x", "--seeds", seeds, backend=backend)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], done.stderr[-2000:]
