"""Checks that files can answer come before TensorFlow or JAX is imported
(issue 66): a vocabulary that disagrees with the dataset or the model, a
max_seq_length above the model's positions, a TPU without a name, a
--num-gpus without the mirrored strategy, an output folder of the other
backend's run; and the original release's fine-tuning switches."""

import json
import os
import subprocess
import sys

import pytest

from configure_finetuning import FinetuningConfig
from util.config import apply_overrides
from util.errors import UserError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Runs a script as `python SCRIPT ARGS` would, then says which backends
# were imported by the time it ended.
PROBE = """
import json, runpy, sys
sys.argv = sys.argv[1:]
sys.path.insert(0, sys.argv[0].rsplit("/", 1)[0])
code = 0
try:
  runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as e:
  code = e.code
print(json.dumps({"code": code, "imported": sorted(
    m for m in ("tensorflow", "jax") if m in sys.modules)}))
"""
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]


def probe(script, *argv, backend="tensorflow"):
  env = dict(os.environ, PYTHONPATH=ROOT, KERAS_BACKEND=backend)
  done = subprocess.run(
      [sys.executable, "-c", PROBE, os.path.join(ROOT, script),
       *map(str, argv)], capture_output=True, text=True, timeout=120,
      cwd=ROOT, env=env)
  result = json.loads(done.stdout.strip().splitlines()[-1])
  return result, done.stderr.strip().splitlines()


@pytest.fixture
def data_dir(tmp_path):
  """What the early checks read, and only that: a vocabulary, a dataset's
  metadata.json beside a shard, a trained run's pretrain_config.json and
  checkpoint index, and a TensorFlow fine-tuning run's record of RTE
  trials."""
  (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
  (tmp_path / "small.txt").write_text("\n".join(VOCAB[:5]) + "\n")
  records = tmp_path / "pretrain_tfrecords"
  records.mkdir()
  (records / "pretrain_data.tfrecord-0-of-1").write_bytes(b"")
  (records / "metadata.json").write_text(json.dumps(
      {"max_seq_length": 128, "vocab_size": 7, "vocab_file": "vocab.txt"}))
  run = tmp_path / "models" / "m"
  (run / "finetuning").mkdir(parents=True)
  (run / "pretrain_config.json").write_text(json.dumps(
      {"model_size": "tiny", "vocab_size": 7,
       "vocab_file": str(tmp_path / "vocab.txt")}))
  (run / "ckpt-20.index").write_bytes(b"")
  (run / "finetuning" / "rte_trials.json").write_text(json.dumps(
      {"backend": "tensorflow", "run": "0", "config": {}, "trials": []}))
  return tmp_path


def test_file_checks_are_one_line_before_any_backend(data_dir):
  d = str(data_dir)
  fine = ("run_finetuning.py", "--data-dir", d, "--model-name", "m",
          "--task-names", "rte")
  pre = ("run_pretraining.py", "--data-dir", d, "--model-name", "new")
  tpu = ("error: strategy tpu (use_tpu) needs --tpu-name: the Cloud TPU's "
         "name, or local on a TPU VM")
  cases = [
      (fine + ("--vocab-file", f"{d}/small.txt"), "tensorflow",
       f"error: vocab file {d}/small.txt has 5 entries but the pretrained "
       "model has 7; pass the pretraining vocab with --vocab-file"),
      (pre + ("--vocab-file", f"{d}/small.txt"), "tensorflow",
       f"error: vocab file {d}/small.txt has 5 entries but the dataset was "
       f"built with 7 ({d}/pretrain_tfrecords/metadata.json)"),
      (fine + ("--max-seq-length", "1024"), "tensorflow",
       f"error: max_seq_length 1024 exceeds the model's 512 positions "
       f"({d}/models/m: tiny model); pass --max-seq-length 512 or less"),
      (fine + ("--hparams", '{"use_tpu": true}'), "tensorflow", tpu),
      (pre + ("--hparams", '{"use_tpu": true}'), "tensorflow", tpu),
      (fine + ("--num-gpus", "8"), "tensorflow",
       "error: num_gpus 8 is read by --strategy mirrored only (strategy "
       "default trains on one device): add --strategy mirrored"),
      (fine, "jax",
       f"error: {d}/models/m/finetuning/rte_trials.json records a "
       "TensorFlow run's trials, but this run is on JAX (KERAS_BACKEND=jax)"
       ": unset KERAS_BACKEND to go on with them, or use another "
       "--output-dir for a new run"),
      (("run_pretraining.py", "--data-dir", d, "--model-name", "m"), "jax",
       f"error: {d}/models/m holds checkpoints of a run trained with "
       "KERAS_BACKEND=tensorflow (ckpt-20.index): go on with "
       "KERAS_BACKEND=tensorflow, or use another --model-name"),
  ]
  for argv, backend, line in cases:
    result, err = probe(*argv, backend=backend)
    assert result == {"code": 2, "imported": []}, (argv, err)
    assert err == [line], argv


def test_original_finetuning_switches_and_json_did_you_mean():
  config = apply_overrides(FinetuningConfig(), {"use_tpu": True,
                                                "joint_prediction": False})
  assert (config.strategy, config.qa_head) == ("tpu", "linear")
  kept = apply_overrides(FinetuningConfig(), {"use_tpu": False,
                                              "joint_prediction": True})
  assert (kept.strategy, kept.qa_head) == ("default", "electra")
  # A field given directly wins over the switch.
  assert apply_overrides(FinetuningConfig(), {
      "use_tpu": True, "strategy": "mirrored"}).strategy == "mirrored"
  for key, hint in (("learning-rate", "did you mean 'learning_rate'?"),
                    ("learning_rat", "did you mean 'learning_rate'?")):
    with pytest.raises(UserError) as info:
      apply_overrides(FinetuningConfig(), {key: 1.0}, "--hparams JSON")
    assert str(info.value) == (f"unknown hparam '{key}' in --hparams JSON; "
                               f"{hint}")
