"""Layer-wise learning-rate decay as the ELECTRA release computes it."""

import contextlib
import types

import keras
import numpy as np
import pytest

from finetune.optimization import create_optimizer
from finetune.optimization import depth_of


def config(**kw):
  values = dict(optimizer="adam_weight_decay", learning_rate=1e-3,
                layerwise_lr_decay=0.8,
                warmup_proportion=0.0, weight_decay_rate=0.0, adam_beta1=0.9,
                adam_beta2=0.999, adam_epsilon=1e-6, warmup_scales_decay=True)
  values.update(kw)
  return types.SimpleNamespace(**values)


def variable(path, size):
  """A zero variable whose Keras path is `path`."""
  *scopes, name = path.split("/")
  with contextlib.ExitStack() as stack:
    for scope in scopes:
      stack.enter_context(keras.name_scope(scope))
    return keras.Variable(np.zeros(size, np.float32), name=name)


def test_depths_follow_the_release():
  n = 12
  assert depth_of("finetuning/encoder/embeddings/word_embeddings/embeddings",
                  n) == 0
  assert depth_of("finetuning/encoder/embeddings_project/kernel", n) == 0
  assert depth_of("finetuning/encoder/layer_0/attention/query/kernel", n) == 1
  assert depth_of("finetuning/encoder/layer_11/output/bias", n) == 12
  assert depth_of("finetuning/rte_head/output/kernel", n) == 14


# The first update per unit of lr: Keras' bias-corrected Adam g / |g| = 1;
# the original's (1 - beta1) / sqrt(1 - beta2) = 0.1 / sqrt(0.001).
FIRST_STEP = {"adamw": 1.0, "adam_weight_decay": 0.1 / np.sqrt(1e-3)}


@pytest.mark.parametrize("kind", sorted(FIRST_STEP))
def test_first_adam_step_moves_each_variable_by_its_layer_lr(kind):
  """The first update is a fixed multiple of the learning rate, so the
  step of each variable reveals its rate: lr * 0.8^(n + 2 - d)."""
  n, lr, decay = 3, 1e-3, 0.8
  names = ["encoder/embeddings/w", "encoder/layer_0/w", "encoder/layer_2/w",
           "head/w"]
  variables = [variable(name, 4) for name in names]
  optimizer = create_optimizer(config(optimizer=kind, learning_rate=lr,
                                      layerwise_lr_decay=decay),
                               variables, n, num_train_steps=100)
  optimizer.apply([np.ones(4, np.float32)] * len(variables), variables)
  steps = [float(-np.asarray(v)[0]) for v in variables]
  depths = [0, 1, 3, n + 2]
  expected = [FIRST_STEP[kind] * lr * decay ** (n + 2 - d) for d in depths]
  np.testing.assert_allclose(steps, expected, rtol=1e-3)


def test_shared_layer_takes_the_top_layers_rate():
  n, lr, decay = 4, 1e-3, 0.5
  shared = variable("encoder/layer_0/w", 2)
  optimizer = create_optimizer(config(learning_rate=lr,
                                      layerwise_lr_decay=decay), [shared], n,
                               num_train_steps=100, share_layers=True)
  optimizer.apply([np.ones(2, np.float32)], [shared])
  np.testing.assert_allclose(-np.asarray(shared)[0],
                             FIRST_STEP["adam_weight_decay"] * lr * decay ** 2,
                             rtol=1e-3)


def test_weight_decay_takes_each_layers_rate_and_skips_layernorm_bias():
  """With zero gradients Adam does not move a variable, so one step shows
  the decoupled decay alone: w (1 - wd x lr x multiplier), and none for
  LayerNorm parameters and biases."""
  n, lr, decay, wd = 2, 1e-2, 0.5, 0.1
  names = ["encoder/layer_0/dense/kernel", "encoder/layer_0/dense/bias",
           "encoder/layer_1/layernorm/gamma", "head/kernel"]
  variables = [variable(name, 3) for name in names]
  for v in variables:
    v.assign(np.full(3, 2.0, np.float32))
  optimizer = create_optimizer(config(learning_rate=lr,
                                      layerwise_lr_decay=decay,
                                      weight_decay_rate=wd),
                               variables, n, num_train_steps=100)
  optimizer.apply([np.zeros(3, np.float32)] * len(variables), variables)
  after = [float(np.asarray(v)[0]) for v in variables]
  layer0 = lr * decay ** (n + 2 - 1)
  np.testing.assert_allclose(after, [2.0 * (1 - wd * layer0), 2.0, 2.0,
                                     2.0 * (1 - wd * lr)], rtol=1e-6)


@pytest.mark.parametrize("scales_decay", [True, False])
def test_warmup_schedule_as_the_original_or_to_the_peak(scales_decay):
  """The original release (model/optimization.py): polynomial decay of
  the peak lr, times min(1, step / warmup); or (false) a linear rise to
  the peak, then the decay."""
  from training.optimization import WarmupPolynomialDecay
  lr, total, warmup, power = 1e-3, 1000, 100, 0.5
  schedule = WarmupPolynomialDecay(lr, total, warmup, power,
                                   warmup_scales_decay=scales_decay)
  steps = np.arange(0, 1201)
  got = np.array([float(schedule(s)) for s in steps])
  decayed = lr * (1 - np.minimum(steps, total) / total) ** power
  if scales_decay:
    want = decayed * np.minimum(1.0, steps / warmup)
  else:
    want = np.where(steps < warmup, lr * steps / warmup, decayed)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-12)
