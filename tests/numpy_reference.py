"""Float64 NumPy references shared by the model, loss and objective tests."""

import numpy as np
from scipy.special import erf


def np_layer_norm(x, gamma, beta, eps):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * gamma + beta


def np_gelu(x):
  return 0.5 * x * (1 + erf(x / np.sqrt(2)))


def np_log_softmax(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def np_masked_lm_loss(logits, labels, weights):
  logp = np_log_softmax(logits.astype(np.float64))
  nll = -np.take_along_axis(logp, labels[..., None], -1)[..., 0]
  return (weights * nll).sum() / (weights.sum() + 1e-6)
