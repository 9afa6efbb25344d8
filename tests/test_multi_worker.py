"""Two worker processes under MultiWorkerMirroredStrategy (TF_CONFIG on
127.0.0.1) end with identical weights, equal up to rounding to a
single-worker run with the same global batch and data."""

import json
import os
import socket
import subprocess
import sys

import numpy as np
from tests.pretraining_runs import ROOT
from tests.pretraining_runs import hparams
from tests.pretraining_runs import run_cli
from tests.pretraining_runs import variables


STEPS = 30
# Keras draws dropout masks and ELECTRA's generator samples per replica, so
# runs on different numbers of workers agree in distribution, not number for
# number. The masked-LM objective without dropout, in float32, has no such
# draws (masks come from the data pipeline), so the arithmetic of the
# distributed step can be compared number for number.
NO_RANDOMNESS = {"objective": "mlm", "mixed_precision": "float32",
                 "model_hparam_overrides": dict(
    hidden_size=32, intermediate_size=64, num_attention_heads=2,
    embedding_size=16, hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0)}


def free_ports(n):
  sockets = [socket.socket() for _ in range(n)]
  for s in sockets:
    s.bind(("127.0.0.1", 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports


def test_two_workers_match_one(data_dir):
  args = ["--input-sharding", "batches", "--hparams",
          hparams(num_train_steps=STEPS, save_checkpoints_steps=STEPS,
                  **NO_RANDOMNESS)]
  cluster = {"worker": [f"127.0.0.1:{p}" for p in free_ports(2)]}
  workers = []
  for index in range(2):
    env = dict(os.environ, PYTHONPATH=ROOT, TF_DETERMINISTIC_OPS="1",
               TF_CONFIG=json.dumps({"cluster": cluster, "task": {
                   "type": "worker", "index": index}}))
    workers.append(subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "run_pretraining.py"),
         "--data-dir", data_dir, "--model-name", "two_workers",
         "--strategy", "multi_worker", "--keep-worker-checkpoints", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env=env))
  outputs = [w.communicate(timeout=600) for w in workers]
  for w, (out, err) in zip(workers, outputs):
    assert w.returncode == 0, err[-3000:]
    assert "2 replica(s)" in out

  single = run_cli(data_dir, "one_worker", *args)
  assert single.returncode == 0, single.stderr[-3000:]

  model_dir = os.path.join(data_dir, "models", "two_workers")
  chief = variables(model_dir)
  other = variables(os.path.join(model_dir, "workers", "worker_1"))
  reference = variables(os.path.join(data_dir, "models", "one_worker"))
  assert chief.keys() == other.keys() == reference.keys()
  for name in chief:
    np.testing.assert_array_equal(chief[name], other[name], err_msg=name)
    # The all-reduce sums the two halves in another order than one device
    # does, and Adam's normalization can grow that rounding where a gradient
    # is near zero: a few 1e-6 after 30 steps (other batches move far more).
    np.testing.assert_allclose(chief[name], reference[name], rtol=1e-4,
                               atol=1e-5, err_msg=name)
  # Only the chief writes model_dir's checkpoints, config and logs.
  assert not os.path.exists(os.path.join(model_dir, "workers", "worker_0"))
