"""Masking, STS-B targets and the learning-rate schedule against what the
original release's own code computed (tests/reference/, items 1, 2, 5 of
issue 37; recorded by tests/reference/record_original.py)."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from configure_finetuning import FinetuningConfig
from finetune.classification import classification_tasks as glue
from pretrain.data import mask_features
from pretrain.masking import MaskingConfig
from tests.shared_data import BERT_VOCAB
from tests.shared_data import SHARED
from training.optimization import WarmupPolynomialDecay
from util.tokenization import load_tokenizer

REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         "reference")
CLS, SEP, MASK = 101, 102, 103


def _load(name):
  with open(os.path.join(REFERENCE, name)) as f:
    return json.load(f)


def _draw_stats(rows, out, copies):
  """The recorder's statistics, one value per draw (copy of the batch)."""
  n = len(rows["input_ids"])
  real = rows["input_mask"].sum()
  full = rows["input_mask"].all(axis=1)
  stats = {k: [] for k in ("distinct_fraction_of_real_tokens",
                           "distinct_per_full_row", "repeated_slot_fraction",
                           "slots_at_mask_fraction")}
  for c in range(copies):
    part = slice(c * n, (c + 1) * n)
    pos = out["masked_lm_positions"][part]
    used = out["masked_lm_weights"][part] > 0
    masked = out["masked_input_ids"][part]
    distinct, repeated = np.zeros(n), 0
    for r in range(n):
      seen = pos[r][used[r]]
      distinct[r] = len(set(seen))
      repeated += len(seen) - distinct[r]
    shown = np.take_along_axis(masked, pos, 1)[used]
    stats["distinct_fraction_of_real_tokens"].append(distinct.sum() / real)
    stats["distinct_per_full_row"].append(distinct[full].mean())
    stats["repeated_slot_fraction"].append(repeated / used.sum())
    stats["slots_at_mask_fraction"].append(np.mean(shown == MASK))
  return {k: np.array(v) for k, v in stats.items()}


def test_masking_matches_the_original_statistics():
  """Same counts per row exactly; over 500 draws each statistic within 4
  standard errors of the original's 1000 (it picks 13.85% of real tokens
  as distinct positions, 17.7 per full row; 6.9% of slots repeat one)."""
  reference = _load("masking.json")
  rows = dict(np.load(os.path.join(REFERENCE, "masking_rows.npz")))
  config = MaskingConfig(
      mask_prob=reference["config"]["mask_prob"],
      max_predictions=reference["config"]["max_predictions_per_seq"],
      vocab_size=30522, cls_id=CLS, sep_id=SEP, mask_id=MASK)
  copies, calls = 25, 20
  features = {k: tf.constant(np.tile(rows[k], (copies, 1)), tf.int32)
              for k in ("input_ids", "input_mask", "segment_ids")}
  draws = {}
  for call in range(calls):
    out = mask_features(features, config, tf.constant([11, call], tf.int32))
    out = {k: np.asarray(v) for k, v in out.items()}
    if call == 0:
      counts = out["masked_lm_weights"][:len(rows["input_ids"])].sum(1)
      np.testing.assert_array_equal(counts, rows["num_to_predict"])
    for key, values in _draw_stats(rows, out, copies).items():
      draws.setdefault(key, []).extend(values)
  for key, values in draws.items():
    ours = np.mean(values)
    se = np.std(values) / np.sqrt(len(values))
    theirs = reference["stats"][key]
    tolerance = 4 * np.hypot(se, theirs["se"])
    assert abs(ours - theirs["mean"]) < tolerance, (key, ours, theirs)


def test_sts_targets_are_the_originals():
  reference = _load("stsb_labels.json")["examples"]
  config = FinetuningConfig(raw_data_dir=os.path.join(SHARED, "glue"),
                            output_dir="/tmp/unused", max_seq_length=32)
  task = glue.STS(config, load_tokenizer(BERT_VOCAB))
  dev = task.get_examples("dev")[:len(reference)]
  assert [f"{e.label:.3f}" for e in dev] == [r["raw_label"] for r in
                                             reference]
  np.testing.assert_allclose(task.featurize(dev, False)["labels"],
                             [r["target"] for r in reference], rtol=1e-6)


@pytest.mark.parametrize("power", ["1.0", "0.5"])
def test_learning_rate_schedule_is_the_originals(power):
  reference = _load("learning_rate.json")
  schedule = WarmupPolynomialDecay(
      reference["learning_rate"], reference["num_train_steps"],
      reference["warmup_steps"], float(power))
  ours = [float(schedule(step)) for step in range(len(
      reference["lr_by_power"][power]))]
  # float32 on both sides: sqrt(1 - step/total) near the end differs by
  # rounding; the other warmup would be up to 10% off.
  np.testing.assert_allclose(ours, reference["lr_by_power"][power],
                             rtol=1e-4, atol=1e-10)
