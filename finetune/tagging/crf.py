"""A linear-chain CRF output layer for word taggers (keras / keras.ops only).

Scores of a tag sequence y_1..y_n over the n tagged positions of a row
(mask > 0: each word's first subword; the positions between them are
skipped, so consecutive words are neighbours in the chain):

  score(y) = start[y_1] + sum_i emissions[i, y_i]
             + sum_{i>1} transitions[y_{i-1}, y_i] + end[y_n]

The loss is the negative log-likelihood log Z - score(gold), with log Z
from the forward algorithm in log space; predictions are the Viterbi path.
A row with no tagged position has score 0, log Z 0 and NLL 0.

The tagged positions are first moved to the front of each row (a stable
order: words keep their order), so that both recursions run over a prefix
mask, then the decoded tags are put back where they came from.
"""

import keras
from keras import ops

from finetune.heads import LinearHead


def _front(mask):
  """The permutation of each row that puts its tagged positions first (in
  order), and the permuted mask (a prefix of ones)."""
  length = ops.shape(mask)[1]
  index = ops.arange(length, dtype="int32")[None, :]
  order = ops.cast(ops.argsort(ops.where(mask, index, index + length),
                               axis=-1), "int32")
  return order, ops.take_along_axis(mask, order, axis=1)


def _gather(x, order):
  """x [B, T, ...] permuted along T by order [B, T]."""
  extra = len(x.shape) - 2
  idx = ops.reshape(order, tuple(ops.shape(order)) + (1,) * extra)
  return ops.take_along_axis(x, idx, axis=1)


def _time_major(x):
  return ops.moveaxis(x, 1, 0)


class CRF(keras.layers.Layer):
  """Transition scores between tags and the scores of a first and a last
  tag. Its methods take emissions [B, T, K], tags [B, T] and mask [B, T]
  (> 0 where a tag counts) and work in float32."""

  def __init__(self, num_tags, **kwargs):
    super().__init__(**kwargs)
    self.num_tags = num_tags

  def build(self, input_shape=None):
    k = self.num_tags
    self.transitions = self.add_weight(name="transitions", shape=(k, k),
                                       initializer="zeros")
    self.start_transitions = self.add_weight(name="start_transitions",
                                             shape=(k,), initializer="zeros")
    self.end_transitions = self.add_weight(name="end_transitions",
                                           shape=(k,), initializer="zeros")
    self.built = True

  def _params(self):
    if not self.built:
      self.build()
    return tuple(ops.cast(v, "float32") for v in (
        self.transitions, self.start_transitions, self.end_transitions))

  def _prepare(self, emissions, mask):
    emissions = ops.cast(emissions, "float32")
    order, mask = _front(ops.cast(mask, "float32") > 0)
    return order, _gather(emissions, order), mask

  # ------------------------------------------------------------ training
  def log_partition(self, emissions, mask):
    """log Z per row [B]: log-sum-exp of score(y) over every tag sequence."""
    transitions, start, end = self._params()
    _, emissions, mask = self._prepare(emissions, mask)
    alpha = start[None] + emissions[:, 0]

    def step(alpha, x):
      emission, on = x
      moved = ops.logsumexp(alpha[:, :, None] + transitions[None], axis=1)
      return ops.where(on[:, None], moved + emission, alpha), None

    if emissions.shape[1] != 1:
      alpha, _ = ops.scan(step, alpha, (_time_major(emissions[:, 1:]),
                                        _time_major(mask[:, 1:])))
    return ops.where(mask[:, 0], ops.logsumexp(alpha + end[None], axis=-1),
                     0.0)

  def sequence_score(self, emissions, tags, mask):
    """score(tags) per row [B], over its tagged positions only."""
    transitions, start, end = self._params()
    order, emissions, mask = self._prepare(emissions, mask)
    tags = ops.take_along_axis(ops.cast(tags, "int32"), order, axis=1)
    on = ops.cast(mask, "float32")
    emitted = ops.take_along_axis(emissions, tags[..., None], axis=-1)[..., 0]
    k = self.num_tags
    moved = ops.take(ops.reshape(transitions, (-1,)),
                     tags[:, :-1] * k + tags[:, 1:])
    count = ops.cast(ops.sum(on, axis=-1), "int32")
    last = ops.take_along_axis(tags, ops.maximum(count - 1, 0)[:, None],
                               axis=1)[:, 0]
    return (ops.sum(emitted * on, axis=-1) +
            ops.sum(moved * on[:, 1:], axis=-1) +
            (ops.take(start, tags[:, 0]) + ops.take(end, last)) * on[:, 0])

  def negative_log_likelihood(self, emissions, tags, mask):
    """-log p(tags | emissions) per row [B]; 0 for rows without tags."""
    return (self.log_partition(emissions, mask) -
            self.sequence_score(emissions, tags, mask))

  # ----------------------------------------------------------- inference
  def decode(self, emissions, mask):
    """The Viterbi path [B, T] (int32): the best tag at each tagged
    position; untagged positions carry a copy of a neighbour's tag."""
    transitions, start, end = self._params()
    order, emissions, mask = self._prepare(emissions, mask)
    k = self.num_tags
    keep = ops.broadcast_to(ops.arange(k, dtype="int32")[None],
                            ops.shape(emissions[:, 0]))
    delta = start[None] + emissions[:, 0]
    if emissions.shape[1] == 1:
      return ops.cast(ops.argmax(delta + end[None], axis=-1),
                      "int32")[:, None]

    # TensorFlow's scan stacks outputs shaped like the carry, so the
    # carry holds the step's back-pointers too.
    def forward(carry, x):
      delta, _ = carry
      emission, on = x
      scores = delta[:, :, None] + transitions[None]  # [B, from, to]
      best = ops.cast(ops.argmax(scores, axis=1), "int32")
      new = ops.max(scores, axis=1) + emission
      carry = (ops.where(on[:, None], new, delta),
               ops.where(on[:, None], best, keep))
      return carry, carry

    (delta, _), (_, pointers) = ops.scan(
        forward, (delta, keep),
        (_time_major(emissions[:, 1:]), _time_major(mask[:, 1:])))
    last = ops.cast(ops.argmax(delta + end[None], axis=-1), "int32")

    # Back from the last position: tag t-1 = pointers_t[tag t]. Past a
    # row's last word the pointers are the identity, so its last tag
    # carries back to it unchanged.
    def backward(tag, pointer):
      before = ops.take_along_axis(pointer, tag[:, None], axis=1)[:, 0]
      return before, before

    _, earlier = ops.scan(backward, last, ops.flip(pointers, axis=0))
    path = ops.concatenate([ops.flip(_time_major(earlier), axis=1),
                            last[:, None]], axis=1)  # in front order
    inverse = ops.cast(ops.argsort(order, axis=-1), "int32")
    return ops.take_along_axis(path, inverse, axis=1)


class CRFHead(keras.layers.Layer):
  """A tagging head with a CRF: `call` gives the emission scores (dropout +
  a linear layer per token, as LinearHead), `crf` scores and decodes them."""

  def __init__(self, config, num_tags, **kwargs):
    super().__init__(**kwargs)
    self.emissions = LinearHead(config, num_tags, name="emissions")
    self.crf = CRF(num_tags, name="crf")

  def build(self, input_shape):
    self.emissions.build(input_shape)
    self.crf.build()
    self.built = True

  def call(self, hidden, training=None):
    return self.emissions(hidden, training=training)
