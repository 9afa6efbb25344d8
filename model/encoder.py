"""The one transformer core: a BERT-style post-LayerNorm encoder (Keras 3).

Every objective (MLM, ELECTRA, Electric, SCRIPT) builds on `Encoder`; the
generator and discriminator share one `Embeddings` instance.
Only keras / keras.ops here, so it runs on TensorFlow and JAX unchanged.
"""

import math

import keras
from keras import layers
from keras import ops

CAUSAL_DIRECTIONS = (None, "l2r", "r2l")


def initializer(config):
  """A new instance for each weight: Keras 3 gives an unseeded initializer
  one seed at construction, so an instance shared by several weights draws
  the same values for each (the original's TF1 draws are independent)."""
  return keras.initializers.TruncatedNormal(stddev=config.initializer_range)


def dense_default_initializer(config):
  """The kernel init of the layers the original release builds with
  TF1's dense layer and no initializer (embeddings_project, the
  discriminator's output layer, the fine-tuning heads): TF1's default,
  glorot_uniform, under dense_init "original"; else initializer()."""
  if config.dense_init == "original":
    return keras.initializers.GlorotUniform()
  return initializer(config)


def _float32(fn):
  """fn computed in float32: erf on bfloat16 runs at half the speed of
  float32 on CPU (converted element by element), and is less exact."""
  def wrapped(x):
    dtype = keras.backend.standardize_dtype(x.dtype)
    if dtype == "float32":
      return fn(x)
    return ops.cast(fn(ops.cast(x, "float32")), dtype)
  return wrapped


class LayerNorm(layers.LayerNormalization):
  """LayerNormalization over the last axis, computed in float32 as
  (x - mean) * (rsqrt(var + eps) * gamma) + beta. Keras' form (moments,
  then x * inv + (beta - mean * inv)) is slower under TensorFlow on CPU:
  this one runs 1.15-1.24x its speed forward and 1.06-1.12x with the
  gradient (benchmarks/layernorm.py). Same variables; the same results to
  float32 rounding."""

  def __init__(self, **kwargs):
    super().__init__(axis=-1, **kwargs)

  def call(self, x):
    x = ops.cast(x, "float32")
    centered = x - ops.mean(x, axis=-1, keepdims=True)
    variance = ops.mean(ops.square(centered), axis=-1, keepdims=True)
    scale = ops.rsqrt(variance + self.epsilon) * ops.cast(self.gamma,
                                                          "float32")
    return ops.cast(centered * scale + ops.cast(self.beta, "float32"),
                    self.compute_dtype)


def activation(name):
  if name == "gelu":  # exact erf form, as BERT and transformers' "gelu"
    return _float32(lambda x: keras.activations.gelu(x, approximate=False))
  if name in ("gelu_new", "gelu_approx"):  # tanh form of the TF1 release
    return lambda x: keras.activations.gelu(x, approximate=True)
  if name in ("relu", "silu", "tanh"):
    return keras.activations.get(name)
  raise ValueError(f"unknown hidden_act '{name}'")


class Embeddings(layers.Layer):
  """Token + learned position + token-type embeddings, LayerNorm, dropout.

  Outputs `embedding_size` features; each encoder projects to its own hidden
  size, so one instance can be shared by a small generator and the
  discriminator (ELECTRA section 3.2).
  """

  def __init__(self, config, **kwargs):
    super().__init__(**kwargs)
    self.config = config
    self.word_embeddings = layers.Embedding(
        config.vocab_size, config.embedding_size,
        embeddings_initializer=initializer(config), name="word_embeddings")
    self.position_embeddings = layers.Embedding(
        config.max_position_embeddings, config.embedding_size,
        embeddings_initializer=initializer(config),
        name="position_embeddings")
    self.token_type_embeddings = layers.Embedding(
        config.type_vocab_size, config.embedding_size,
        embeddings_initializer=initializer(config),
        name="token_type_embeddings")
    self.layer_norm = LayerNorm(
        epsilon=config.layer_norm_eps, name="LayerNorm")
    self.dropout = layers.Dropout(config.hidden_dropout_prob)

  def build(self, input_shape):
    self.word_embeddings.build(None)
    self.position_embeddings.build(None)
    self.token_type_embeddings.build(None)
    self.layer_norm.build((None, None, self.config.embedding_size))
    self.built = True

  @property
  def token_table(self):
    """The [vocab, embedding_size] matrix that tied output layers reuse."""
    return self.word_embeddings.embeddings

  def call(self, input_ids, segment_ids=None, training=None):
    seq_len = ops.shape(input_ids)[1]
    positions = ops.expand_dims(ops.arange(seq_len, dtype="int32"), 0)
    x = self.word_embeddings(input_ids) + self.position_embeddings(positions)
    if segment_ids is None:
      segment_ids = ops.zeros_like(input_ids)
    x = x + self.token_type_embeddings(segment_ids)
    return self.dropout(self.layer_norm(x), training=training)


class DisentangledEmbeddings(Embeddings):
  """DeBERTa-V3's gradient-disentangled embedding sharing (GDES).

  Each table is stop_gradient(shared table) + a zero-initialised delta of
  its own, so the discriminator's loss moves only the deltas while the
  generator's MLM loss alone trains the shared tables. LayerNorm is its own.
  """

  def __init__(self, config, shared, **kwargs):
    super().__init__(config, **kwargs)
    self.shared = shared
    for table in ("word", "position", "token_type"):
      getattr(self, f"{table}_embeddings").embeddings_initializer = (
          keras.initializers.Zeros())

  def build(self, input_shape):
    if not self.shared.built:
      self.shared.build(input_shape)
    super().build(input_shape)

  def _table(self, name):
    own = getattr(self, name).embeddings
    return ops.stop_gradient(getattr(self.shared, name).embeddings) + own

  @property
  def token_table(self):
    return self._table("word_embeddings")

  def call(self, input_ids, segment_ids=None, training=None):
    seq_len = ops.shape(input_ids)[1]
    if segment_ids is None:
      segment_ids = ops.zeros_like(input_ids)
    x = (ops.take(self._table("word_embeddings"), input_ids, axis=0) +
         ops.take(self._table("position_embeddings"),
                  ops.arange(seq_len, dtype="int32"), axis=0)[None] +
         ops.take(self._table("token_type_embeddings"), segment_ids, axis=0))
    return self.dropout(self.layer_norm(x), training=training)


def attention_mask(input_mask, causal=None):
  """Boolean [B, 1, T|1, T] mask: padding keys off, plus an optional
  left-to-right ("l2r") or right-to-left ("r2l") causal mask."""
  mask = ops.expand_dims(ops.expand_dims(ops.not_equal(input_mask, 0), 1), 1)
  if causal is None:
    return mask
  seq_len = ops.shape(input_mask)[1]
  rows = ops.expand_dims(ops.arange(seq_len), 1)
  cols = ops.expand_dims(ops.arange(seq_len), 0)
  tri = cols <= rows if causal == "l2r" else cols >= rows
  # Every query may see itself, so a padding query of the right-to-left
  # tower (no real key at or after it) never has an all-masked row.
  return ops.logical_or(ops.logical_and(mask, tri[None, None]),
                        ops.equal(rows, cols)[None, None])


class SelfAttention(layers.Layer):
  """Multi-head self-attention; fused kernel unless attention dropout runs."""

  def __init__(self, config, **kwargs):
    super().__init__(**kwargs)
    self.config = config
    self.query, self.key, self.value = (
        layers.Dense(config.hidden_size,
                     kernel_initializer=initializer(config), name=name)
        for name in ("query", "key", "value"))
    self.dropout = layers.Dropout(config.attention_probs_dropout_prob)

  def build(self, input_shape):
    for dense in (self.query, self.key, self.value):
      dense.build(input_shape)
    self.built = True

  def _heads(self, x, batch, length):
    config = self.config
    return ops.reshape(x, (batch, length, config.num_attention_heads,
                           config.head_size))

  def call(self, x, mask, training=None, queries=None):
    """x: [B, T, H], or [B * T, H] rows of `mask`'s [B, 1, 1|T, T].
    queries: [B, Q, H] states that attend to x (default x itself)."""
    config = self.config
    batch, length = ops.shape(mask)[0], ops.shape(mask)[-1]
    q_length = length if queries is None else ops.shape(queries)[1]
    q, k, v = (self._heads(self.query(x if queries is None else queries),
                           batch, q_length),
               self._heads(self.key(x), batch, length),
               self._heads(self.value(x), batch, length))
    dropout = training and config.attention_probs_dropout_prob > 0
    if dropout or config.attention_impl == "einsum":
      # Explicit path: the fused op has no dropout on attention probs.
      scores = ops.einsum("btnh,bsnh->bnts", q, k) / math.sqrt(config.head_size)
      scores = ops.where(mask, ops.cast(scores, "float32"), -1e9)
      probs = ops.cast(ops.softmax(scores, axis=-1), v.dtype)
      probs = self.dropout(probs, training=training)
      context = ops.einsum("bnts,bsnh->btnh", probs, v)
    elif config.attention_impl == "fused":
      # cuDNN wants the mask as a bias of the scores' [T, T] shape.
      full = ops.broadcast_to(mask, (batch, 1, q_length, length))
      context = ops.dot_product_attention(q, k, v, mask=full)
    else:
      # cuDNN's fused kernel refuses a [B, 1, 1, T] mask; Keras would log a
      # traceback per traced layer, then run XLA's attention: run it now.
      context = ops.dot_product_attention(q, k, v, mask=mask,
                                          flash_attention=False)
    return ops.reshape(context, (-1, config.hidden_size)
                       if len(x.shape) == 2 and queries is None
                       else (batch, q_length, config.hidden_size))


class TransformerLayer(layers.Layer):
  """Attention and FFN blocks, each followed by residual + LayerNorm."""

  def __init__(self, config, **kwargs):
    super().__init__(**kwargs)
    self.config = config
    self.attention = SelfAttention(config, name="attention")
    self.attention_output = layers.Dense(
        config.hidden_size, kernel_initializer=initializer(config),
        name="attention_output")
    self.attention_layer_norm = LayerNorm(
        epsilon=config.layer_norm_eps, name="attention_LayerNorm")
    self.intermediate = layers.Dense(
        config.intermediate_size, activation=activation(config.hidden_act),
        kernel_initializer=initializer(config), name="intermediate")
    self.output_dense = layers.Dense(
        config.hidden_size, kernel_initializer=initializer(config),
        name="output")
    self.output_layer_norm = LayerNorm(
        epsilon=config.layer_norm_eps, name="output_LayerNorm")
    self.dropout = layers.Dropout(config.hidden_dropout_prob)

  def build(self, input_shape):
    h, f = self.config.hidden_size, self.config.intermediate_size
    self.attention.build((None, None, h))
    self.attention_output.build((None, None, h))
    self.attention_layer_norm.build((None, None, h))
    self.intermediate.build((None, None, h))
    self.output_dense.build((None, None, f))
    self.output_layer_norm.build((None, None, h))
    self.built = True

  def call(self, x, mask, training=None, queries=None):
    """queries: [B, Q, H] rows of x, the only ones whose outputs are made
    (default all of x); keys and values are all of x."""
    a = self.attention(x, mask, training=training, queries=queries)
    a = self.dropout(self.attention_output(a), training=training)
    x = self.attention_layer_norm((x if queries is None else queries) + a)
    h = self.dropout(self.output_dense(self.intermediate(x)),
                     training=training)
    return self.output_layer_norm(x + h)


class Encoder(layers.Layer):
  """Embeddings (possibly shared) -> projection -> N transformer layers.

  Args:
    config: a TransformerConfig.
    embeddings: an `Embeddings` to share; a new one is made when None.
    causal: None (bidirectional), "l2r" or "r2l" (for two-tower models).
  """

  def __init__(self, config, embeddings=None, causal=None, **kwargs):
    super().__init__(**kwargs)
    if causal not in CAUSAL_DIRECTIONS:
      raise ValueError(f"causal must be one of {CAUSAL_DIRECTIONS}")
    self.config = config
    self.causal = causal
    self.embeddings = embeddings or Embeddings(config, name="embeddings")
    self.embeddings_project = None
    if config.embedding_size != config.hidden_size:
      self.embeddings_project = layers.Dense(
          config.hidden_size,
          kernel_initializer=dense_default_initializer(config),
          name="embeddings_project")
    # Cross-layer sharing (ALBERT; the Lite ELECTRA report): one layer's
    # weights applied num_hidden_layers times.
    num_distinct = 1 if config.share_layers else config.num_hidden_layers
    self.transformer_layers = [
        TransformerLayer(config, name=f"layer_{i}")
        for i in range(num_distinct)]

  def build(self, input_shape):
    if not self.embeddings.built:
      self.embeddings.build(input_shape)
    if self.embeddings_project is not None:
      self.embeddings_project.build((None, None, self.config.embedding_size))
    for layer in self.transformer_layers:
      layer.build((None, None, self.config.hidden_size))
    self.built = True

  def call(self, input_ids, input_mask=None, segment_ids=None, training=None,
           first_token_only=False):
    """Returns [batch, seq_len, hidden_size] final hidden states, or with
    `first_token_only` [batch, 1, hidden_size], the first token's alone:
    the last layer then makes no other token's output (a [CLS] head's
    encoder: those outputs would be thrown away)."""
    if input_mask is None:
      input_mask = ops.ones_like(input_ids)
    x = self.embeddings(input_ids, segment_ids, training=training)
    if self.embeddings_project is not None:
      x = self.embeddings_project(x)
    mask = attention_mask(input_mask, self.causal)
    # In float32 the layers run on [B * T, H] rows: each Dense is then one
    # MatMul straight into its BiasAdd (a 3-D input puts a Reshape between
    # them), which TensorFlow's oneDNN remapper fuses with the GELU: dev
    # forward 17% faster on the CPU. In bfloat16 that fused op runs
    # oneDNN's inner product without AMX, slower than MatMul then BiasAdd
    # (docs/performance.md), so there the layers keep [B, T, H].
    shape = ops.shape(x)
    rows = self.compute_dtype == "float32"
    if rows:
      x = ops.reshape(x, (-1, self.config.hidden_size))
    last = self.config.num_hidden_layers - 1
    for i in range(last + 1):
      layer = self.transformer_layers[i % len(self.transformer_layers)]
      if i == last and first_token_only:
        first = (ops.reshape(x, (shape[0], shape[1], self.config.hidden_size))
                 if rows else x)[:, :1]
        # The first query's row of the mask ([B, 1, T, T]: causal towers).
        return layer(x, mask[:, :, :1], training=training, queries=first)
      x = layer(x, mask, training=training)
    if rows:
      x = ops.reshape(x, (shape[0], shape[1], self.config.hidden_size))
    return x
