"""The control fine-tuned from random initialisation (issue 51), through
the slot's command on the CPU: run_gpu_slot.py --objectives ''
--random-init-control fine-tunes --size's ELECTRA encoder as initialised
on every task and seed, and collect_gpu_slot.py reports it as its own row
beside the no-text baseline."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np

import collect_gpu_slot
from tests import slot_data
from tests.shared_data import SHARED


def test_the_control_is_fine_tuned_and_reported(tmp_path):
  data = tmp_path / "data"
  data.mkdir()
  shutil.copy(os.path.join(slot_data.ROOT, "sample_data", "vocab_8k.txt"),
              data / "vocab.txt")
  slot_data.export_tasks(str(data), str(tmp_path / "arrays"))
  out = tmp_path / "out"
  env = slot_data.slot_env(str(tmp_path), KERAS_BACKEND="jax")
  done = subprocess.run(
      [sys.executable, "run_gpu_slot.py", "--data", str(tmp_path / "arrays"),
       "--out", str(out), "--size", "tiny", "--objectives", "",
       "--random-init-control", "--finetune-seeds", "2",
       "--hparams", json.dumps(slot_data.MICRO), "--precision", "float32",
       "--time-limit", "900"], env=env, cwd=slot_data.ROOT,
      capture_output=True, text=True, timeout=900)
  assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
  with open(out / "slot.json") as f:
    result = json.load(f)
  assert not result["tensorflow_imported"] and "objectives" not in result
  trials = {(t["model"], t["task"], t["seed"]) for t in result["finetune"]}
  assert trials == {("random_init_tiny", task, seed) for task in ("rte", "sts")
                    for seed in (1234, 1235)}
  with np.load(out / "finetune_outputs.npz") as outputs:
    assert len(outputs["random_init_tiny/rte/1235/predictions"]) == 32
  target = str(tmp_path / "results")
  assert collect_gpu_slot.main([
      str(out), "--output-dir", target, "--finetune-data",
      str(tmp_path / "arrays" / "finetune"), "--glue-dir",
      os.path.join(SHARED, "glue"), "--vocab-file",
      str(data / "vocab.txt")]) == 0
  with open(os.path.join(target, "results.json")) as f:
    control = json.load(f)["objectives"]["random init (no pretraining)"]
  assert len(control["tasks"]["rte"]["seeds"]) == 2
  with open(os.path.join(target, "results.md")) as f:
    table = f.read()
  assert table.index("| random init (no pretraining) |") < table.index(
      "| baseline (no text) |")
