"""The optimizer against the original release's own (issue 50): 40 steps of
given gradients through its create_optimizer (clipping, schedule,
AdamWeightDecayOptimizer; recorded by tests/reference/record_original.py,
item 7) and through ours (training/step.ReplicaUpdate, create_optimizer),
pretraining's single rate and fine-tuning's layer-wise rates."""

import contextlib
import json
import os
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from configure_finetuning import FinetuningConfig
from configure_pretraining import PretrainingConfig
from finetune import optimization as finetune_optimization
from training import optimization
from training.step import ReplicaUpdate

REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         "reference")

# The original's variable names -> where the same variable lives in our
# fine-tuning model (the layer-wise depths and no-decay rules read these).
OURS = {
    "electra/embeddings/word_embeddings":
        "finetuning/encoder/embeddings/word_embeddings/embeddings",
    "electra/embeddings/LayerNorm/gamma":
        "finetuning/encoder/embeddings/LayerNorm/gamma",
    "electra/embeddings_project/kernel":
        "finetuning/encoder/embeddings_project/kernel",
    "electra/encoder/layer_0/attention/self/query/kernel":
        "finetuning/encoder/layer_0/attention/query/kernel",
    "electra/encoder/layer_0/attention/self/query/bias":
        "finetuning/encoder/layer_0/attention/query/bias",
    "electra/encoder/layer_1/output/dense/kernel":
        "finetuning/encoder/layer_1/output/kernel",
    "electra/encoder/layer_1/output/LayerNorm/beta":
        "finetuning/encoder/layer_1/output_LayerNorm/beta",
    "task_specific/classifier/kernel": "finetuning/rte_head/output/kernel",
    "task_specific/classifier/bias": "finetuning/rte_head/output/bias",
}


@pytest.fixture(scope="module")
def reference():
  with open(os.path.join(REFERENCE, "optimizer.json")) as f:
    meta = json.load(f)
  arrays = dict(np.load(os.path.join(REFERENCE, "optimizer_updates.npz")))
  return meta, arrays


def _variable(path, value):
  *scopes, name = path.split("/")
  with contextlib.ExitStack() as stack:
    for scope in scopes:
      stack.enter_context(keras.name_scope(scope))
    return keras.Variable(value, name=name)


def _run(meta, arrays, make_optimizer):
  """Our variables after each step of the recorded gradients."""
  names = meta["variables"]
  variables = [_variable(OURS[n], arrays["initial:" + n]) for n in names]
  optimizer = make_optimizer(variables)
  update = ReplicaUpdate(optimizer, num_replicas=1, clip_norm=1.0)
  trajectory = []
  for step in range(meta["steps"]):
    update.apply([arrays["grads:" + n][step] for n in names], variables)
    trajectory.append([np.asarray(v) for v in variables])
  return [np.stack([t[i] for t in trajectory]) for i in range(len(names))]


def _pretraining(meta, kind="adam_weight_decay"):
  def make(variables):
    config = PretrainingConfig(
        optimizer=kind, learning_rate=meta["learning_rate"],
        num_train_steps=meta["num_train_steps"],
        num_warmup_steps=meta["warmup_steps"],
        weight_decay_rate=meta["weight_decay_rate"])
    optimizer = optimization.create_optimizer(config)
    optimization.build_optimizer(optimizer, variables)
    return optimizer
  return make


def _layerwise(meta, kind="adam_weight_decay"):
  variant = meta["variants"]["layerwise"]

  def make(variables):
    config = FinetuningConfig(
        optimizer=kind, learning_rate=meta["learning_rate"],
        layerwise_lr_decay=variant["layerwise_lr_decay_power"],
        warmup_proportion=meta["warmup_steps"] / meta["num_train_steps"],
        weight_decay_rate=meta["weight_decay_rate"])
    return finetune_optimization.create_optimizer(
        config, variables, variant["n_transformer_layers"],
        meta["num_train_steps"])
  return make


@pytest.mark.parametrize("variant", ["pretraining", "layerwise"])
def test_updates_equal_the_originals(reference, variant):
  meta, arrays = reference
  make = (_pretraining if variant == "pretraining" else _layerwise)(meta)
  ours = _run(meta, arrays, make)
  worst = max(np.abs(o - arrays[f"{variant}:{n}"]).max()
              for o, n in zip(ours, meta["variables"]))
  # Variables of size ~1, moved by ~5e-2 over the 40 steps.
  assert worst <= 1e-5, worst


def test_the_original_used_the_schedule_before_its_step_moved(reference):
  """Update n (from 0) used lr(n): the first one lr(0) = 0 (warmup), so its
  variables did not move, in every one of three recorded runs."""
  meta, arrays = reference
  variant = meta["variants"]["pretraining"]
  assert variant["three_runs_used_the_same_lrs"]
  schedule = optimization.WarmupPolynomialDecay(
      meta["learning_rate"], meta["num_train_steps"], meta["warmup_steps"])
  np.testing.assert_allclose(
      [lr[0] for lr in variant["lr_used"]],
      [float(schedule(step)) for step in range(meta["steps"])], rtol=1e-5)
  name = meta["variables"][0]
  np.testing.assert_array_equal(arrays[f"pretraining:{name}"][0],
                                arrays["initial:" + name])


@pytest.mark.parametrize("variant", ["pretraining", "layerwise"])
def test_keras_adamw_is_one_hparam_away_and_differs(reference, variant):
  """optimizer: adamw is Keras' bias-corrected Adam: early steps ~3x
  smaller than the original's, so the runs part by far more than 1e-5."""
  meta, arrays = reference
  make = (_pretraining if variant == "pretraining" else _layerwise)(
      meta, "adamw")
  ours = _run(meta, arrays, make)
  moved = [np.abs(arrays[f"{variant}:{n}"][-1] - arrays["initial:" + n]).sum()
           for n in meta["variables"]]
  moved_ours = [np.abs(o[-1] - arrays["initial:" + n]).sum()
                for o, n in zip(ours, meta["variables"])]
  assert sum(moved) > 2 * sum(moved_ours)


def test_no_decay_matches_the_originals_patterns(reference):
  """The original skips decay where its name has LayerNorm, layer_norm or
  bias; ours where the Keras path has them: the same variables."""
  meta, _ = reference
  for name in meta["variables"]:
    variable = types.SimpleNamespace(path=OURS[name])
    theirs = any(p in name for p in ("LayerNorm", "layer_norm", "bias"))
    assert optimization.no_decay(variable) == theirs, name


@pytest.mark.parametrize("clip_norm,loss_scale", [(1.0, 1.0), (1.0, 8.0),
                                                  (1e3, 1.0), (0.0, 1.0)])
def test_the_jax_steps_clip_as_tf_clip_by_global_norm(clip_norm, loss_scale):
  """optimization.clip_by_global_norm (the JAX steps' clipping) against
  tf.clip_by_global_norm on loss-scaled grads, a frozen variable's None
  among them; the norm it returns is the unscaled one."""
  rng = np.random.default_rng(0)
  grads = [rng.standard_normal(s).astype(np.float32) * loss_scale
           for s in ((3, 4), (5,), (2, 2))]
  got, norm = optimization.clip_by_global_norm(
      [grads[0], None, grads[1], grads[2]], clip_norm, loss_scale)
  assert got[1] is None
  want_norm = np.sqrt(sum(np.sum(g.astype(np.float64) ** 2)
                          for g in grads)) / loss_scale
  np.testing.assert_allclose(float(norm), want_norm, rtol=1e-6)
  want = (tf.clip_by_global_norm(grads, clip_norm * loss_scale)[0]
          if clip_norm else grads)
  for g, w in zip([got[0], got[2], got[3]], want):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
