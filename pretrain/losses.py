"""Pretraining losses as pure keras.ops functions (backend-neutral).

Each returns (mean_loss, per_position_losses) so eval can reuse the parts.
`denominator` (default: this batch's sum of weights) lets a data-parallel
driver pass the mean over replicas of that sum, so that averaging the
replicas' losses gives exactly the loss of the whole global batch.
"""

from keras import ops


def _mean(values, weights, denominator):
  if denominator is None:
    denominator = ops.sum(weights)
  return ops.sum(weights * values) / (ops.cast(denominator, "float32") + 1e-6)


def masked_lm_loss(logits, labels, weights, denominator=None):
  """Cross-entropy at masked positions: sum(w * nll) / (sum(w) + 1e-6).

  logits [B, P, V], labels [B, P] int, weights [B, P] (0 for padding picks).
  """
  logits = ops.cast(logits, "float32")
  weights = ops.cast(weights, "float32")
  label_logits = ops.take_along_axis(
      logits, ops.expand_dims(ops.cast(labels, "int32"), -1), axis=-1)
  nll = ops.logsumexp(logits, axis=-1) - ops.squeeze(label_logits, -1)
  return _mean(nll, weights, denominator), nll


def sigmoid_cross_entropy(logits, labels):
  """Stable elementwise -[z log s(x) + (1-z) log(1-s(x))]."""
  logits = ops.cast(logits, "float32")
  labels = ops.cast(labels, "float32")
  return (ops.maximum(logits, 0.0) - logits * labels +
          ops.log1p(ops.exp(-ops.abs(logits))))


def replaced_token_detection_loss(logits, labels, weights, denominator=None):
  """ELECTRA's discriminator loss (section 2): sigmoid cross-entropy of
  "replaced" (1) vs "original" (0), averaged over weighted tokens."""
  weights = ops.cast(weights, "float32")
  losses = sigmoid_cross_entropy(logits, labels)
  return _mean(losses, weights, denominator), losses


def weighted_accuracy(predictions, labels, weights):
  weights = ops.cast(weights, "float32")
  hits = ops.cast(ops.equal(ops.cast(predictions, "int32"),
                            ops.cast(labels, "int32")), "float32")
  return ops.sum(weights * hits) / (ops.sum(weights) + 1e-6)
