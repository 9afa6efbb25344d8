"""Batches padded to their longest row (finetune/padding.py, pad_to_multiple)
give the losses and gradients of the same batches padded to
max_seq_length, for every head kind (on JAX: tests/test_jax_finetuner.py,
a trial with and without the cut); the train batches hold the rows, in
the order, the uncut ones do; and a tiny fine-tuning scores as uncut."""

import json
import os

import numpy as np
import pytest

from finetune import padding
from tests import padding_cases

TOLERANCE = 1e-6  # float32


def check(differences):
  for kind, (loss, grad, length, scale) in differences.items():
    assert length < padding_cases.T, kind  # trimmed: rows of <= 13 tokens
    assert scale > 1e-3, kind  # gradients that are not all zero
    assert loss <= TOLERANCE and grad <= TOLERANCE * max(1.0, scale), (
        kind, loss, grad)


def test_trimmed_batches_give_the_same_losses_and_gradients():
  check(padding_cases.largest_differences(multiple=8))


def test_lengths_round_up_to_the_multiple():
  mask = np.zeros((3, 2, 64), np.int32)
  mask[1, 0, :17] = 1
  assert padding.trimmed_length(mask, 1, 16) == 32
  assert padding.trimmed_length(mask, 40, 16) == 48  # min_length first
  assert padding.trimmed_length(mask[:, 0], 1, 1) == 17
  assert padding.trimmed_length(np.ones((2, 60)), 1, 16) == 60  # at most T

  class Config:
    pad_to_multiple = 16
  assert padding.multiple_for(Config, 128) == 16
  assert padding.multiple_for(Config, 16) == 0  # at max_seq_length: off


def test_per_token_outputs_are_padded_back():
  net, task = padding_cases.model("tagging_crf")
  full = padding_cases.batch("tagging_crf")
  want = padding_cases.outputs(net, task, full)
  got = padding.padded_back(padding_cases.outputs(
      net, task, padding.trimmed(full, 8)), task.per_token_outputs,
                            padding_cases.T)
  weights = full["label_weights"] > 0
  np.testing.assert_array_equal(got["predictions"][weights],
                                want["predictions"][weights])
  np.testing.assert_array_equal(got["label_weights"], want["label_weights"])


def test_train_batches_keep_their_rows_and_order():
  """tf.data's batches with the cut: the same rows in the same order as
  without it, each batch at its longest row rounded up."""
  from finetune.config import FinetuningConfig
  from finetune.task_data import TaskData

  class OneDevice:
    num_replicas_in_sync = 1
  rng = np.random.default_rng(0)
  n, seq_len = 40, 64
  lengths = rng.integers(3, 40, n)
  mask = (np.arange(seq_len) < lengths[:, None]).astype(np.int32)
  features = {"input_ids": mask * np.arange(n)[:, None].astype(np.int32),
              "input_mask": mask, "segment_ids": mask * 0,
              "label_ids": np.arange(n, dtype=np.int32)}
  got = {}
  for multiple in (0, 16):
    data = TaskData(FinetuningConfig(pad_to_multiple=multiple), [],
                    OneDevice())
    # No autotune thread, whose sleep freeing the iterator waited out.
    assert data.train_dataset(
        features, 8, seed=5).options().autotune.enabled is False
    batches = data.batches(features, 8, seed=5)
    got[multiple] = [{k: v.numpy() for k, v in next(batches).items()}
                     for _ in range(10)]
  for full, cut in zip(got[0], got[16]):
    np.testing.assert_array_equal(cut["label_ids"], full["label_ids"])
    longest = int(lengths[full["label_ids"]].max())
    assert cut["input_ids"].shape == (8, min(seq_len, -(-longest // 16) * 16))
    np.testing.assert_array_equal(
        full["input_ids"][:, :cut["input_ids"].shape[1]], cut["input_ids"])
    assert not full["input_mask"][:, cut["input_mask"].shape[1]:].any()


def test_tiny_fine_tuning_scores_as_untrimmed(pretrained):
  """Without dropout (drawn at the batch's shape), a fine-tuning with the
  cut trains and scores as one at max_seq_length, to float noise: a
  regression and a tagging task (per-token outputs padded back), one
  multi-task run each way."""
  tasks = "sts,chunk"
  import run_finetuning
  from tests.finetuning_data import QUICK
  summaries = []
  for multiple in (0, 16):
    summaries.append(run_finetuning.main([
        "--data-dir", pretrained, "--model-name", "pre", "--task-names",
        tasks, "--output-dir", os.path.join(pretrained, f"pad{multiple}"),
        "--hparams", json.dumps(dict(
            QUICK, pad_to_multiple=multiple, hidden_dropout_prob=0.0,
            inference_engine="tensorflow",
            model_hparam_overrides={"attention_probs_dropout_prob": 0.0}))]))
  untrimmed, trimmed = summaries
  for task, metrics in untrimmed.items():
    for metric, values in metrics.items():
      assert trimmed[task][metric]["values"] == pytest.approx(
          values["values"], rel=1e-4, abs=1e-4), (task, metric)
