"""dense_init: the layers the original release builds with tf.layers.dense
and no initializer (embeddings_project, the discriminator's output layer,
the fine-tuning heads) get TF1's default, glorot_uniform, under
"original"; every other kernel keeps initializer_range's truncated normal."""

import numpy as np
import pytest

from finetune.heads import LinearHead
from model import Encoder
from model.config import TransformerConfig
from model.heads import DiscriminatorHead
from util.errors import UserError

SIZES = dict(vocab_size=50, hidden_size=256, num_hidden_layers=1,
             num_attention_heads=4, intermediate_size=256,
             embedding_size=128)
# TruncatedNormal(0.02) cut at 2 sigma: std 0.02 x 0.8796.
TRUNCATED_STD = 0.02 * 0.8796


def glorot_std(fan_in, fan_out):
  return np.sqrt(2.0 / (fan_in + fan_out))  # uniform(+-sqrt(6/(in+out)))


def kernels(dense_init):
  config = TransformerConfig(dense_init=dense_init, **SIZES)
  encoder = Encoder(config)
  encoder.build((None, None))
  disc = DiscriminatorHead(config)
  disc.build((None, 256))
  head = LinearHead(config, 3)
  head.build((None, 256))
  return {
      "embeddings_project": (encoder.embeddings_project.kernel, 128, 256),
      "dense_prediction": (disc.dense_prediction.kernel, 256, 1),
      "fine-tuning head": (head.dense.kernel, 256, 3),
      "query (never glorot)": (
          encoder.transformer_layers[0].attention.query.kernel, 256, 256),
  }


@pytest.mark.parametrize("dense_init", ["original", "truncated_normal"])
def test_each_layer_draws_from_its_initializer(dense_init):
  for name, (kernel, fan_in, fan_out) in kernels(dense_init).items():
    std = float(np.std(np.asarray(kernel)))
    want = (glorot_std(fan_in, fan_out) if dense_init == "original" and
            "never" not in name else TRUNCATED_STD)
    # >= 256 draws each: their std within 25% (glorot is >= 4x the other).
    assert abs(std - want) < 0.25 * want, (name, std, want)


def test_an_unknown_dense_init_is_one_line():
  with pytest.raises(UserError, match="dense_init"):
    TransformerConfig(dense_init="xavier", **SIZES)


def test_finetuning_overrides_apply_to_its_model():
  """Fine-tuning's model_hparam_overrides reach its encoder config (the
  heads' dense_init, dropout), never the pretrained weights' shapes."""
  import types
  from configure_pretraining import PretrainingConfig
  from finetune.config import FinetuningConfig
  from finetune.model import model_config_for
  pretrained = types.SimpleNamespace(config=PretrainingConfig(
      model_size="tiny", vocab_size=100))
  default = model_config_for(pretrained, FinetuningConfig())
  assert default.dense_init == "original"
  got = model_config_for(pretrained, FinetuningConfig(
      model_hparam_overrides={"dense_init": "truncated_normal",
                              "attention_probs_dropout_prob": 0.0}))
  assert (got.dense_init, got.attention_probs_dropout_prob) == (
      "truncated_normal", 0.0)
  assert got.hidden_size == default.hidden_size
  with pytest.raises(UserError, match="'hidden_size' is the pretrained"):
    model_config_for(pretrained, FinetuningConfig(
        model_hparam_overrides={"hidden_size": default.hidden_size * 2}))
  with pytest.raises(UserError, match="unknown key 'hiden_size'"):
    model_config_for(pretrained, FinetuningConfig(
        model_hparam_overrides={"hiden_size": 8}))
