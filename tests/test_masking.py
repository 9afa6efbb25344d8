"""Dynamic masking: the original release's counts and sampling with
replacement, exclusions, the two replacement schemes, repeated positions."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from model.positions import scatter_positions
from pretrain.data import mask_features
from pretrain.masking import MaskingConfig
from pretrain.masking import NUM_NOISE
from pretrain.masking import mask_batch

CLS, SEP, MASK, VOCAB = 101, 102, 103, 1000
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
                       scheme=scheme)


def run(features, cfg, seed=(1, 2)):
  out = mask_features(features, cfg, tf.constant(seed, tf.int32))
  return {k: np.asarray(v) for k, v in out.items()}


def candidates_of(out):
  ids, mask = out["input_ids"], out["input_mask"]
  return (mask == 1) & ~np.isin(ids, [CLS, SEP, MASK])


def test_picks_are_candidates_and_targets_their_tokens():
  out = run(make_batch(), config())
  ids, cand = out["input_ids"], candidates_of(out)
  for b in range(ids.shape[0]):
    used = out["masked_lm_weights"][b] > 0
    picked = out["masked_lm_positions"][b][used]
    assert cand[b, picked].all()
    np.testing.assert_array_equal(out["masked_lm_ids"][b][used],
                                  ids[b, picked])
    # Unused slots point at position 0 with target 0, as the original's.
    assert (out["masked_lm_positions"][b][~used] == 0).all()
    assert (out["masked_lm_ids"][b][~used] == 0).all()
    changed = np.nonzero(out["masked_input_ids"][b] != ids[b])[0]
    assert set(changed) <= set(picked)
  np.testing.assert_array_equal(out["scoring_mask"], cand)


def test_count_is_round_of_all_real_tokens_as_the_original():
  """num_to_predict = max(1, min(N, round(mask_prob * sum(input_mask)))):
  [CLS] and [SEP] count (pretrain_helpers.mask), half rounds to even."""
  features = make_batch()
  for n in (128, 7):
    out = run(features, config(max_predictions=n))
    real = out["input_mask"].sum(1)
    expected = np.clip(np.round(real * 0.15), 1, n)
    np.testing.assert_array_equal(out["masked_lm_weights"].sum(1), expected)
    assert out["masked_lm_positions"].shape == (64, n)
  # 10 real tokens: 1.5 rounds to 2 (even); 30: 4.5 rounds to 4.
  ids = np.full((2, 32), 500, np.int32)
  mask = (np.arange(32)[None] < np.array([[10], [30]])).astype(np.int32)
  out = run({"input_ids": tf.constant(ids * mask),
             "input_mask": tf.constant(mask),
             "segment_ids": tf.zeros([2, 32], tf.int32)}, config())
  np.testing.assert_array_equal(out["masked_lm_weights"].sum(1), [2, 4])


def test_positions_are_drawn_with_replacement_uniformly():
  """Each slot is uniform over the row's candidates, independently: the
  number of distinct positions follows n (1 - (1 - 1/n)^m)."""
  features = make_batch(batch=512, seq_len=32, seed=1)
  out = run(features, config(max_predictions=32, mask_prob=0.5))
  cand = candidates_of(out)
  n, m = cand.sum(1), out["masked_lm_weights"].sum(1)
  distinct = np.array([len(set(out["masked_lm_positions"][b][:int(m[b])]))
                       for b in range(len(n))])
  expected = n * (1 - (1 - 1 / n) ** m)
  var = np.sum(expected * (1 - expected / n))  # a loose (binomial) bound
  assert abs(distinct.sum() - expected.sum()) < 4 * np.sqrt(var)
  assert (distinct < m).sum() > 100  # repeats do happen
  # Early and late candidate positions are drawn at the same rate.
  counts = np.zeros(cand.shape)
  for b in range(len(n)):
    np.add.at(counts[b], out["masked_lm_positions"][b][:int(m[b])], 1)
  rate = counts / np.maximum(cand, 1) * cand
  share = (m / n)[:, None] * cand
  early, late = np.s_[:, 1:16], np.s_[:, 16:]
  for part in (early, late):
    assert abs(rate[part].sum() / share[part].sum() - 1) < 0.05


@pytest.mark.parametrize("scheme,expect", [
    ("electra", {"mask": 0.85, "random": 0.0, "keep": 0.15}),
    ("bert", {"mask": 0.80, "random": 0.10, "keep": 0.10}),
])
def test_replacement_scheme_shares(scheme, expect):
  out = run(make_batch(batch=512), config(scheme))
  w = out["masked_lm_weights"] > 0
  pos = out["masked_lm_positions"]
  # Positions picked by one slot only: their slot alone decides.
  once = np.zeros_like(w)
  for b in range(len(w)):
    values, counts = np.unique(pos[b][w[b]], return_counts=True)
    once[b] = w[b] & np.isin(pos[b], values[counts == 1])
  shown = np.take_along_axis(out["masked_input_ids"], pos, 1)[once]
  targets = out["masked_lm_ids"][once]
  n = len(targets)
  shares = {"mask": np.mean(shown == MASK),
            "keep": np.mean(shown == targets),
            "random": np.mean((shown != MASK) & (shown != targets))}
  for key, value in expect.items():
    tol = 4 * np.sqrt(max(value, 0.01) * (1 - value) / n) + 0.005
    assert abs(shares[key] - value) < tol, (key, shares[key])


def test_repeated_position_shows_mask_if_any_slot_masks():
  """The original writes [MASK] from every slot that masks and ignores
  the others, so a position picked twice shows [MASK] unless both keep."""
  ids = tf.constant([[CLS, 500, 501, SEP]], tf.int32)
  features = {"input_ids": ids, "input_mask": tf.ones_like(ids),
              "segment_ids": tf.zeros_like(ids)}
  cfg = config(mask_prob=0.5, max_predictions=2)  # 2 slots, 2 candidates
  # u_pos 0.6 -> the 2nd candidate (position 2) for both slots.
  for actions, shows in (([0.1, 0.9], MASK), ([0.9, 0.1], MASK),
                         ([0.9, 0.95], 501)):
    noise = np.zeros((NUM_NOISE, 1, 2), np.float32)
    noise[0] = 0.6
    noise[1] = actions
    out = mask_batch(features, cfg, tf.constant(noise))
    np.testing.assert_array_equal(out["masked_lm_positions"], [[2, 2]])
    np.testing.assert_array_equal(out["masked_lm_ids"], [[501, 501]])
    np.testing.assert_array_equal(out["masked_input_ids"],
                                  [[CLS, 500, shows, SEP]])


def test_scatter_takes_the_first_slot_of_a_repeated_position():
  ids = np.array([[1, 2, 3, 4, 5]], np.int32)
  positions = np.array([[3, 1, 3, 0]], np.int32)
  updates = np.array([[29000, 7, 30000, 9]], np.int32)
  weights = np.array([[1.0, 1.0, 1.0, 0.0]], np.float32)
  out, replaced = scatter_positions(ids, positions, updates, weights,
                                    repeated="first")
  # Not 29000 + 30000 (out of vocabulary), not their mean 29500 (a token
  # no slot sampled, the original's floordiv): the first slot's sample.
  np.testing.assert_array_equal(np.asarray(out), [[1, 7, 3, 29000, 5]])
  np.testing.assert_array_equal(np.asarray(replaced), [[0, 1, 0, 1, 0]])
  out, _ = scatter_positions(ids, positions, updates, weights)
  np.testing.assert_array_equal(np.asarray(out), [[1, 7, 3, 29500, 5]])


def test_repeated_positions_average_as_the_original_does():
  """The default is the original's scatter_update, as it computed it
  (tests/reference/scatter_update.json): floordiv(sum, count) at a
  repeated position; a slot at position 0 is padding (weight 0)."""
  path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "reference", "scatter_update.json")
  with open(path) as f:
    ref = json.load(f)
  positions = np.array(ref["positions"], np.int32)
  out, replaced = scatter_positions(
      np.array(ref["sequence"], np.int32), positions,
      np.array(ref["updates"], np.int32), (positions > 0).astype(np.float32))
  np.testing.assert_array_equal(np.asarray(out), ref["int32"]["output"])
  np.testing.assert_array_equal(np.asarray(replaced),
                                ref["int32"]["updated_mask"])


def test_deterministic_per_seed_and_dynamic_across_seeds():
  features = make_batch()
  a = run(features, config(), seed=(5, 0))
  b = run(features, config(), seed=(5, 0))
  c = run(features, config(), seed=(5, 1))
  np.testing.assert_array_equal(a["masked_input_ids"], b["masked_input_ids"])
  assert not np.array_equal(a["masked_lm_positions"], c["masked_lm_positions"])


def test_row_without_candidates_gets_no_picks():
  features = {"input_ids": tf.constant([[CLS, SEP, 0, 0]], tf.int32),
              "input_mask": tf.constant([[1, 1, 0, 0]], tf.int32),
              "segment_ids": tf.zeros([1, 4], tf.int32)}
  out = run(features, config(max_predictions=3))
  assert out["masked_lm_weights"].sum() == 0
  np.testing.assert_array_equal(out["masked_input_ids"], [[CLS, SEP, 0, 0]])


JAX_MASK = """
import json, sys
import numpy as np
import keras
assert keras.backend.backend() == "jax"
from pretrain.masking import MaskingConfig, mask_batch
data = dict(np.load(sys.argv[1]))
cfg = MaskingConfig(**json.loads(sys.argv[2]))
noise = data.pop("noise")
out = mask_batch(data, cfg, noise)
np.savez(sys.argv[3], **{k: np.asarray(v) for k, v in out.items()})
"""


@pytest.mark.parametrize("scheme", ["electra", "bert"])
def test_jax_backend_masks_identically(tmp_path, scheme):
  """The same noise gives the same masks under KERAS_BACKEND=jax (the
  JAX driver masks inside its jitted step with this code)."""
  features = {k: v.numpy() for k, v in make_batch(batch=16).items()}
  cfg = config(scheme)
  noise = np.random.RandomState(3).uniform(
      size=(NUM_NOISE, 16, cfg.max_predictions)).astype(np.float32)
  ours = mask_batch({k: tf.constant(v) for k, v in features.items()}, cfg,
                    tf.constant(noise))
  np.savez(tmp_path / "in.npz", noise=noise, **features)
  fields = {k: getattr(cfg, k) for k in cfg.__dataclass_fields__}
  subprocess.run([sys.executable, "-c", JAX_MASK, str(tmp_path / "in.npz"),
                  json.dumps(fields), str(tmp_path / "out.npz")], check=True,
                 cwd=ROOT, env=dict(os.environ, KERAS_BACKEND="jax",
                                    JAX_PLATFORMS="cpu"))
  theirs = np.load(tmp_path / "out.npz")
  for key, value in ours.items():
    np.testing.assert_array_equal(np.asarray(value), theirs[key], key)
