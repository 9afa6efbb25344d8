"""ELECTRA losses against an independent NumPy reference."""

import numpy as np
import pytest

from pretrain import losses
from tests.numpy_reference import np_log_softmax
from tests.numpy_reference import np_masked_lm_loss


def np_disc_loss(logits, labels, weights):
  p = 1 / (1 + np.exp(-logits.astype(np.float64)))
  ce = -(labels * np.log(p) + (1 - labels) * np.log(1 - p))
  return (weights * ce).sum() / (weights.sum() + 1e-6)


def test_masked_lm_loss_matches_numpy():
  rng = np.random.RandomState(0)
  logits = rng.randn(3, 5, 11).astype(np.float32) * 3
  labels = rng.randint(0, 11, size=(3, 5))
  weights = (rng.rand(3, 5) > 0.3).astype(np.float32)
  loss, _ = losses.masked_lm_loss(logits, labels, weights)
  np.testing.assert_allclose(float(loss),
                             np_masked_lm_loss(logits, labels, weights),
                             rtol=1e-5)


def test_log_probs_at_ids_match_numpy():
  """Training's fused kernel and inference's gather give NumPy's values."""
  rng = np.random.RandomState(1)
  logits = (rng.randn(4, 3, 50) * 4).astype(np.float32)
  ids = rng.randint(0, 50, size=(4, 3))
  want = np.take_along_axis(np_log_softmax(logits.astype(np.float64)),
                            ids[..., None], -1)[..., 0]
  for fn in (losses.log_softmax_at, losses.log_prob_at):
    np.testing.assert_allclose(np.asarray(fn(logits, ids)), want,
                               rtol=1e-5, atol=1e-5)


def test_masked_lm_loss_gradient_matches_numpy():
  """The fused sparse cross-entropy's gradient: w (softmax - onehot) / sum w,
  for bf16 logits too (the generator's, under mixed precision)."""
  import tensorflow as tf
  rng = np.random.RandomState(3)
  logits = rng.randn(2, 4, 13).astype(np.float32) * 3
  labels = rng.randint(0, 13, size=(2, 4))
  weights = (rng.rand(2, 4) > 0.3).astype(np.float32)
  for dtype, tol in ((tf.float32, 1e-6), (tf.bfloat16, 2e-3)):
    x = tf.cast(tf.constant(logits), dtype)
    probs = np.exp(np_log_softmax(tf.cast(x, tf.float64).numpy()))
    expected = (probs - np.eye(13)[labels]) * weights[..., None] / (
        weights.sum() + 1e-6)
    with tf.GradientTape() as tape:
      tape.watch(x)
      loss, _ = losses.masked_lm_loss(x, labels, weights)
    grad = tf.cast(tape.gradient(loss, x), tf.float32).numpy()
    np.testing.assert_allclose(grad, expected, atol=tol)


def test_replaced_token_detection_loss_matches_numpy():
  rng = np.random.RandomState(1)
  logits = rng.randn(4, 9).astype(np.float32) * 4
  labels = (rng.rand(4, 9) > 0.8).astype(np.float32)
  weights = (rng.rand(4, 9) > 0.2).astype(np.float32)
  loss, _ = losses.replaced_token_detection_loss(logits, labels, weights)
  np.testing.assert_allclose(float(loss),
                             np_disc_loss(logits, labels, weights), rtol=1e-5)


def test_sigmoid_cross_entropy_is_stable_for_large_logits():
  logits = np.array([80.0, -80.0, 80.0, -80.0], np.float32)
  labels = np.array([1.0, 0.0, 0.0, 1.0], np.float32)
  out = np.asarray(losses.sigmoid_cross_entropy(logits, labels))
  np.testing.assert_allclose(out, [0.0, 0.0, 80.0, 80.0], atol=1e-5)


def test_total_electra_loss_on_fixed_logits():
  """gen_weight * L_MLM + disc_weight * L_Disc, as in ELECTRA section 2."""
  rng = np.random.RandomState(2)
  mlm_logits = rng.randn(2, 3, 7).astype(np.float32)
  mlm_labels = rng.randint(0, 7, size=(2, 3))
  mlm_weights = np.array([[1, 1, 0], [1, 0, 0]], np.float32)
  disc_logits = rng.randn(2, 6).astype(np.float32)
  disc_labels = np.array([[0, 1, 0, 0, 1, 0], [0, 0, 0, 1, 0, 0]], np.float32)
  input_mask = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], np.float32)
  mlm, _ = losses.masked_lm_loss(mlm_logits, mlm_labels, mlm_weights)
  disc, _ = losses.replaced_token_detection_loss(disc_logits, disc_labels,
                                                 input_mask)
  total = 1.0 * float(mlm) + 50.0 * float(disc)
  expected = (np_masked_lm_loss(mlm_logits, mlm_labels, mlm_weights) +
              50.0 * np_disc_loss(disc_logits, disc_labels, input_mask))
  np.testing.assert_allclose(total, expected, rtol=1e-5)


def test_detection_skill_is_zero_at_the_base_rate_and_one_when_perfect():
  rng = np.random.default_rng(0)
  labels = (rng.random((4, 50)) < 0.15).astype(np.float32)
  weights = np.ones_like(labels)
  weights[:, 45:] = 0  # padding does not count
  rate = labels[:, :45].mean()
  entropy = -(rate * np.log(rate) + (1 - rate) * np.log(1 - rate))

  def skill(logits):
    _, token_losses = losses.replaced_token_detection_loss(logits, labels,
                                                           weights)
    return float(losses.detection_skill(token_losses, labels, weights))

  # The constant logit of the base rate: it knows nothing else.
  base = np.full_like(labels, np.log(rate / (1 - rate)))
  assert skill(base) == pytest.approx(0.0, abs=1e-5)
  assert skill(30 * (2 * labels - 1)) == pytest.approx(1.0, abs=1e-5)
  # Any logits: 1 - weighted mean BCE / H(rate), from NumPy.
  logits = rng.normal(size=labels.shape).astype(np.float32)
  bce = np.logaddexp(0, logits) - logits * labels
  expected = 1 - (bce * weights).sum() / weights.sum() / entropy
  assert skill(logits) == pytest.approx(expected, rel=1e-5)
