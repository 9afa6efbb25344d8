"""training/step.ReplicaUpdate under float16's loss scaling: the gradients
are clipped and reported unscaled, exactly as a float32 step's (issue 50)."""

import keras
import numpy as np
import tensorflow as tf

from configure_pretraining import PretrainingConfig
from training import optimization
from training.step import ReplicaUpdate

RNG = np.random.default_rng(0)
INITIAL = [RNG.standard_normal((4, 3)).astype(np.float32),
           RNG.standard_normal(3).astype(np.float32)]
# Norms 5 and 0.5: the first step clips, the second does not.
GRADS = [[5 * g / np.sqrt(sum((x ** 2).sum() for x in gs)) for g in gs]
         for gs in ([RNG.standard_normal(v.shape).astype(np.float32)
                     for v in INITIAL] for _ in range(2))]
GRADS[1] = [g / 10 for g in GRADS[1]]


def _update(loss_scaled):
  variables = [keras.Variable(v, name=f"w{i}") for i, v in enumerate(INITIAL)]
  config = PretrainingConfig(learning_rate=1e-2, num_warmup_steps=0,
                             num_train_steps=10)
  optimizer = optimization.create_optimizer(config)
  optimization.build_optimizer(optimizer, variables)
  if loss_scaled:
    optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    optimizer.build(variables)
  return variables, optimizer, ReplicaUpdate(optimizer, 1, clip_norm=1.0)


def test_float16_clips_the_unscaled_gradients_as_float32_does():
  plain, _, plain_update = _update(False)
  scaled, optimizer, scaled_update = _update(True)
  scale = float(optimizer.dynamic_scale)
  assert scale > 1000  # Keras' initial 2^15: the gradients arrive scaled
  for grads in GRADS:
    out = plain_update.apply([tf.constant(g) for g in grads], plain)
    out16 = scaled_update.apply([tf.constant(g * scale) for g in grads],
                                scaled)
    # The logged norm is the gradient's, not the scaled one's.
    np.testing.assert_allclose(float(out16["grad_norm"]),
                               float(out["grad_norm"]), rtol=1e-6)
  np.testing.assert_allclose(float(out["grad_norm"]), 0.5, rtol=1e-6)
  for a, b, start in zip(plain, scaled, INITIAL):
    assert np.abs(np.asarray(a) - start).max() > 1e-3  # both moved
    np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=0,
                               atol=1e-7)


def test_float16_skips_a_non_finite_step_and_lowers_its_scale():
  scaled, optimizer, update = _update(True)
  scale = float(optimizer.dynamic_scale)
  grads = [tf.constant(g) for g in GRADS[0]]
  grads[0] = tf.tensor_scatter_nd_update(grads[0], [[0, 0]], [np.inf])
  out = update.apply(grads, scaled)
  assert float(out["finite"]) == 0.0
  assert float(optimizer.dynamic_scale) == scale / 2
  for v, start in zip(scaled, INITIAL):
    np.testing.assert_array_equal(np.asarray(v), start)
