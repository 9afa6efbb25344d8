"""Output heads on top of the encoder (Keras 3, keras.ops only)."""

from keras import layers
from keras import ops

from model.encoder import LayerNorm
from model.encoder import activation
from model.encoder import dense_default_initializer
from model.encoder import initializer


class MaskedLMHead(layers.Layer):
  """dense(embedding_size) -> act -> LayerNorm -> logits via the tied table.

  Called on the hidden states of masked positions only, so the vocabulary
  projection never runs where its output would be thrown away.
  """

  def __init__(self, config, input_size=None, **kwargs):
    super().__init__(**kwargs)
    self.config = config
    # A two-tower generator feeds concatenated states: 2 x hidden_size.
    self.input_size = input_size or config.hidden_size
    self.dense = layers.Dense(
        config.embedding_size, activation=activation(config.hidden_act),
        kernel_initializer=initializer(config), name="dense")
    self.layer_norm = LayerNorm(
        epsilon=config.layer_norm_eps, name="LayerNorm")

  def build(self, input_shape):
    self.dense.build((None, self.input_size))
    self.layer_norm.build((None, self.config.embedding_size))
    self.output_bias = self.add_weight(
        shape=(self.config.vocab_size,), initializer="zeros",
        name="output_bias")
    self.built = True

  def call(self, hidden, token_table):
    """hidden [..., hidden_size], token_table [vocab, emb] -> [..., vocab]."""
    return self.project(self.transform(hidden), token_table)

  def transform(self, hidden):
    """[..., hidden_size] -> the states the vocabulary is scored on."""
    return self.layer_norm(self.dense(hidden))

  def project(self, h, token_table):
    """Transformed states [..., emb] -> logits over the vocabulary.

    The bias rides in the matmul as one more input column of ones, so its
    add, and in the backward pass its sum over [..., vocab], come out of
    the matmul: 22% off projection + bias in a tiny-model CPU benchmark.
    """
    table = ops.concatenate(
        [ops.cast(token_table, h.dtype),
         ops.expand_dims(ops.cast(self.output_bias, h.dtype), -1)], axis=-1)
    h = ops.concatenate([h, ops.ones_like(h[..., :1])], axis=-1)
    return ops.matmul(h, ops.transpose(table))

  def project_at(self, h, token_table, ids):
    """The float32 logit of ids [...] only, from transformed states
    [..., emb]: its gradient reaches the table through the gathered rows,
    where a pick from the full logits would scatter a [..., vocab] one-hot.
    In float32, as a matmul accumulates, not as a bf16 sum would."""
    rows = ops.take(ops.cast(token_table, "float32"), ids, axis=0)
    bias = ops.take(ops.cast(self.output_bias, "float32"), ids, axis=0)
    return ops.sum(ops.cast(h, "float32") * rows, axis=-1) + bias


class DiscriminatorHead(layers.Layer):
  """dense(hidden) -> act -> dense(1): one replaced/original logit a token."""

  def __init__(self, config, **kwargs):
    super().__init__(**kwargs)
    self.config = config
    self.dense = layers.Dense(
        config.hidden_size, activation=activation(config.hidden_act),
        kernel_initializer=initializer(config), name="dense")
    self.dense_prediction = layers.Dense(
        1, kernel_initializer=dense_default_initializer(config),
        name="dense_prediction")

  def build(self, input_shape):
    self.dense.build((None, self.config.hidden_size))
    self.dense_prediction.build((None, self.config.hidden_size))
    self.built = True

  def call(self, hidden):
    return ops.squeeze(self.dense_prediction(self.dense(hidden)), -1)
