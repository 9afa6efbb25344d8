"""The SQuAD head and loss helpers.

Start logits from Dense(1); end logits conditioned on a start. Training
conditions on the gold start; inference runs a beam: the top `beam_size`
starts, and for each its top `beam_size` ends (start_n_top = end_n_top =
config.beam_size, as in the release). Three styles (qa_head):

  electra  the ELECTRA release's (finetune/qa/qa_tasks.py, its defaults):
           end logits Dense(1)(Dense(512, gelu)(concat(h_start, h_t)));
           with answerable_classifier, an answerability logit
           Dense(1)(Dense(512, gelu)(concat(h_[CLS], sum_t p_start(t) h_t)))
           trained for SQuAD 1.1 too (every label "answerable"), used only
           for 2.0's predictions
  xlnet    XLNet's end head, Dense(hidden, act) -> LayerNorm -> Dense(1),
           and 2.0's answerability from Dense(hidden, act) + dropout (this
           code's default until 2026-12-06)
  linear   BERT's head (transformers' ElectraForQuestionAnswering): end
           logits Dense(1)(h_t), independent of the start; the beam and the
           scorer stay the same (every start gets the same top ends)
"""

from keras import layers
from keras import ops

from model.encoder import LayerNorm
from model.encoder import activation
from model.encoder import initializer

_MASKED = -1e9  # logit of a position where no span may start or end
ELECTRA_WIDTH = 512  # the release's qa_hidden and answerability layers


class SQuADHead(layers.Layer):
  """Start logits, end logits given a start, and (2.0) answerability.

  call(hidden, answer_mask, start_positions=None, training=None) returns
  float32 tensors: start_log_probs [B, T]; end_log_probs [B, T] given the
  gold start (when start_positions is given); at inference start_top_index
  / start_top_log_probs [B, k] and end_top_index / end_top_log_probs
  [B, k, k]; answerable_logit [B] (with the classifier) or, for 2.0 without
  it, cls_log_prob [B] = log p_start(0) + log p_end(0 | start 0).
  Inference holds [B, k, T, hidden] end features (k = beam_size).
  """

  def __init__(self, config, beam_size, v2, answerable_classifier=True,
               answerable_uses_start_logits=True, style="electra",
               dropout=0.1, **kwargs):
    super().__init__(**kwargs)
    self.config = config
    self.style = style
    self.linear = style == "linear"
    self.beam_size = beam_size
    self.v2 = v2
    # The release trains its classifier on 1.1 too; XLNet's is 2.0's only.
    self.answerable = answerable_classifier and (v2 or style == "electra")
    self.uses_start = answerable_uses_start_logits
    h = config.hidden_size
    # The release's hidden layers are 512 wide with the exact GELU at
    # every model size; XLNet's are the encoder's width and activation.
    electra = style == "electra"
    self.width = ELECTRA_WIDTH if electra else h
    self.act = activation("gelu" if electra else config.hidden_act)
    self.start_dense = layers.Dense(1, kernel_initializer=initializer(config),
                                    name="start_logits")
    if not self.linear:
      # Applied to the concatenation by splitting its kernel, so the
      # [B, k, T, 2H] concatenation is never built.
      self.end_hidden = layers.Dense(
          self.width, kernel_initializer=initializer(config),
          name="end_hidden")
      if not electra:
        self.end_norm = LayerNorm(
            epsilon=config.layer_norm_eps, name="end_LayerNorm")
    self.end_dense = layers.Dense(1, kernel_initializer=initializer(config),
                                  name="end_logits")
    if self.answerable:
      self.answer_hidden = None
      if self.uses_start or not electra:
        self.answer_hidden = layers.Dense(
            self.width, activation=self.act,
            kernel_initializer=initializer(config), name="answer_hidden")
      self.answer_dropout = None if electra else layers.Dropout(dropout)
      self.answer_dense = layers.Dense(
          1, kernel_initializer=initializer(config), name="answer_logit")

  def build(self, input_shape):
    h = self.config.hidden_size
    self.start_dense.build((None, h))
    if not self.linear:
      self.end_hidden.build((None, 2 * h))
      if self.style != "electra":
        self.end_norm.build((None, self.width))
    self.end_dense.build((None, h if self.linear else self.width))
    if self.answerable:
      answer_in = 2 * h if self.uses_start else h
      if self.answer_hidden is not None:
        self.answer_hidden.build((None, answer_in))
        answer_in = self.width
      self.answer_dense.build((None, answer_in))
    self.built = True

  def _masked(self, logits, mask):
    return ops.where(mask, ops.cast(logits, "float32"), _MASKED)

  def end_log_probs(self, hidden, start_onehot, mask):
    """[B, k, T] end log-probs for k starts given as one-hots [B, k, T]."""
    if self.linear:  # the same for every start
      logits = self._masked(ops.squeeze(self.end_dense(hidden), -1), mask)
      return ops.broadcast_to(
          ops.expand_dims(ops.log_softmax(logits, axis=-1), 1),
          ops.shape(start_onehot))
    h = self.config.hidden_size
    kernel = ops.cast(self.end_hidden.kernel, hidden.dtype)
    bias = ops.cast(self.end_hidden.bias, hidden.dtype)
    # The release concatenates (start, token); XLNet's order was (token,
    # start).
    start_part, token_part = ((kernel[:h], kernel[h:])
                              if self.style == "electra"
                              else (kernel[h:], kernel[:h]))
    start_states = ops.einsum("bkt,bth->bkh", start_onehot, hidden)
    x = (ops.expand_dims(ops.matmul(hidden, token_part), 1) +
         ops.expand_dims(ops.matmul(start_states, start_part) + bias, 2))
    x = self.act(x)
    if self.style != "electra":
      x = self.end_norm(x)
    logits = ops.squeeze(self.end_dense(x), -1)
    logits = self._masked(logits, ops.expand_dims(mask, 1))
    return ops.log_softmax(logits, axis=-1)

  def answerable_logit(self, hidden, start_logits, training):
    x = hidden[:, 0]
    if self.uses_start:
      p = ops.cast(ops.softmax(start_logits, axis=-1), hidden.dtype)
      x = ops.concatenate(
          [x, ops.einsum("bt,bth->bh", p, hidden)], axis=-1)
    if self.answer_hidden is not None:
      x = self.answer_hidden(x)
    if self.answer_dropout is not None:
      x = self.answer_dropout(x, training=training)
    return ops.cast(ops.squeeze(self.answer_dense(x), -1), "float32")

  def call(self, hidden, answer_mask, start_positions=None, training=None):
    seq_len = hidden.shape[1] or ops.shape(hidden)[1]
    mask = ops.not_equal(answer_mask, 0)
    start_logits = self._masked(
        ops.squeeze(self.start_dense(hidden), -1), mask)
    out = {"start_log_probs": ops.log_softmax(start_logits, axis=-1)}
    if start_positions is not None:
      gold = ops.one_hot(ops.expand_dims(start_positions, 1), seq_len,
                         dtype=hidden.dtype)
      out["end_log_probs"] = self.end_log_probs(hidden, gold, mask)[:, 0]
    # 1.1's classifier only trains (its loss), 2.0's also predicts.
    if self.answerable and (self.v2 or start_positions is not None):
      out["answerable_logit"] = self.answerable_logit(
          hidden, start_logits, training)
    if not training:
      out.update(self._beam(hidden, out["start_log_probs"], mask, seq_len))
    return out

  def _beam(self, hidden, start_lp, mask, seq_len):
    """Top-k starts, and for each the top-k ends given that start."""
    onehot = lambda i: ops.one_hot(i, seq_len, dtype=hidden.dtype)  # noqa
    k = self.beam_size
    if isinstance(hidden.shape[1], int):
      k = min(k, hidden.shape[1])
    start_top_lp, start_top = ops.top_k(start_lp, k)
    end_lp = self.end_log_probs(hidden, onehot(start_top), mask)
    end_top_lp, end_top = ops.top_k(end_lp, k)
    out = {"start_top_index": start_top, "start_top_log_probs": start_top_lp,
           "end_top_index": end_top, "end_top_log_probs": end_top_lp}
    if self.v2 and not self.answerable:
      cls = onehot(ops.zeros_like(start_top[:, :1]))
      out["cls_log_prob"] = (start_lp[:, 0] +
                             self.end_log_probs(hidden, cls, mask)[:, 0, 0])
    return out


def sigmoid_ce(labels, logits):
  """Stable elementwise sigmoid cross-entropy."""
  return (ops.maximum(logits, 0.0) - logits * labels +
          ops.softplus(-ops.abs(logits)))


def gather(log_probs, positions):
  """log_probs[b, positions[b]] for each row."""
  onehot = ops.one_hot(positions, ops.shape(log_probs)[-1], dtype="float32")
  return ops.sum(onehot * log_probs, axis=-1)
