"""The same model code runs under KERAS_BACKEND=jax with the same outputs,
for every objective and model variant."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from pretrain.objectives import build_model
from tests.tiny_models import electra_hparams

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A near-zero temperature makes every sampler pick the argmax on either
# backend, so whole losses (not only the generator's) can be compared.
ARGMAX = dict(temperature=1e-6)
VARIANTS = {
    "mlm": dict(objective="mlm"),
    "electra": dict(objective="electra"),
    "electra_15": dict(objective="electra_15"),
    "replace_mlm": dict(objective="replace_mlm"),
    "all_tokens_mlm": dict(objective="all_tokens_mlm"),
    "electric": dict(objective="electric"),
    "script": dict(objective="script"),
    "electra_tt": dict(two_tower_generator=True),
    "gdes": dict(weight_sharing="gdes"),
    "share_all": dict(weight_sharing="all", generator_hidden_size=1.0),
    "adversarial": dict(training_algorithm="adversarial"),
    "lite": dict(cross_layer_sharing=True),
    "unigram": dict(unigram_generator=True),
}


def token_counts(kwargs):
  """A unigram generator's counts (vocab 60; ids 0-4 special): skewed."""
  return (np.arange(60, 0, -1) ** 2 if kwargs.get("unigram_generator")
          else None)

JAX_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import keras
    assert keras.backend.backend() == "jax", keras.backend.backend()
    from tests.tiny_models import electra_hparams
    from tests.test_jax_backend import token_counts
    from pretrain.objectives import build_model
    jobs, features_path = json.loads(sys.argv[1]), sys.argv[2]
    features = dict(np.load(features_path))
    for name, (kwargs, weights_path, out_path) in jobs.items():
      model = build_model(electra_hparams(**kwargs), token_counts(kwargs),
                          range(5))
      model.build_variables()
      model.load_weights(weights_path)
      out = model(features, training=False)
      np.savez(out_path, **{k: np.asarray(v) for k, v in out.items()})
""")


def features_for(model):
  rng = np.random.RandomState(0)
  features = model.dummy_features(3)
  features["input_ids"] = rng.randint(5, 60, size=(3, 16)).astype(np.int32)
  features["input_mask"][2, 10:] = 0
  features["input_ids"][2, 10:] = 0
  features["scoring_mask"] = features["input_mask"].astype(np.float32)
  features["masked_input_ids"] = features["input_ids"].copy()
  for slot, position in enumerate((2, 5)):
    features["masked_input_ids"][:, position] = 3
    features["masked_lm_positions"][:, slot] = position
    features["masked_lm_weights"][:, slot] = 1
    features["masked_lm_ids"][:, slot] = features["input_ids"][:, position]
  return features


@pytest.fixture(scope="module")
def jax_and_tf_outputs(tmp_path_factory):
  """Each variant's outputs from TF (here) and JAX (one subprocess)."""
  tmp = tmp_path_factory.mktemp("jax")
  jobs, tf_outputs, features = {}, {}, None
  for name, kwargs in VARIANTS.items():
    kwargs = dict(kwargs, **ARGMAX)
    model = build_model(electra_hparams(**kwargs), token_counts(kwargs),
                        range(5))
    model.build_variables()
    features = features if features is not None else features_for(model)
    weights = str(tmp / f"{name}.weights.h5")
    model.save_weights(weights)
    out = model(features, training=False)
    tf_outputs[name] = {k: np.asarray(v) for k, v in out.items()}
    jobs[name] = (kwargs, weights, str(tmp / f"{name}_jax.npz"))
  features_path = str(tmp / "features.npz")
  np.savez(features_path, **features)
  env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu",
             PYTHONPATH=ROOT)
  result = subprocess.run(
      [sys.executable, "-c", JAX_SCRIPT, json.dumps(jobs), features_path],
      env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
  assert result.returncode == 0, result.stderr[-3000:]
  return {name: (tf_outputs[name], dict(np.load(job[2])))
          for name, job in jobs.items()}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_forward_pass_under_jax_matches_tensorflow(jax_and_tf_outputs, name):
  tf_out, jax_out = jax_and_tf_outputs[name]
  losses = [k for k in tf_out if k == "loss" or k.endswith("_loss")]
  assert losses
  for key in losses:
    assert np.isfinite(jax_out[key]), key
    np.testing.assert_allclose(jax_out[key], tf_out[key], rtol=1e-4,
                               atol=1e-4, err_msg=key)
  # Per-token outputs that do not depend on samples, where they exist.
  for key in ("mlm_nll", "cloze_nll", "pll_tokens"):
    if key in tf_out:
      np.testing.assert_allclose(jax_out[key], tf_out[key], atol=1e-4,
                                 err_msg=key)
