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
  nll = -log_softmax_at(logits, labels)
  return _mean(nll, ops.cast(weights, "float32"), denominator), nll


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


def detection_skill(token_losses, labels, weights):
  """1 - loss / H(base rate): how much of the label entropy the detector
  explains (0 = it only knows the replaced share, 1 = perfect). Accuracy
  cannot show this: a detector that always says "original" scores the
  base rate (~85%). Per batch, from its own weighted mean loss."""
  weights = ops.cast(weights, "float32")
  total = ops.sum(weights) + 1e-6
  rate = ops.clip(ops.sum(ops.cast(labels, "float32") * weights) / total,
                  1e-6, 1 - 1e-6)
  entropy = -(rate * ops.log(rate) + (1 - rate) * ops.log(1 - rate))
  return 1 - ops.sum(token_losses * weights) / total / entropy


def weighted_accuracy(predictions, labels, weights):
  weights = ops.cast(weights, "float32")
  hits = ops.cast(ops.equal(ops.cast(predictions, "int32"),
                            ops.cast(labels, "int32")), "float32")
  return ops.sum(weights * hits) / (ops.sum(weights) + 1e-6)


def weighted_mean(values, weights, denominator=None):
  """sum(w * values) / (denominator or sum(w)), as every loss here."""
  return _mean(ops.cast(values, "float32"), ops.cast(weights, "float32"),
               denominator)


def log_softmax_at(logits, ids):
  """log softmax(logits)[..., ids]: [..., V], [...] -> [...] (float32).

  The fused sparse cross-entropy (one kernel for loss and gradient on TF)
  makes a small-model step ~3% faster than logsumexp - take_along_axis,
  whose gradient densifies a [..., V] scatter.
  """
  return -ops.sparse_categorical_crossentropy(
      ops.cast(ids, "int32"), ops.cast(logits, "float32"), from_logits=True)


def log_prob_at(logits, ids):
  """The same value as log_softmax_at, for inference: logit at ids -
  logsumexp. The fused kernel above also computes the gradient, ~5x the
  time of this when nothing is trained (PLL scoring)."""
  logits = ops.cast(logits, "float32")
  picked = ops.take_along_axis(
      logits, ops.expand_dims(ops.cast(ids, "int32"), -1), axis=-1)
  return ops.squeeze(picked, -1) - ops.logsumexp(logits, axis=-1)


def electric_logits(energy, log_q, log_noise_ratio):
  """Electric's binary "noise" logit (Electric paper sections 2.2, 2.5):

    E(x)_t + log(k q(x_t | context) / (n - k))

  energy, log_q [B, T] (log q of the token shown at t, gradient stopped);
  log_noise_ratio log(k / (n - k)): a number, or [B] (noise_log_ratio).
  """
  ratio = ops.cast(log_noise_ratio, "float32")
  if len(ops.shape(ratio)) == 1:
    ratio = ops.expand_dims(ratio, -1)
  return ops.cast(energy, "float32") + ops.stop_gradient(log_q) + ratio


def noise_log_ratio(num_noise, num_tokens):
  """log(k / (n - k)) of each row: k noise samples among n tokens [B]."""
  k = ops.cast(num_noise, "float32")
  n_minus_k = ops.maximum(ops.cast(num_tokens, "float32") - k, 1.0)
  return ops.log(ops.maximum(k, 1e-6)) - ops.log(n_minus_k)


def self_critic_logits(logits):
  """SCRIPT's critic as a binary "replaced" logit (SCRIPT section 2).

  p(real) = S / (S + 1), S = sum_v exp(s_tv), so log-odds(replaced) is
  -log S = -logsumexp(s_t): stable in log space. logits [..., V] -> [...].
  """
  return -ops.logsumexp(ops.cast(logits, "float32"), axis=-1)


def log_sigmoid(x):
  return -ops.softplus(-x)


def copy_mechanism_nll(logits, copy_logits, input_ids, targets):
  """All-Tokens MLM (ELECTRA section 3.5): -log p(target) under
  p = D * onehot(input) + (1 - D) * softmax(logits), D = sigmoid(copy).

  Computed as a logaddexp of the two branches, so it is stable for D near
  0 or 1. logits [B, T, V]; copy_logits, input_ids, targets [B, T].
  """
  copy_logits = ops.cast(copy_logits, "float32")
  vocab_term = log_sigmoid(-copy_logits) + log_softmax_at(logits, targets)
  same = ops.equal(ops.cast(input_ids, "int32"), ops.cast(targets, "int32"))
  copy_term = ops.where(same, log_sigmoid(copy_logits), -1e30)
  return -ops.logaddexp(vocab_term, copy_term)


def reinforce_losses(log_prob_samples, disc_token_loss, baseline_logits):
  """Adversarial generator training (ELECTRA appendix F), per position.

  The generator maximises the discriminator's loss on its samples. With
  R = log D(correct decision) = -disc_token_loss as appendix F writes it,
  the generator's reward is -R; the learned baseline b = log sigmoid(w^T h)
  predicts R (trained by cross-entropy against exp(R)). Returns
  (policy-gradient loss, baseline loss), both [B, P], to be averaged.
  """
  reward = -ops.stop_gradient(ops.cast(disc_token_loss, "float32"))  # R
  baseline_logits = ops.cast(baseline_logits, "float32")
  baseline = ops.stop_gradient(log_sigmoid(baseline_logits))  # b
  # Minimising (R - b) log p raises p where the discriminator was fooled.
  policy = (reward - baseline) * log_prob_samples
  baseline_loss = sigmoid_cross_entropy(baseline_logits, ops.exp(reward))
  return policy, baseline_loss
