"""Tiny randomly initialised models saved as pretraining runs, as the
scripts would find them, for the scoring, export and fine-tuning tests."""

import dataclasses
import json
import os
import pathlib

import numpy as np
import tensorflow as tf

from configure_pretraining import PretrainingConfig
from pretrain.objectives import build_model
from training.checkpointing import make_checkpoint

ROOT = pathlib.Path(__file__).resolve().parents[1]
WORDS = ("the a cat dog sat ran on mat big small red blue and is was ##s "
         "##ed quick brown fox jumps over lazy bird sings loud they we "
         "saw it").split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
PAD, UNK, CLS, SEP, MASK = range(5)
EXCLUDED = (PAD, CLS, SEP, MASK)
MICRO = dict(hidden_size=16, intermediate_size=32, num_attention_heads=2,
             embedding_size=8, num_hidden_layers=1, hidden_dropout_prob=0.0,
             attention_probs_dropout_prob=0.0)
SENTENCES = ["the cat sat on the mat", "a big dog ran", "",
             "the quick brown fox jumps over the lazy dog", "cats", "zebra",
             "they saw it"]
VOCAB_8K = ROOT / "sample_data" / "vocab_8k.txt"
# Tiny fine-tuning runs: a few steps, short rows.
QUICK = {"num_train_epochs": 8.0, "train_batch_size": 8,
         "eval_batch_size": 64, "max_seq_length": 48, "log_every_steps": 50,
         "learning_rate": 1e-2, "layerwise_lr_decay": 1.0,
         "warmup_proportion": 0.0, "overwrite": True}


def save_run(data_dir, objective, **kw):
  """A randomly initialised tiny model saved as a pretraining run would
  be: DATA_DIR/models/<name>/pretrain_config.json + a checkpoint."""
  name = kw.pop("name", objective)
  vocab_file = os.path.join(data_dir, "vocab.txt")
  with open(vocab_file, "w") as f:
    f.write("\n".join(VOCAB) + "\n")
  h = PretrainingConfig(
      model_size="tiny", vocab_size=len(VOCAB), max_seq_length=16,
      max_predictions_per_seq=3, data_dir=data_dir, model_name=name,
      vocab_file=vocab_file, objective=objective,
      model_hparam_overrides=dict(MICRO), **kw)
  h.validate()
  return write_run(h, build_model(h, special_ids=EXCLUDED))


def write_run(h, model):
  """Gives `model` O(1) random weights (seeded by its run's name, so that
  every part of the network counts) and saves it as run `h` would be:
  pretrain_config.json + a checkpoint. Returns (h, model)."""
  model.build_variables()
  rng = np.random.RandomState(len(h.model_name))
  for v in model.trainable_variables:
    value = rng.normal(0.0, 0.5, tuple(v.shape))
    v.assign((value + v.path.endswith("gamma")).astype(np.float32))
  os.makedirs(h.model_dir, exist_ok=True)
  with open(os.path.join(h.model_dir, "pretrain_config.json"), "w") as f:
    json.dump(dataclasses.asdict(h), f)
  tf.train.CheckpointManager(make_checkpoint(model), h.model_dir, 1,
                             checkpoint_name="ckpt").save(checkpoint_number=1)
  return h, model


def tiny_run(data_dir, name="tiny", size="tiny"):
  """An untrained tiny ELECTRA (save_run's shapes; its config names
  model_size `size`) saved as a pretraining run, with the 8k sample
  vocabulary so that English text tokenizes. It keeps Keras' initial
  weights: write_run gives O(1) weights, from which 40 fine-tuning steps
  learn nothing (POS accuracy 12.8%, the majority tag, against 76% from
  these)."""
  h = PretrainingConfig(
      model_size=size, vocab_size=len(VOCAB_8K.read_text().split()),
      max_seq_length=16, max_predictions_per_seq=3, data_dir=str(data_dir),
      model_name=name, vocab_file=str(VOCAB_8K), objective="electra",
      model_hparam_overrides=dict(MICRO))
  h.validate()
  model = build_model(h, special_ids=EXCLUDED)
  model.build_variables()
  os.makedirs(h.model_dir, exist_ok=True)
  with open(os.path.join(h.model_dir, "pretrain_config.json"), "w") as f:
    json.dump(dataclasses.asdict(h), f)
  tf.train.CheckpointManager(make_checkpoint(model), h.model_dir, 1,
                             checkpoint_name="ckpt").save(checkpoint_number=1)
  return str(data_dir)


def tiny_run_with_rte(root):
  """DATA_DIR `root` with models/pre (tiny_run) and finetuning_data/RTE
  (the shared GLUE copy)."""
  from tests.shared_data import SHARED  # pylint: disable=g-import-not-at-top
  tiny_run(root, name="pre")
  os.makedirs(os.path.join(root, "finetuning_data"))
  os.symlink(os.path.join(SHARED, "glue", "RTE"),
             os.path.join(root, "finetuning_data", "RTE"))
  return str(root)
