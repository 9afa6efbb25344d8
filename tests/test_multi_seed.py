"""run_pretraining.py --seeds 1,2 under JAX (pretrain/multi_seed.py): each
seed of one vmapped run ends where its separate run ends (weights,
optimizer and RNG state, eval results) and writes what that run writes;
under TensorFlow the flag is one line."""

import json
import os
import re
import shutil
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


# The runs in one process (two JAX imports and exports fewer): seed 2's
# separate run first, in the fresh process; then the pair; then seed 1's.
RUNS = """
import sys
import run_pretraining
data_dir, hparams = sys.argv[1:]
base = ["--data-dir", data_dir, "--hparams", hparams, "--do-eval"]
for extra in (["--model-name", "solo.seed2", "--seed", "1235"],
              ["--model-name", "pair", "--seeds", "1,2"],
              ["--model-name", "solo", "--seed", "1234"]):
  print("=== " + " ".join(extra), flush=True)
  run_pretraining.main(base + extra)
"""


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
  env = dict(os.environ, PYTHONPATH=ROOT, KERAS_BACKEND="jax",
             JAX_PLATFORMS="cpu")
  env.pop("XLA_FLAGS", None)
  done = subprocess.run([sys.executable, "-c", RUNS, data_dir, HPARAMS],
                        capture_output=True, text=True, timeout=900,
                        cwd=ROOT, env=env)
  assert done.returncode == 0, done.stderr[-3000:]
  log = done.stdout
  pair = log[log.index("=== --model-name pair"):log.index(
      "=== --model-name solo --seed")]
  return data_dir, pair


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
  assert "2 seeds [1, 2] in one step" in log
  assert log.count("seed 2: step 20/20") == 1
  printed = [json.loads(line) for line in log.splitlines()
             if line.startswith("{")]
  assert [p["pretrain_seed"] for p in printed] == [1, 2]


def test_seeds_under_tensorflow_and_bad_seeds_are_one_line(runs, capsys):
  """In this (TensorFlow) process: --seeds is refused in one line, and a
  bad seed list is named on either backend (the config's check)."""
  import run_pretraining  # pylint: disable=g-import-not-at-top
  base = ["--data-dir", runs[0], "--model-name", "x", "--hparams", HPARAMS]
  for seeds, says in (("1,2", "KERAS_BACKEND=jax only"),
                      ("2,2", "each once"), ("0", "K >= 1")):
    with pytest.raises(SystemExit) as stopped:
      run_pretraining.main(base + ["--seeds", seeds])
    assert stopped.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], lines
  assert not os.path.exists(os.path.join(runs[0], "models", "x"))


def test_the_one_loops_checks_stop_several_seeds_before_saving(runs):
  """--seeds trains through pretrain/loop.py: a rate past float32 makes
  the weights inf after a finite loss; the run stops in one line naming
  the seed, and neither seed saves a checkpoint past step 20."""
  data_dir, _ = runs
  models = os.path.join(data_dir, "models")
  for name in ("pair", "pair.seed2"):
    shutil.copytree(os.path.join(models, name),
                    os.path.join(models, name.replace("pair", "diverging")))
  env = dict(os.environ, PYTHONPATH=ROOT, KERAS_BACKEND="jax",
             JAX_PLATFORMS="cpu")
  env.pop("XLA_FLAGS", None)
  done = subprocess.run(
      [sys.executable, os.path.join(ROOT, "run_pretraining.py"),
       "--data-dir", data_dir, "--model-name", "diverging", "--hparams",
       HPARAMS, "--seeds", "1,2", "--num-train-steps", "30",
       "--learning-rate", "1e39", "--iterations-per-loop", "1",
       "--save-checkpoints-steps", "1", "--accept-hparam-changes"], capture_output=True, text=True,
      timeout=900, cwd=ROOT, env=env)
  assert done.returncode != 0
  assert "resumed from" in done.stdout and "from step 20 to 30" in done.stdout
  last = done.stderr.strip().splitlines()[-1]
  assert re.fullmatch(r"error: the weights after step 21 are not finite "
                      r"\(\d+ variable\(s\), e\.g\. seed 1: .*\); stopping "
                      r"without saving, the last good checkpoint is .*"
                      r"diverging/ckpt-20\.npz\. Try a lower learning_rate",
                      last), done.stderr[-2000:]
  for name in ("diverging", "diverging.seed2"):
    assert read_json(os.path.join(models, name), "checkpoint.json")[
        "latest"] == "ckpt-20.npz"
