"""Dynamic masking: exclusions, counts and the two replacement schemes."""

import numpy as np
import pytest
import tensorflow as tf

from pretrain.masking import MaskingConfig
from pretrain.masking import mask_batch

CLS, SEP, MASK, PAD, VOCAB = 101, 102, 103, 0, 1000


def make_batch(batch=64, seq_len=128, seed=0):
  rng = np.random.RandomState(seed)
  ids = rng.randint(200, VOCAB, size=(batch, seq_len))
  lengths = rng.randint(5, seq_len + 1, size=batch)
  mask = (np.arange(seq_len)[None] < lengths[:, None]).astype(np.int32)
  ids[:, 0] = CLS
  for i, n in enumerate(lengths):
    ids[i, n - 1] = SEP
    if n > 10:
      ids[i, n // 2] = SEP
    ids[i, 3] = MASK  # a literal [MASK] in the data is never a target
  ids = ids * mask
  return {"input_ids": tf.constant(ids, tf.int32),
          "input_mask": tf.constant(mask, tf.int32),
          "segment_ids": tf.zeros_like(tf.constant(ids, tf.int32))}


def config(scheme="electra", mask_prob=0.15, max_predictions=20):
  return MaskingConfig(mask_prob=mask_prob, max_predictions=max_predictions,
                       vocab_size=VOCAB, cls_id=CLS, sep_id=SEP, mask_id=MASK,
                       pad_id=PAD, scheme=scheme)


def run(features, cfg, seed=(1, 2)):
  out = mask_batch(features, cfg, tf.constant(seed, tf.int32))
  return {k: v.numpy() for k, v in out.items()}


def test_candidates_exclude_specials_and_padding():
  features = make_batch()
  out = run(features, config())
  ids, mask = out["input_ids"], out["input_mask"]
  for b in range(ids.shape[0]):
    picked = out["masked_lm_positions"][b][out["masked_lm_weights"][b] > 0]
    assert len(set(picked)) == len(picked), "positions repeat"
    assert np.all(mask[b, picked] == 1)
    assert not np.isin(ids[b, picked], [CLS, SEP, MASK, PAD]).any()
    # Targets are the original tokens at the picked positions.
    targets = out["masked_lm_ids"][b][out["masked_lm_weights"][b] > 0]
    np.testing.assert_array_equal(targets, ids[b, picked])
    # Only picked positions may change.
    changed = np.nonzero(out["masked_input_ids"][b] != ids[b])[0]
    assert set(changed) <= set(picked)


def test_number_of_picks_follows_mask_prob():
  features = make_batch()
  out = run(features, config(max_predictions=128))
  ids, mask = out["input_ids"], out["input_mask"]
  candidates = ((mask == 1) & ~np.isin(ids, [CLS, SEP, MASK, PAD])).sum(1)
  expected = np.maximum(1, np.round(candidates * 0.15)).astype(int)
  np.testing.assert_array_equal(out["masked_lm_weights"].sum(1), expected)
  # And max_predictions caps it.
  capped = run(features, config(mask_prob=0.5, max_predictions=7))
  assert capped["masked_lm_weights"].sum(1).max() == 7
  assert capped["masked_lm_positions"].shape == (64, 7)


def test_positions_are_uniform_over_candidates():
  features = make_batch(batch=256, seq_len=32, seed=1)
  out = run(features, config(max_predictions=32))
  ids, mask = out["input_ids"], out["input_mask"]
  cand = (mask == 1) & ~np.isin(ids, [CLS, SEP, MASK, PAD])
  picked = np.zeros_like(cand)
  for b in range(ids.shape[0]):
    pos = out["masked_lm_positions"][b][out["masked_lm_weights"][b] > 0]
    picked[b, pos] = True
  rate = picked.sum() / cand.sum()
  assert abs(rate - 0.15) < 0.02
  # Early and late candidate positions are picked at similar rates.
  first, second = picked[:, 1:16].sum() / cand[:, 1:16].sum(), \
      picked[:, 16:].sum() / cand[:, 16:].sum()
  assert abs(first - second) < 0.04


@pytest.mark.parametrize("scheme,expect", [
    ("electra", {"mask": 0.85, "random": 0.0, "keep": 0.15}),
    ("bert", {"mask": 0.80, "random": 0.10, "keep": 0.10}),
])
def test_replacement_scheme_shares(scheme, expect):
  features = make_batch(batch=512)
  out = run(features, config(scheme))
  w = out["masked_lm_weights"] > 0
  shown = np.take_along_axis(out["masked_input_ids"],
                             out["masked_lm_positions"], 1)[w]
  targets = out["masked_lm_ids"][w]
  n = len(targets)
  shares = {"mask": np.mean(shown == MASK),
            "keep": np.mean(shown == targets),
            "random": np.mean((shown != MASK) & (shown != targets))}
  for key, value in expect.items():
    tol = 4 * np.sqrt(max(value, 0.01) * (1 - value) / n) + 0.005
    assert abs(shares[key] - value) < tol, (key, shares[key])


def test_deterministic_per_seed_and_dynamic_across_seeds():
  features = make_batch()
  a = run(features, config(), seed=(5, 0))
  b = run(features, config(), seed=(5, 0))
  c = run(features, config(), seed=(5, 1))
  np.testing.assert_array_equal(a["masked_input_ids"], b["masked_input_ids"])
  assert not np.array_equal(a["masked_lm_positions"], c["masked_lm_positions"])


def test_row_without_candidates_gets_no_picks():
  features = {"input_ids": tf.constant([[CLS, SEP, PAD, PAD]], tf.int32),
              "input_mask": tf.constant([[1, 1, 0, 0]], tf.int32),
              "segment_ids": tf.zeros([1, 4], tf.int32)}
  out = run(features, config(max_predictions=3))
  assert out["masked_lm_weights"].sum() == 0
  np.testing.assert_array_equal(out["masked_input_ids"], [[CLS, SEP, 0, 0]])
