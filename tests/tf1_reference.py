"""A checkpoint in the original ELECTRA release's TF1 layout, and a float64
NumPy forward pass written from that release's description (BERT
modeling.py: post-LN layers, erf GELU, LayerNorm eps 1e-12, -10000 on
padded keys). Independent of model/ and interop/."""

import dataclasses
import math

import numpy as np


@dataclasses.dataclass(frozen=True)
class Tf1Sizes:
  vocab_size: int = 40
  hidden_size: int = 128
  num_heads: int = 2
  num_layers: int = 2
  intermediate_size: int = 256
  embedding_size: int = 64
  max_position: int = 128
  gen_hidden_size: int = 64
  gen_num_heads: int = 1
  gen_num_layers: int = 2
  gen_intermediate_size: int = 128

  def full_size_generator(self):
    return dataclasses.replace(
        self, gen_hidden_size=self.hidden_size, gen_num_heads=self.num_heads,
        gen_num_layers=self.num_layers,
        gen_intermediate_size=self.intermediate_size)


def _encoder_shapes(scope, hidden, layers, ffn, embedding):
  shapes = {}
  if embedding != hidden:
    shapes[f"{scope}/embeddings_project/kernel"] = (embedding, hidden)
    shapes[f"{scope}/embeddings_project/bias"] = (hidden,)
  for i in range(layers):
    p = f"{scope}/encoder/layer_{i}"
    for part in ("query", "key", "value"):
      shapes[f"{p}/attention/self/{part}/kernel"] = (hidden, hidden)
      shapes[f"{p}/attention/self/{part}/bias"] = (hidden,)
    shapes[f"{p}/attention/output/dense/kernel"] = (hidden, hidden)
    shapes[f"{p}/attention/output/dense/bias"] = (hidden,)
    shapes[f"{p}/attention/output/LayerNorm/gamma"] = (hidden,)
    shapes[f"{p}/attention/output/LayerNorm/beta"] = (hidden,)
    shapes[f"{p}/intermediate/dense/kernel"] = (hidden, ffn)
    shapes[f"{p}/intermediate/dense/bias"] = (ffn,)
    shapes[f"{p}/output/dense/kernel"] = (ffn, hidden)
    shapes[f"{p}/output/dense/bias"] = (hidden,)
    shapes[f"{p}/output/LayerNorm/gamma"] = (hidden,)
    shapes[f"{p}/output/LayerNorm/beta"] = (hidden,)
  return shapes


def tf1_shapes(s, with_generator=True):
  """{name: shape} of the release's model variables (no optimizer state)."""
  e, h = s.embedding_size, s.hidden_size
  shapes = {
      "electra/embeddings/word_embeddings": (s.vocab_size, e),
      "electra/embeddings/position_embeddings": (s.max_position, e),
      "electra/embeddings/token_type_embeddings": (2, e),
      "electra/embeddings/LayerNorm/gamma": (e,),
      "electra/embeddings/LayerNorm/beta": (e,),
  }
  shapes.update(_encoder_shapes("electra", h, s.num_layers,
                                s.intermediate_size, e))
  shapes.update({
      "discriminator_predictions/dense/kernel": (h, h),
      "discriminator_predictions/dense/bias": (h,),
      "discriminator_predictions/dense_1/kernel": (h, 1),
      "discriminator_predictions/dense_1/bias": (1,),
  })
  if with_generator:
    g = s.gen_hidden_size
    shapes.update(_encoder_shapes("generator", g, s.gen_num_layers,
                                  s.gen_intermediate_size, e))
    shapes.update({
        "generator_predictions/dense/kernel": (g, e),
        "generator_predictions/dense/bias": (e,),
        "generator_predictions/LayerNorm/gamma": (e,),
        "generator_predictions/LayerNorm/beta": (e,),
        "generator_predictions/output_bias": (s.vocab_size,),
    })
  return shapes


def random_value(name, shape, rng):
  """Order 0.1-1 values, so a misplaced or transposed weight shows."""
  if name.endswith("gamma"):
    return (1.0 + 0.2 * rng.standard_normal(shape)).astype(np.float32)
  if name.endswith("kernel"):
    scale = 1.0 / np.sqrt(shape[0])
    return (scale * rng.standard_normal(shape)).astype(np.float32)
  if "embeddings/" in name and not name.endswith("beta"):
    return (0.5 * rng.standard_normal(shape)).astype(np.float32)
  return (0.2 * rng.standard_normal(shape)).astype(np.float32)


def write_tf1_checkpoint(prefix, sizes, rng, full_size_generator=False,
                         with_generator=True, with_adam=True,
                         global_step=100):
  """Writes a TF1 (tf.compat.v1 Saver) checkpoint at `prefix`; returns the
  {name: float32 array} of its model variables (no Adam slots/global_step)."""
  if full_size_generator:
    sizes = sizes.full_size_generator()
  values = {name: random_value(name, shape, rng) for name, shape in
            tf1_shapes(sizes, with_generator).items()}
  save_tf1_variables(prefix, values, rng if with_adam else None,
                     global_step)
  return values


def save_tf1_variables(prefix, values, adam_rng=None, global_step=100):
  """Saves {TF1 name: array} as tf.compat.v1 variables at `prefix` (the
  product's writer), with random Adam slots when `adam_rng` is given."""
  from interop.tf1 import write_checkpoint
  saved = dict(values)
  if adam_rng is not None:  # different values, so a slot read by mistake shows
    for name, value in values.items():
      for slot in ("adam_m", "adam_v"):
        saved[f"{name}/{slot}"] = adam_rng.standard_normal(
            value.shape).astype(np.float32)
  write_checkpoint(prefix, saved, global_step)


# ------------------------------------------------------- NumPy forward pass
_ERF = np.frompyfunc(math.erf, 1, 1)


def _gelu(x):  # the release's model/modeling.py gelu: the exact erf form
  return 0.5 * x * (1.0 + _ERF(x / np.sqrt(2.0)).astype(np.float64))


def _layer_norm(x, gamma, beta, eps=1e-12):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _w(weights, name):
  return np.asarray(weights[name], np.float64)


def _dense(weights, scope, x):
  return x @ _w(weights, f"{scope}/kernel") + _w(weights, f"{scope}/bias")


def _encoder(weights, scope, ids, mask, segs, num_heads):
  emb = "electra/embeddings"
  seq = ids.shape[1]
  x = (_w(weights, f"{emb}/word_embeddings")[ids] +
       _w(weights, f"{emb}/position_embeddings")[:seq][None] +
       _w(weights, f"{emb}/token_type_embeddings")[segs])
  x = _layer_norm(x, _w(weights, f"{emb}/LayerNorm/gamma"),
                  _w(weights, f"{emb}/LayerNorm/beta"))
  if f"{scope}/embeddings_project/kernel" in weights:
    x = _dense(weights, f"{scope}/embeddings_project", x)
  adder = (1.0 - np.asarray(mask, np.float64))[:, None, None, :] * -10000.0
  b, t, hidden = x.shape
  d = hidden // num_heads
  i = 0
  while f"{scope}/encoder/layer_{i}/attention/self/query/kernel" in weights:
    p = f"{scope}/encoder/layer_{i}"
    def heads(part, p=p):
      y = _dense(weights, f"{p}/attention/self/{part}", x)
      return y.reshape(b, t, num_heads, d).transpose(0, 2, 1, 3)
    q, k, v = heads("query"), heads("key"), heads("value")
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + adder
    scores -= scores.max(-1, keepdims=True)
    probs = np.exp(scores)
    probs /= probs.sum(-1, keepdims=True)
    context = (probs @ v).transpose(0, 2, 1, 3).reshape(b, t, hidden)
    a = _dense(weights, f"{p}/attention/output/dense", context)
    norm = f"{p}/attention/output/LayerNorm"
    x = _layer_norm(x + a, _w(weights, f"{norm}/gamma"),
                    _w(weights, f"{norm}/beta"))
    f = _gelu(_dense(weights, f"{p}/intermediate/dense", x))
    f = _dense(weights, f"{p}/output/dense", f)
    x = _layer_norm(x + f, _w(weights, f"{p}/output/LayerNorm/gamma"),
                    _w(weights, f"{p}/output/LayerNorm/beta"))
    i += 1
  return x


def numpy_discriminator_logits(weights, ids, mask, segs, cfg):
  """[B, T] replaced-token logits; cfg: a Tf1Sizes (for the head count)."""
  h = _encoder(weights, "electra", ids, mask, segs, cfg.num_heads)
  h = _gelu(_dense(weights, "discriminator_predictions/dense", h))
  return _dense(weights, "discriminator_predictions/dense_1", h)[..., 0]


def numpy_generator_logits(weights, ids, mask, segs, positions, cfg):
  """[B, P, V] masked-LM logits at `positions` [B, P]."""
  h = _encoder(weights, "generator", ids, mask, segs, cfg.gen_num_heads)
  h = np.take_along_axis(h, np.asarray(positions)[..., None], axis=1)
  h = _gelu(_dense(weights, "generator_predictions/dense", h))
  h = _layer_norm(h, _w(weights, "generator_predictions/LayerNorm/gamma"),
                  _w(weights, "generator_predictions/LayerNorm/beta"))
  return (h @ _w(weights, "electra/embeddings/word_embeddings").T +
          _w(weights, "generator_predictions/output_bias"))
