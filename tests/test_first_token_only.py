"""Encoder(first_token_only=True), the encoder of a [CLS] head: the last
layer makes the first token's output alone. It must equal the first row of
the full encoder's output, forward and gradients, on every path."""

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from finetune import task_builder
from finetune.classification.classification_tasks import SST
from finetune.config import FinetuningConfig
from finetune.model import FinetuningModel
from finetune.multiple_choice.choice_tasks import MultipleChoiceTask
from finetune.qa.qa_tasks import SQuADv1
from model import Encoder
from model.config import TransformerConfig

CONFIG = TransformerConfig(vocab_size=50, hidden_size=16, num_hidden_layers=3,
                           num_attention_heads=2, intermediate_size=32,
                           max_position_embeddings=16, embedding_size=8,
                           hidden_dropout_prob=0.0,
                           attention_probs_dropout_prob=0.0)


def _inputs(batch=4, length=10, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(1, CONFIG.vocab_size, (batch, length)).astype(np.int32)
  lengths = rng.integers(2, length + 1, batch)
  lengths[0] = length
  mask = (np.arange(length)[None] < lengths[:, None]).astype(np.int32)
  segs = (np.arange(length)[None] >= lengths[:, None] // 2).astype(np.int32)
  return ids * mask, mask, segs * mask


@pytest.mark.parametrize("dtype,causal,tol", [
    ("float32", None, 1e-5),  # the [B * T, H] rows path
    ("mixed_bfloat16", None, 3e-2),  # the [B, T, H] path
    ("float32", "l2r", 1e-5),  # a causal tower: the mask's first row
    ("float32", "r2l", 1e-5),
])
def test_first_token_equals_the_full_encoders_first_row(dtype, causal, tol):
  encoder = Encoder(CONFIG, causal=causal, dtype=dtype)
  ids, mask, segs = _inputs()
  full = np.asarray(encoder(ids, mask, segs), np.float32)
  first = np.asarray(encoder(ids, mask, segs, first_token_only=True),
                     np.float32)
  assert first.shape == (4, 1, CONFIG.hidden_size)
  np.testing.assert_allclose(first[:, 0], full[:, 0], atol=tol, rtol=0)
  # The other tokens do move the first one's output (it is not [CLS] alone).
  other = np.asarray(encoder(ids, mask, (segs + 1) % 2,
                             first_token_only=True), np.float32)
  assert np.abs(other - first).max() > 10 * tol


def test_gradients_equal_the_full_encoders():
  keras.utils.set_random_seed(0)  # the same weights every run
  encoder = Encoder(CONFIG)
  ids, mask, segs = _inputs(seed=1)
  weight = tf.constant(np.random.default_rng(2).standard_normal(
      CONFIG.hidden_size), tf.float32)
  grads = []
  for first_only in (False, True):
    with tf.GradientTape() as tape:
      hidden = encoder(ids, mask, segs, training=True,
                       first_token_only=first_only)
      loss = tf.reduce_sum(hidden[:, 0] * weight)
    grads.append(tape.gradient(loss, encoder.trainable_variables))
  for variable, full, first in zip(encoder.trainable_variables, *grads):
    if full is None:  # e.g. an unused position's row: None in both
      assert first is None, variable.path
      continue
    full = np.asarray(tf.convert_to_tensor(full))  # IndexedSlices too
    # float32 sums in another order: errors scale with the tensor's largest
    # gradient (up to ~260 here), not each element's. Over 40 inits the
    # worst difference was 0.34 of this; a wrong path is off by O(grad).
    np.testing.assert_allclose(np.asarray(tf.convert_to_tensor(first)),
                               full, rtol=0,
                               atol=1e-5 + 1e-6 * np.abs(full).max(),
                               err_msg=variable.path)


def test_attention_dropout_path():
  """Training with attention dropout takes the explicit einsum path; at a
  rate of 1e-9 it keeps every probability, so it must equal eval's."""
  config = dataclasses.replace(CONFIG, attention_probs_dropout_prob=1e-9)
  encoder = Encoder(config)
  ids, mask, segs = _inputs(seed=3)
  train = np.asarray(encoder(ids, mask, segs, training=True,
                             first_token_only=True))
  full = np.asarray(encoder(ids, mask, segs, training=False))
  np.testing.assert_allclose(train[:, 0], full[:, 0], atol=1e-5)


def test_tasks_that_read_cls_alone_say_so():
  assert SST.first_token_only and MultipleChoiceTask.first_token_only
  assert not SQuADv1.first_token_only  # a span head reads every token


def test_classification_outputs_unchanged():
  """A GLUE task's probabilities from the model (first token only) equal
  its head on the full encoder's output."""
  config = FinetuningConfig(task_names="sst")
  task, = task_builder.get_tasks(config, None)
  model = FinetuningModel(CONFIG, [task])
  ids, mask, segs = _inputs(seed=4)
  features = dict(input_ids=ids, input_mask=mask, segment_ids=segs,
                  label_ids=np.zeros(len(ids), np.int32))
  _, outputs = model(features, task_name=task.name, training=False)
  hidden = model.encoder(ids, mask, segs, training=False)
  logits = np.asarray(model.heads[task.name](hidden), np.float64)
  expected = np.exp(logits - logits.max(-1, keepdims=True))
  expected /= expected.sum(-1, keepdims=True)
  np.testing.assert_allclose(np.asarray(outputs["probabilities"]), expected,
                             atol=1e-5)
