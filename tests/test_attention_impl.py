"""model hparam attention_impl: keras.ops.dot_product_attention ("auto",
"fused") gives the einsum path's outputs (float32, 1e-6) on
both backends, padding and causal masks, eval and training without
attention dropout; with dropout the training step is the einsum path's."""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from model.config import get_model_config
from model.config import ATTENTION_IMPLS
from util.errors import UserError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def largest_differences(dropout=0.0):
  """{case: max |impl - einsum|} over outputs and input gradients."""
  import keras  # pylint: disable=g-import-not-at-top
  from keras import ops  # pylint: disable=g-import-not-at-top
  from model.encoder import SelfAttention  # pylint: disable=g-import-not-at-top
  from model.encoder import attention_mask  # pylint: disable=g-import-not-at-top
  config = get_model_config("tiny", 50, {
      "hidden_size": 16, "num_attention_heads": 2,
      "attention_probs_dropout_prob": dropout})
  rng = np.random.RandomState(0)
  x = rng.normal(size=(3, 10, 16)).astype(np.float32)
  input_mask = np.ones((3, 10), np.int32)
  input_mask[1, 6:] = 0
  input_mask[2, 3:] = 0
  layers = {}
  for impl in ATTENTION_IMPLS:
    keras.utils.set_random_seed(0)  # the same weights for each
    layers[impl] = SelfAttention(dataclasses.replace(config,
                                                     attention_impl=impl))
    layers[impl].build(x.shape)
  out = {}
  for causal in (None, "l2r"):
    mask = attention_mask(ops.convert_to_tensor(input_mask), causal)
    for training in (False, True):
      results = {impl: np.asarray(layer(x, mask, training=training))
                 for impl, layer in layers.items()}
      for impl in ATTENTION_IMPLS:
        out[f"{impl} causal={causal} training={training}"] = float(
            np.abs(results[impl] - results["einsum"]).max())
  return out


JAX = """
import json
from tests.test_attention_impl import largest_differences
print(json.dumps(largest_differences()))
"""


def test_fused_equals_einsum_on_tensorflow():
  for case, diff in largest_differences().items():
    assert diff <= 1e-6, case


def test_fused_equals_einsum_on_jax():
  env = dict(os.environ, PYTHONPATH=ROOT, KERAS_BACKEND="jax",
             JAX_PLATFORMS="cpu")
  done = subprocess.run([sys.executable, "-c", JAX], capture_output=True,
                        text=True, timeout=300, cwd=ROOT, env=env)
  assert done.returncode == 0, done.stderr[-3000:]
  diffs = json.loads(done.stdout.strip().splitlines()[-1])
  assert len(diffs) == 3 * 2 * 2
  for case, diff in diffs.items():
    assert diff <= 1e-6, case


def test_with_attention_dropout_training_is_the_einsum_path():
  """Dropout on the probabilities: every impl takes the einsum path in
  training (same weights, same seed: the same dropout mask)."""
  diffs = largest_differences(dropout=0.5)
  for case, diff in diffs.items():
    assert diff <= 1e-6, case


def test_an_unknown_impl_is_named():
  with pytest.raises(UserError, match="attention_impl"):
    get_model_config("tiny", 50, {"attention_impl": "flash"})
