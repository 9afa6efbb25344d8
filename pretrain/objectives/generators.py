"""Generators: where the replacement tokens come from (ELECTRA section 3.2).

A `Generator` gives logits over the vocabulary at asked-for positions:
  * "mlm": a small masked LM on the masked input (ELECTRA's default);
  * "two_tower": Electric's cloze model, a left-to-right and a right-to-left
    causal transformer on the unmasked input, predicting position t from
    their states at t-1 and t+1 (Electric section 2.4; ELECTRA-TT);
  * "uniform" / "unigram": fixed distributions, no network (section 3.2).
Weight sharing with the discriminator is decided by the caller, which passes
the embeddings (or the whole encoder) to use.
"""

import keras
import numpy as np
from keras import ops

from model import Encoder
from model import MaskedLMHead
from model.positions import gather_positions


class MaskedLMGenerator(keras.layers.Layer):
  """Small masked LM; the vocabulary projection only at masked positions."""

  kind = "mlm"

  def __init__(self, config, embeddings=None, encoder=None,
               with_baseline=False, **kwargs):
    super().__init__(**kwargs)
    self.config = config
    self.encoder = encoder or Encoder(config, embeddings, name="encoder")
    self.predictions = MaskedLMHead(config, name="predictions")
    # Appendix F's learned REINFORCE baseline, w^T h_G, for adversarial runs.
    self.baseline = (keras.layers.Dense(1, name="baseline")
                     if with_baseline else None)

  def build(self, input_shape=None):
    if not self.encoder.built:
      self.encoder.build(None)
    self.predictions.build(None)
    if self.baseline is not None:
      self.baseline.build((None, self.config.hidden_size))
    self.built = True

  @property
  def token_table(self):
    return self.encoder.embeddings.token_table

  def hidden_at(self, features, positions, training=None):
    hidden = self.encoder(features["masked_input_ids"], features["input_mask"],
                          features["segment_ids"], training=training)
    return gather_positions(hidden, positions)

  def call(self, features, positions, training=None):
    """Logits [B, P, V] at positions [B, P] (and hidden states [B, P, H])."""
    hidden = self.hidden_at(features, positions, training)
    return self.predictions(hidden, self.token_table), hidden


class TwoTowerGenerator(keras.layers.Layer):
  """Electric's noise distribution q(x_t | x_\\t) (Electric section 2.4).

  softmax(W [l2r_{t-1}, r2l_{t+1}]): neither tower ever sees x_t, so the
  unmasked input can be used and every position predicted in one pass.
  """

  kind = "two_tower"

  def __init__(self, config, embeddings=None, **kwargs):
    super().__init__(**kwargs)
    self.config = config
    self.l2r = Encoder(config, embeddings, causal="l2r", name="l2r")
    self.r2l = Encoder(config, self.l2r.embeddings, causal="r2l", name="r2l")
    self.predictions = MaskedLMHead(config, input_size=2 * config.hidden_size,
                                    name="predictions")

  def build(self, input_shape=None):
    self.l2r.build(None)
    self.r2l.build(None)
    self.predictions.build(None)
    self.built = True

  @property
  def token_table(self):
    return self.l2r.embeddings.token_table

  def states(self, features, training=None):
    """[B, T, 2H]: the left tower at t-1 beside the right tower at t+1
    (zeros beyond either end)."""
    args = (features["input_ids"], features["input_mask"],
            features["segment_ids"])
    left = self.l2r(*args, training=training)
    right = self.r2l(*args, training=training)
    left = ops.pad(left[:, :-1], [[0, 0], [1, 0], [0, 0]])
    right = ops.pad(right[:, 1:], [[0, 0], [0, 1], [0, 0]])
    # Past the last real token there is no right context: zeros, as at the
    # end of a full row (not the state of a padding slot).
    real_next = ops.pad(ops.cast(features["input_mask"], right.dtype)[:, 1:],
                        [[0, 0], [0, 1]])
    right = right * ops.expand_dims(real_next, -1)
    return ops.concatenate([left, right], axis=-1)

  def call(self, features, positions=None, training=None):
    """Logits at positions [B, P], or at every position when None (Electric
    needs q of every token), and the states they came from."""
    hidden = self.states(features, training)
    if positions is not None:
      hidden = gather_positions(hidden, positions)
    return self.predictions(hidden, self.token_table), hidden

  def cloze(self, features, training=None):
    """Logits at every position [B, T, V] and the logit of each input
    token [B, T], the latter from the states rather than a pick from the
    logits (see MaskedLMHead.project_at): a loss on it trains without a
    [B, T, V] one-hot in the backward pass."""
    if not self.built:  # not reached through __call__, which would build
      self.build(None)
    head = self.predictions
    h = head.transform(self.states(features, training))
    ids = ops.cast(features["input_ids"], "int32")
    return (head.project(h, self.token_table),
            head.project_at(h, self.token_table, ids))


class FixedGenerator(keras.layers.Layer):
  """Uniform (all-zero logits) or unigram (log token frequencies) samples."""

  def __init__(self, vocab_size, log_probs=None, **kwargs):
    super().__init__(**kwargs)
    self.kind = "uniform" if log_probs is None else "unigram"
    self.vocab_size = vocab_size
    self.log_probs = (None if log_probs is None else
                      np.asarray(log_probs, np.float32))

  def call(self, features, positions, training=None):
    shape = ops.shape(positions)
    if self.log_probs is None:
      logits = ops.zeros((shape[0], shape[1], self.vocab_size))
    else:
      logits = ops.broadcast_to(ops.convert_to_tensor(self.log_probs),
                                (shape[0], shape[1], self.vocab_size))
    return logits, None


def unigram_log_probs(counts, exclude_ids):
  """log frequencies from the dataset's token counts; specials never drawn."""
  counts = np.asarray(counts, np.float64).copy()
  counts[list(exclude_ids)] = 0
  if counts.sum() <= 0:
    raise ValueError("token counts are all zero")
  with np.errstate(divide="ignore"):
    return np.maximum(np.log(counts / counts.sum()), -1e4).astype(np.float32)
