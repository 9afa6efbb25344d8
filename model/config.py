"""Transformer sizes: presets from the dissertation's Table 5.1 and generators.

Table 5.1 (pre-train hyperparameters), columns Small / Base / Large:
layers 12/12/24, hidden 256/768/1024, FFN 1024/3072/4096, heads 4/12/16,
embedding size 128/768/1024, generator multiplier 1/4, 1/3, 1/4.
"""

import dataclasses
import math
import numbers

from util.errors import UserError


DENSE_INITS = ("truncated_normal", "original")
# model/encoder.py SelfAttention: "auto" keras.ops.dot_product_attention
# (XLA's) except where dropout on the probabilities runs (then the einsum
# path); "einsum" that path always; "fused" as auto but lets Keras pick a
# fused kernel (cuDNN's flash attention on a GPU, bf16) with a full mask.
ATTENTION_IMPLS = ("auto", "einsum", "fused")


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
  """Shape of one BERT-style post-LayerNorm encoder."""
  vocab_size: int = 30522
  hidden_size: int = 256
  num_hidden_layers: int = 12
  num_attention_heads: int = 4
  intermediate_size: int = 1024
  embedding_size: int = 128  # factorized embeddings; projected if != hidden
  hidden_act: str = "gelu"
  hidden_dropout_prob: float = 0.1
  attention_probs_dropout_prob: float = 0.1
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  initializer_range: float = 0.02
  layer_norm_eps: float = 1e-12
  share_layers: bool = False  # ALBERT/Lite ELECTRA: one layer's weights, N x
  # Kernel init of the layers the original builds with TF1's dense layer
  # and no initializer: "original" gives them its default, glorot_uniform;
  # "truncated_normal" initializer_range's, like every other layer
  # (model/encoder.py dense_default_initializer; docs/mirroring.md).
  dense_init: str = "original"
  attention_impl: str = "auto"  # ATTENTION_IMPLS

  def __post_init__(self):
    for field in dataclasses.fields(self):  # model_hparam_overrides: JSON
      value, kind = getattr(self, field.name), field.type
      if kind in (int, "int") and (isinstance(value, bool) or
                                   not isinstance(value, numbers.Integral)):
        raise UserError(f"model hparam '{field.name}' expects int, got "
                        f"{value!r}")
      if kind in (float, "float") and (
          isinstance(value, bool) or not isinstance(value, numbers.Real) or
          not math.isfinite(value)):
        raise UserError(f"model hparam '{field.name}' expects a finite "
                        f"number, got {value!r}")
    for name in ("initializer_range", "layer_norm_eps"):
      if getattr(self, name) <= 0:
        raise UserError(f"model hparam '{name}' must be > 0, got "
                        f"{getattr(self, name)}")
    for name in ("vocab_size", "hidden_size", "num_hidden_layers",
                 "num_attention_heads", "intermediate_size", "embedding_size",
                 "max_position_embeddings", "type_vocab_size"):
      if getattr(self, name) < 1:
        raise UserError(f"model hparam '{name}' must be >= 1, got "
                        f"{getattr(self, name)}")
    if self.dense_init not in DENSE_INITS:
      raise UserError(f"model hparam 'dense_init' must be one of "
                      f"{', '.join(DENSE_INITS)}, got {self.dense_init!r}")
    if self.attention_impl not in ATTENTION_IMPLS:
      raise UserError(f"model hparam 'attention_impl' must be one of "
                      f"{', '.join(ATTENTION_IMPLS)}, got "
                      f"{self.attention_impl!r}")
    if self.hidden_size % self.num_attention_heads:
      raise UserError(
          f"hidden_size {self.hidden_size} is not divisible by "
          f"num_attention_heads {self.num_attention_heads}")
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
      if not 0.0 <= getattr(self, name) < 1.0:
        raise UserError(f"model hparam '{name}' must be in [0, 1), got "
                        f"{getattr(self, name)}")

  @property
  def head_size(self):
    return self.hidden_size // self.num_attention_heads


# Table 5.1; "tiny" is ours, for tests and the CPU quickstart.
MODEL_PRESETS = {
    "tiny": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=512, embedding_size=128),
    "small": dict(hidden_size=256, num_hidden_layers=12, num_attention_heads=4,
                  intermediate_size=1024, embedding_size=128),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072, embedding_size=768),
    "large": dict(hidden_size=1024, num_hidden_layers=24,
                  num_attention_heads=16, intermediate_size=4096,
                  embedding_size=1024),
}

# Generator size multiplier per preset (Table 5.1, "Generator Size").
GENERATOR_MULTIPLIER = {"tiny": 0.25, "small": 0.25, "base": 1 / 3,
                        "large": 0.25}


def get_model_config(model_size, vocab_size, overrides=None):
  if model_size not in MODEL_PRESETS:
    raise UserError(f"unknown model_size '{model_size}' (choose from "
                    f"{', '.join(MODEL_PRESETS)})")
  values = dict(MODEL_PRESETS[model_size], vocab_size=vocab_size)
  known = {f.name for f in dataclasses.fields(TransformerConfig)}
  for key in overrides or {}:
    if key not in known:
      raise UserError(f"unknown key '{key}' in model_hparam_overrides")
  values.update(overrides or {})
  return TransformerConfig(**values)


def scale_config(config, hidden=1.0, ffn=None, heads=None, layers=1.0):
  """A smaller copy of `config`: each size times its multiplier.

  ffn and heads default to the hidden multiplier, as in the paper, where one
  multiplier scales hidden size, FFN size and attention heads together.
  """
  ffn = hidden if ffn is None else ffn
  heads = hidden if heads is None else heads
  for name, value in (("generator_hidden_size", hidden),
                      ("generator_ffn_size", ffn),
                      ("generator_heads", heads),
                      ("generator_layers", layers)):
    if not 0 < value <= 1:
      raise UserError(f"{name} is a multiplier in (0, 1], got {value}")
  return dataclasses.replace(
      config,
      hidden_size=max(1, round(config.hidden_size * hidden)),
      intermediate_size=max(1, round(config.intermediate_size * ffn)),
      num_attention_heads=max(1, round(config.num_attention_heads * heads)),
      num_hidden_layers=max(1, round(config.num_hidden_layers * layers)))
