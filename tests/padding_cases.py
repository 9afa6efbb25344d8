"""Batches of each head kind padded to 32 tokens, rows of 3-13 real ones,
and a tiny dropout-free FinetuningModel's per-row losses and gradients on
them, on either Keras backend (tests/test_batch_padding.py)."""

import keras
import numpy as np

from finetune.config import FinetuningConfig
from finetune.model import FinetuningModel
from model.config import get_model_config

T, B, VOCAB = 32, 6, 50
KINDS = ("classification", "regression", "tagging_crf", "multiple_choice")


def _task(kind):
  # pylint: disable=g-import-not-at-top
  from finetune.classification.classification_tasks import CoLA, STS
  from finetune.multiple_choice.choice_tasks import RACE
  from finetune.tagging.tagging_tasks import Chunking
  config = FinetuningConfig(tagging_crf=True)
  if kind == "tagging_crf":
    task = Chunking(config, None)
    task.restore_labels(["B-NP", "I-NP", "O", "B-VP"])
    return task
  return {"classification": CoLA, "regression": STS,
          "multiple_choice": RACE}[kind](config, None)


def batch(kind, seed=0):
  """A batch of `kind` at T, its rows' lengths drawn in [3, 13]."""
  rng = np.random.default_rng(seed)
  lead = (B, 4) if kind == "multiple_choice" else (B,)
  mask = np.arange(T) < rng.integers(3, 14, lead + (1,))
  out = {"input_ids": (rng.integers(5, VOCAB, lead + (T,)) * mask),
         "input_mask": mask, "segment_ids": (np.arange(T) >= 5) * mask}
  out = {k: v.astype(np.int32) for k, v in out.items()}
  if kind == "regression":
    out["labels"] = rng.random(B).astype(np.float32)
  elif kind == "tagging_crf":
    out["label_ids"] = (rng.integers(0, 4, (B, T)) * mask).astype(np.int32)
    out["label_weights"] = (mask * (rng.random((B, T)) < 0.7)).astype(
        np.float32)
    out["label_weights"][:, 1] = 1.0  # a tagged word in every row
  else:
    out["label_ids"] = rng.integers(0, 4 if kind == "multiple_choice" else 2,
                                    B).astype(np.int32)
  return out


def model(kind):
  task = _task(kind)
  keras.utils.set_random_seed(3)
  config = get_model_config("tiny", VOCAB, {
      "hidden_size": 16, "intermediate_size": 32, "embedding_size": 16,
      "num_attention_heads": 2, "num_hidden_layers": 2,
      "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0})
  net = FinetuningModel(config, [task])
  net(batch(kind), task_name=task.name, training=False)
  if kind == "tagging_crf":  # transitions that matter
    crf = net.heads[task.name].crf
    crf.transitions.assign(np.random.default_rng(1).normal(
        size=crf.transitions.shape).astype(np.float32))
  return net, task


def loss_and_grads(net, task, features):
  """(per-row losses, [gradient of their mean per trainable variable]) in
  training mode, NumPy."""
  variables = net.trainable_variables
  if keras.backend.backend() == "jax":
    import jax  # pylint: disable=g-import-not-at-top

    def mean_loss(trainable):
      (loss, _), _ = net.stateless_call(
          trainable, [v.value for v in net.non_trainable_variables],
          features, task_name=task.name, training=True)
      return loss.mean(), loss
    (_, loss), grads = jax.jit(jax.value_and_grad(mean_loss, has_aux=True))(
        [v.value for v in variables])
  else:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    with tf.GradientTape() as tape:
      loss, _ = net(features, task_name=task.name, training=True)
      mean = tf.reduce_mean(loss)
    grads = tape.gradient(mean, variables)
  return (np.asarray(loss),
          [np.asarray(keras.ops.convert_to_numpy(g)) for g in grads])


def outputs(net, task, features):
  _, out = net(features, task_name=task.name, training=False)
  return {k: np.asarray(keras.ops.convert_to_numpy(v))
          for k, v in out.items()}


def largest_differences(multiple=8):
  """{kind: (largest |loss difference|, largest |gradient difference|,
  trimmed length)} between each batch at T and at its own length."""
  from finetune import padding  # pylint: disable=g-import-not-at-top
  out = {}
  for kind in KINDS:
    net, task = model(kind)
    full = batch(kind)
    cut = padding.trimmed(full, multiple)
    (loss_a, grads_a), (loss_b, grads_b) = (
        loss_and_grads(net, task, f) for f in (full, cut))
    out[kind] = (float(np.abs(loss_a - loss_b).max()),
                 max(float(np.abs(a - b).max())
                     for a, b in zip(grads_a, grads_b)),
                 int(cut["input_ids"].shape[-1]),
                 float(max(np.abs(g).max() for g in grads_a)))
  return out
