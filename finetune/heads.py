"""The simple task heads: dropout, then a linear layer (keras only)."""

import keras

from model.encoder import dense_default_initializer


class LinearHead(keras.layers.Layer):
  """Dropout + Dense(num_outputs) on every token's hidden state, or only on
  the first token's ([CLS]) with `first_token` (GLUE)."""

  def __init__(self, config, num_outputs, first_token=False, **kwargs):
    super().__init__(**kwargs)
    self.config = config
    self.first_token = first_token
    self.dropout = keras.layers.Dropout(config.hidden_dropout_prob)
    self.dense = keras.layers.Dense(
        num_outputs, kernel_initializer=dense_default_initializer(config),
        name="output")

  def build(self, input_shape):
    self.dense.build((None, self.config.hidden_size))
    self.built = True

  def call(self, hidden, training=None):
    if self.first_token:
      hidden = hidden[:, 0]
    return self.dense(self.dropout(hidden, training=training))
