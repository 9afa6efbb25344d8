"""The transformer core: presets, masks, sharing, heads."""

import dataclasses

import keras
import numpy as np
import pytest
from keras import ops

from util.config import apply_overrides
from model import Embeddings
from model import Encoder
from model.config import get_model_config
from model.config import scale_config
from model.encoder import LayerNorm
from pretrain.objectives import build_model
from tests.numpy_reference import np_gelu
from tests.numpy_reference import np_layer_norm
from tests.numpy_reference import np_masked_lm_loss
from tests.tiny_models import electra_hparams
from util.errors import UserError


def count(variables):
  return int(sum(np.prod(v.shape) for v in variables))


def micro_config(**kw):
  values = dict(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                num_attention_heads=2, intermediate_size=32, embedding_size=8,
                hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  values.update(kw)
  return get_model_config("tiny", 50, {k: v for k, v in values.items()
                                       if k != "vocab_size"})


@pytest.mark.parametrize("size,millions", [("small", 14), ("base", 110)])
def test_presets_match_paper_parameter_counts(size, millions):
  """Table 5.1 shapes give the paper's sizes (Table 1: 14M small, 110M base)."""
  config = get_model_config(size, 30522)
  encoder = Encoder(config)
  encoder.build((None, None))
  assert abs(count(encoder.weights) / 1e6 - millions) / millions < 0.05


def test_generator_multipliers():
  small = get_model_config("small", 30522)
  gen = scale_config(small, 0.25)
  assert (gen.hidden_size, gen.intermediate_size, gen.num_attention_heads,
          gen.num_hidden_layers) == (64, 256, 1, 12)
  assert gen.embedding_size == small.embedding_size
  base_gen = scale_config(get_model_config("base", 30522), 1 / 3)
  assert (base_gen.hidden_size, base_gen.num_attention_heads) == (256, 4)
  half_layers = scale_config(small, 0.5, ffn=1.0, heads=0.5, layers=0.5)
  assert (half_layers.hidden_size, half_layers.intermediate_size,
          half_layers.num_attention_heads,
          half_layers.num_hidden_layers) == (128, 1024, 2, 6)
  with pytest.raises(UserError, match="generator_hidden_size"):
    scale_config(small, 1.5)


def test_bad_shapes_are_user_errors():
  with pytest.raises(UserError, match="divisible"):
    get_model_config("small", 100, {"num_attention_heads": 3})
  with pytest.raises(UserError, match="unknown key 'hiden_size'"):
    get_model_config("small", 100, {"hiden_size": 3})
  with pytest.raises(UserError, match="unknown model_size"):
    get_model_config("huge", 100)


def test_factorized_embeddings_project_only_when_sizes_differ():
  assert Encoder(micro_config()).embeddings_project is not None
  assert Encoder(micro_config(embedding_size=16)).embeddings_project is None


def run_encoder(encoder, ids, mask):
  return np.asarray(encoder(ids, mask, np.zeros_like(ids), training=False))


def test_padding_is_ignored():
  encoder = Encoder(micro_config())
  rng = np.random.RandomState(0)
  ids = rng.randint(1, 50, size=(2, 10)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[:, 7:] = 0
  out1 = run_encoder(encoder, ids, mask)
  ids2 = ids.copy()
  ids2[:, 7:] = rng.randint(1, 50, size=(2, 3))
  out2 = run_encoder(encoder, ids2, mask)
  np.testing.assert_allclose(out1[:, :7], out2[:, :7], atol=1e-5)


@pytest.mark.parametrize("direction", ["l2r", "r2l"])
def test_causal_masks(direction):
  config = micro_config()
  encoder = Encoder(config, causal=direction)
  rng = np.random.RandomState(1)
  ids = rng.randint(1, 50, size=(1, 12)).astype(np.int32)
  mask = np.ones_like(ids)
  out1 = run_encoder(encoder, ids, mask)
  ids2 = ids.copy()
  t = 6
  if direction == "l2r":  # change the future: the past must not move
    ids2[:, t + 1:] = (ids2[:, t + 1:] + 7) % 50
    same, moved = slice(0, t + 1), slice(t + 1, None)
  else:
    ids2[:, :t] = (ids2[:, :t] + 7) % 50
    same, moved = slice(t, None), slice(0, t)
  out2 = run_encoder(encoder, ids2, mask)
  np.testing.assert_allclose(out1[:, same], out2[:, same], atol=1e-5)
  assert np.abs(out1[:, moved] - out2[:, moved]).max() > 1e-3


def test_shared_embeddings_are_one_copy():
  config = micro_config()
  shared = Embeddings(config)
  a, b = Encoder(config, shared), Encoder(scale_config(config, 0.5), shared)
  ids = np.ones((1, 4), np.int32)
  a(ids), b(ids)
  assert a.embeddings.token_table is b.embeddings.token_table


def test_electra_model_variables_and_vocab_projection_at_masked_only():
  model = build_model(electra_hparams())
  model.build_variables()
  paths = [v.path for v in model.trainable_variables]
  assert len(paths) == len(set(paths))
  assert sum("word_embeddings" in p for p in paths) == 1  # shared table
  features = model.dummy_features(2)
  out = model(features, training=False)
  # [batch, max_predictions, vocab]: logits only at the masked positions.
  assert tuple(np.shape(
      out["mlm_nll"])) == (2, model.config.max_predictions_per_seq)
  assert tuple(np.shape(
      out["sampled_ids"])) == (2, model.config.max_predictions_per_seq)


def test_untied_generator_embeddings_get_their_own_table():
  model = build_model(apply_overrides(  # the original release's switch
      electra_hparams(), {"untied_generator_embeddings": True}))
  model.build_variables()
  paths = [v.path for v in model.trainable_variables]
  assert sum("word_embeddings" in p for p in paths) == 2


def test_sample_equal_to_original_counts_as_real():
  """Labels are 1 exactly where the discriminator input differs."""
  model = build_model(electra_hparams())
  model.build_variables()
  rng = np.random.RandomState(0)
  features = model.dummy_features(4)
  ids = rng.randint(5, 60, size=(4, 16)).astype(np.int32)
  positions = np.tile(np.arange(1, 3), (4, 1)).astype(np.int32)
  features.update(input_ids=ids, masked_input_ids=ids.copy(),
                  masked_lm_positions=np.pad(positions, [(0, 0), (0, 0)]))
  p = model.config.max_predictions_per_seq
  features["masked_lm_positions"] = np.zeros((4, p), np.int32)
  features["masked_lm_positions"][:, :2] = positions
  features["masked_lm_weights"] = np.zeros((4, p), np.float32)
  features["masked_lm_weights"][:, :2] = 1
  features["masked_lm_ids"] = np.take_along_axis(
      ids, features["masked_lm_positions"], 1)
  out = {k: np.asarray(v) for k, v in model(features, training=True).items()}
  fake = ids.copy()
  for b in range(4):
    fake[b, positions[b]] = out["sampled_ids"][b, :2]
  np.testing.assert_array_equal(out["disc_labels"], (fake != ids))


def test_encoder_matches_numpy_reference():
  """Embeddings -> projection -> post-LN layers, recomputed in NumPy."""
  config = micro_config(num_hidden_layers=1)
  encoder = Encoder(config)
  rng = np.random.RandomState(3)
  ids = rng.randint(0, 50, size=(2, 6)).astype(np.int32)
  segments = np.array([[0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0]], np.int32)
  mask = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], np.int32)
  got = np.asarray(encoder(ids, mask, segments, training=False))
  w = {v.path.split("/", 1)[1]: np.asarray(v) for v in encoder.weights}
  eps = config.layer_norm_eps

  x = (w["embeddings/word_embeddings/embeddings"][ids] +
       w["embeddings/position_embeddings/embeddings"][:6][None] +
       w["embeddings/token_type_embeddings/embeddings"][segments])
  x = np_layer_norm(x, w["embeddings/LayerNorm/gamma"],
                    w["embeddings/LayerNorm/beta"], eps)
  x = x @ w["embeddings_project/kernel"] + w["embeddings_project/bias"]
  p = "layer_0/"
  dense = lambda h, name: h @ w[p + name + "/kernel"] + w[p + name + "/bias"
                                                         ]  # noqa
  heads, size = config.num_attention_heads, config.head_size
  split = lambda h: h.reshape(2, 6, heads, size).transpose(0, 2, 1, 3)  # noqa
  q, k, v = (split(dense(x, "attention/" + n)) for n in ("query", "key",
                                                        "value"))
  scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(size)
  scores = np.where(mask[:, None, None, :] > 0, scores, -1e9)
  probs = np.exp(scores - scores.max(-1, keepdims=True))
  probs /= probs.sum(-1, keepdims=True)
  context = (probs @ v).transpose(0, 2, 1, 3).reshape(2, 6, -1)
  x = np_layer_norm(x + dense(context, "attention_output"),
                    w[p + "attention_LayerNorm/gamma"],
                    w[p + "attention_LayerNorm/beta"], eps)
  h = dense(np_gelu(dense(x, "intermediate")), "output")
  expected = np_layer_norm(x + h, w[p + "output_LayerNorm/gamma"],
                           w[p + "output_LayerNorm/beta"], eps)
  np.testing.assert_allclose(got, expected, atol=1e-4)

  # The dropout path (explicit attention) agrees when dropout is off.
  layer = encoder.transformer_layers[0]
  layer.attention.config = dataclasses.replace(
      config, attention_probs_dropout_prob=1e-9)
  np.testing.assert_allclose(
      np.asarray(encoder(ids, mask, segments, training=True)), expected,
      atol=1e-4)


def test_masked_lm_objective_matches_numpy_on_its_logits():
  model = build_model(electra_hparams(objective="mlm"))
  model.build_variables()
  assert model.config.mask_scheme == "bert"
  rng = np.random.RandomState(4)
  features = model.dummy_features(2)
  features["input_ids"] = rng.randint(5, 60, size=(2, 16)).astype(np.int32)
  features["masked_input_ids"] = features["input_ids"].copy()
  features["masked_lm_positions"][:, :2] = [[3, 7], [1, 2]]
  features["masked_lm_weights"][:, :2] = 1
  features["masked_input_ids"][0, [3, 7]] = 4
  features["masked_lm_ids"] = np.take_along_axis(
      features["input_ids"], features["masked_lm_positions"], 1)
  out = model(features, training=False)
  hidden = np.asarray(model.encoder(features["masked_input_ids"],
                                    features["input_mask"],
                                    features["segment_ids"]))
  picked = np.take_along_axis(
      hidden, features["masked_lm_positions"][..., None], 1)
  logits = np.asarray(model.mlm_predictions(
      picked, model.encoder.embeddings.token_table))
  expected = np_masked_lm_loss(logits, features["masked_lm_ids"],
                               features["masked_lm_weights"])
  np.testing.assert_allclose(float(out["loss"]), expected, rtol=1e-5)


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-5),
                                       ("mixed_bfloat16", 2e-2)])
def test_layer_norm_matches_keras(dtype, tol):
  """model.encoder.LayerNorm against Keras' LayerNormalization (the peer):
  the same variables, outputs and gradients (float32 inside in both)."""
  rng = np.random.default_rng(0)
  x = (rng.normal(size=(3, 5, 16)) * 3 + 1).astype(np.float32)
  weights = [rng.uniform(0.5, 1.5, 16).astype(np.float32),
             rng.normal(size=16).astype(np.float32)]
  ours = LayerNorm(epsilon=1e-12, dtype=dtype, name="ln")
  peer = keras.layers.LayerNormalization(epsilon=1e-12, dtype=dtype,
                                         name="ln")
  for layer in (ours, peer):
    layer.build((None, None, 16))
    layer.set_weights(weights)
  assert [v.path for v in ours.weights] == [v.path for v in peer.weights]
  for layer in (ours, peer):
    assert keras.backend.standardize_dtype(layer(x).dtype) == (
        "bfloat16" if dtype == "mixed_bfloat16" else "float32")

  def outputs_and_grads(layer):
    import tensorflow as tf
    tensor = tf.constant(x)
    with tf.GradientTape() as tape:
      tape.watch(tensor)
      y = ops.cast(layer(tensor), "float32")
      loss = ops.sum(y * ops.sin(y))
    return [np.asarray(y)] + [np.asarray(g, np.float32) for g in
                              tape.gradient(loss, [tensor] + layer.weights)]

  for got, want in zip(outputs_and_grads(ours), outputs_and_grads(peer)):
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(
        want).max())
  np.testing.assert_allclose(
      np.asarray(ops.cast(ours(x), "float32")),
      np_layer_norm(x.astype(np.float64), *weights, 1e-12),
      rtol=tol, atol=tol * 3)
