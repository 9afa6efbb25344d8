"""The same model code runs under KERAS_BACKEND=jax with the same outputs."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np

from tests.test_model import electra_hparams
from pretrain.objectives import build_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

JAX_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import keras
    assert keras.backend.backend() == "jax", keras.backend.backend()
    from configure_pretraining import PretrainingConfig
    from pretrain.objectives import build_model
    kwargs, weights_path, features_path, out_path = sys.argv[1:5]
    hparams = PretrainingConfig(**json.loads(kwargs))
    hparams.validate()
    model = build_model(hparams)
    model.build_variables()
    model.load_weights(weights_path)
    features = dict(np.load(features_path))
    out = model(features, training=False)
    hidden = model.discriminator(features["input_ids"], features["input_mask"],
                                 features["segment_ids"], training=False)
    np.savez(out_path, hidden=np.asarray(hidden),
             mlm_nll=np.asarray(out["mlm_nll"]),
             disc_logits=np.asarray(out["disc_logits"]),
             loss=np.asarray(out["loss"]))
""")


def test_forward_pass_under_jax_matches_tensorflow(tmp_path):
  kwargs = dict(data_dir="/tmp/unused", model_name="m", model_size="tiny",
                vocab_size=60, max_seq_length=16,
                model_hparam_overrides=dict(hidden_size=16,
                                            intermediate_size=32,
                                            embedding_size=8,
                                            num_attention_heads=2))
  hparams = electra_hparams()
  model = build_model(hparams)
  model.build_variables()
  weights = str(tmp_path / "model.weights.h5")
  model.save_weights(weights)

  rng = np.random.RandomState(0)
  features = model.dummy_features(3)
  features["input_ids"] = rng.randint(5, 60, size=(3, 16)).astype(np.int32)
  features["input_mask"][2, 10:] = 0
  features["input_ids"][2, 10:] = 0
  features["masked_input_ids"] = features["input_ids"].copy()
  features["masked_input_ids"][:, 2] = 3
  features["masked_lm_positions"][:, 0] = 2
  features["masked_lm_weights"][:, 0] = 1
  features["masked_lm_ids"][:, 0] = features["input_ids"][:, 2]
  features_path = str(tmp_path / "features.npz")
  np.savez(features_path, **features)

  out_path = str(tmp_path / "jax_out.npz")
  env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu",
             PYTHONPATH=ROOT)
  result = subprocess.run(
      [sys.executable, "-c", JAX_SCRIPT, json.dumps(kwargs), weights,
       features_path, out_path], env=env, capture_output=True, text=True,
      timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  jax_out = np.load(out_path)

  out = model(features, training=False)
  hidden = model.discriminator(features["input_ids"], features["input_mask"],
                               features["segment_ids"], training=False)
  np.testing.assert_allclose(jax_out["hidden"], np.asarray(hidden),
                             atol=1e-4)
  np.testing.assert_allclose(jax_out["mlm_nll"], np.asarray(out["mlm_nll"]),
                             atol=1e-4)
  # Discriminator logits differ only through the (random) generator samples,
  # so compare the deterministic parts and that a finite loss came out.
  assert np.isfinite(jax_out["loss"])
