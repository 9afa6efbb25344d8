"""Tiny pretraining runs through run_pretraining.py on a small dataset
built from the sample text, and what their logs and checkpoints hold."""

import json
import os
import re
import shutil
import subprocess
import sys

import tensorflow as tf

import build_pretraining_dataset

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEQ = 64
MICRO = {"model_size": "tiny", "max_seq_length": SEQ,
         "train_batch_size": 8, "eval_batch_size": 8,
         "learning_rate": 2e-3, "num_warmup_steps": 10,
         "iterations_per_loop": 10, "save_checkpoints_steps": 20,
         "num_eval_steps": 3, "shuffle_buffer_size": 200,
         "model_hparam_overrides": {"hidden_size": 32, "intermediate_size": 64,
                                    "num_attention_heads": 2,
                                    "embedding_size": 16}}


def build_data_dir(root):
  """A small dataset in the data-dir layout under `root` (a pathlib.Path),
  built from the sample text; returns its path."""
  shutil.copy(os.path.join(ROOT, "sample_data", "vocab.txt"),
              root / "vocab.txt")
  code = build_pretraining_dataset.main([
      "--corpus-dir", os.path.join(ROOT, "sample_data", "corpus"),
      "--vocab-file", str(root / "vocab.txt"),
      "--output-dir", str(root / "pretrain_tfrecords"),
      "--max-seq-length", str(SEQ), "--max-docs", "12",
      "--num-out-files", "4"])
  assert code in (0, None)
  return str(root)


def hparams(**kw):
  return json.dumps(dict(MICRO, **kw))


def run_cli(data_dir, name, *extra, env=None):
  return subprocess.run(
      [sys.executable, os.path.join(ROOT, "run_pretraining.py"),
       "--data-dir", data_dir, "--model-name", name, *extra],
      capture_output=True, text=True, timeout=600, cwd=ROOT,
      env=dict(os.environ, PYTHONPATH=ROOT, TF_DETERMINISTIC_OPS="1",
               **(env or {})))


def eval_results_from(log):
  """The metrics table run_pretraining.py prints once after `eval
  results`: {metric: number}."""
  lines = log[log.rindex("eval results"):].splitlines()[1:]
  out = {}
  for line in lines:
    if not line.startswith("  "):
      break
    key, value = line.split()
    out[key] = float(value) if "." in value else int(value)
  return out


def losses_from(log):
  return [float(m) for m in re.findall(r"\| loss ([0-9.]+)", log)]


def variables(model_dir):
  reader = tf.train.load_checkpoint(model_dir)
  names = [n for n in reader.get_variable_to_shape_map()
           if n.startswith("model/") and "OPTIMIZER_SLOT" not in n]
  return {n: reader.get_tensor(n) for n in names}
