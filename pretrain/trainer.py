"""The one pretraining driver: any objective model, any tf.distribute strategy.

Host loop: run `iterations_per_loop` steps inside one tf.function call,
log, checkpoint every `save_checkpoints_steps` (model, optimizer and data
iterator state, so a resumed run continues exactly), repeat.
"""

import dataclasses
import json
import math
import os
import time

import keras
import numpy as np
import tensorflow as tf

from pretrain import checkpointing
from pretrain import data
from pretrain import distribution
from pretrain import optimization
from pretrain.objectives import build_model
from util import storage
from util.errors import UserError

CONFIG_FILE = "pretrain_config.json"
# Changing these between a checkpoint and a resumed run changes the model.
ARCHITECTURE_KEYS = (
    "objective", "model_size", "model_hparam_overrides", "vocab_size",
    "max_seq_length", "generator_hidden_size", "generator_ffn_size",
    "generator_heads", "generator_layers", "uniform_generator",
    "untied_generator_embeddings", "untied_generator", "optimizer")


class Trainer:
  """Builds model, optimizer, data and checkpoints for a PretrainingConfig."""

  def __init__(self, config):
    self.config = config
    distribution.configure_threads(config)
    self.strategy = distribution.get_strategy(config)
    self.num_replicas = self.strategy.num_replicas_in_sync
    for name in ("train_batch_size", "eval_batch_size"):
      if getattr(config, name) % self.num_replicas:
        raise UserError(f"{name} {getattr(config, name)} is not divisible by "
                        f"the {self.num_replicas} replicas")
    self.meta = data.load_metadata(config)
    data.check_metadata(self.meta, config)
    keras.utils.set_random_seed(config.seed)  # init, dropout, sampling
    self.precision = distribution.resolve_precision(config)
    distribution.set_precision(self.precision)
    self._prepare_model_dir()
    with self.strategy.scope():
      self.model = build_model(config)
      self.model.build_variables()
      self.optimizer = optimization.create_optimizer(config)
      optimization.build_optimizer(self.optimizer,
                                   self.model.trainable_variables)
      if self.precision == "float16":
        self.optimizer = keras.optimizers.LossScaleOptimizer(self.optimizer)
        self.optimizer.build(self.model.trainable_variables)
    self.train_iterator = None
    self._train_loop = None

  # ---------------------------------------------------------------- setup
  def _prepare_model_dir(self):
    """Creates model_dir and records the config; on resume, checks it."""
    c = self.config
    path = os.path.join(c.model_dir, CONFIG_FILE)
    try:
      storage.makedirs(c.model_dir)
      if storage.exists(path):
        old = json.loads(storage.read_text(path))
        for key in ARCHITECTURE_KEYS:
          if key in old and old[key] != getattr(c, key):
            raise UserError(
                f"{c.model_dir} holds a model trained with {key}="
                f"{old[key]!r}, but this run has {key}={getattr(c, key)!r}; "
                "use another --model-name or the same hparams")
      storage.write_text_atomic(
          path, json.dumps(dataclasses.asdict(c), indent=2, sort_keys=True))
    except (OSError, tf.errors.OpError) as e:
      raise UserError(f"cannot write to model_dir {c.model_dir}: {e}") from None

  def _checkpoint(self, iterator=None, with_optimizer=True):
    return checkpointing.make_checkpoint(
        self.model, self.optimizer if with_optimizer else None, iterator)

  def _distributed_dataset(self, global_batch, is_training, start_step=0):
    def dataset_fn(input_context):
      batch = input_context.get_per_replica_batch_size(global_batch)
      # Batches each input pipeline has served in start_step steps.
      skip = start_step * (input_context.num_replicas_in_sync //
                           input_context.num_input_pipelines)
      return data.make_dataset(self.config, self.meta, batch, is_training,
                               input_context, skip_batches=skip)
    if self.num_replicas == 1 and self.config.strategy == "default":
      return dataset_fn(tf.distribute.InputContext())
    return self.strategy.distribute_datasets_from_function(dataset_fn)

  def restore(self, manager, checkpoint):
    """Restores the latest checkpoint of model_dir, or init_checkpoint."""
    c = self.config
    latest = manager.latest_checkpoint
    try:
      if latest:
        checkpoint.restore(latest).assert_existing_objects_matched()
        print(f"resumed from {latest} at step "
              f"{int(self.optimizer.iterations.numpy())}", flush=True)
      elif c.init_checkpoint:
        path = c.init_checkpoint
        if storage.isdir(path):
          path = tf.train.latest_checkpoint(path) or path
        self._checkpoint(with_optimizer=False).read(path).expect_partial()
        print(f"initialised weights from {path}", flush=True)
    except (tf.errors.OpError, AssertionError, ValueError) as e:
      first = str(e).strip().splitlines()[0][:300]
      raise UserError(f"cannot restore checkpoint {latest or c.init_checkpoint}"
                      f": {first}") from None

  # ----------------------------------------------------------------- train
  def _grads(self, batch):
    """Forward + backward on one replica's batch."""
    with tf.GradientTape() as tape:
      outputs = self.model(batch, training=True)
      loss = outputs["loss"] / self.num_replicas
      if self.precision == "float16":
        loss = self.optimizer.scale_loss(loss)
    variables = self.model.trainable_variables
    grads = tape.gradient(loss, variables)
    logs = {k: tf.cast(outputs[k], tf.float32) for k in self.model.LOG_KEYS}
    return grads, logs

  def _replica_step(self, batch):
    grads, logs = self._grads_fn(batch)
    variables = self.model.trainable_variables
    if self.precision == "float16":  # the loss-scale optimizer clips/skips
      self.optimizer.apply(grads, variables)
      logs["grad_norm"] = tf.linalg.global_norm(grads)
      return logs
    if self.num_replicas > 1:
      # Keras sums gradients across replicas only after its own clipping;
      # clip the summed gradient here, then hand it back pre-divided.
      grads = [tf.convert_to_tensor(g) for g in grads]  # IndexedSlices too
      grads = tf.distribute.get_replica_context().all_reduce("sum", grads)
    clip = self.config.clip_norm
    if clip > 0:
      grads, norm = tf.clip_by_global_norm(grads, clip)
    else:
      norm = tf.linalg.global_norm(grads)
    if self.num_replicas > 1:
      grads = [g / self.num_replicas for g in grads]
    self.optimizer.apply(grads, variables)
    logs["grad_norm"] = norm
    return logs

  def _build_train_loop(self):
    self._grads_fn = tf.function(self._grads, jit_compile=self.config.xla)
    keys = tuple(self.model.LOG_KEYS) + ("grad_norm",)

    @tf.function
    def train_loop(iterator, steps):
      sums = {k: tf.constant(0.0) for k in keys}
      for _ in tf.range(steps):
        logs = self.strategy.run(self._replica_step, args=(next(iterator),))
        sums = {k: sums[k] + self.strategy.reduce("mean", logs[k], axis=None)
                for k in keys}
      return {k: v / tf.cast(steps, tf.float32) for k, v in sums.items()}

    return train_loop

  def train(self):
    c = self.config
    iterator = iter(self._distributed_dataset(c.train_batch_size, True))
    # A plain tf.data iterator saves its position (shuffle buffers too);
    # distributed iterators cannot, so those resume by skipping batches.
    saves_position = isinstance(iterator, tf.__internal__.tracking.Trackable)
    checkpoint = self._checkpoint(iterator if saves_position else None)
    manager = tf.train.CheckpointManager(
        checkpoint, c.model_dir, max_to_keep=c.keep_checkpoint_max,
        checkpoint_name="ckpt")
    self.restore(manager, checkpoint)
    resumed_at = int(self.optimizer.iterations.numpy())
    if not saves_position and resumed_at:
      iterator = iter(self._distributed_dataset(c.train_batch_size, True,
                                                start_step=resumed_at))
    train_loop = self._build_train_loop()
    writer = tf.summary.create_file_writer(os.path.join(c.model_dir, "train"))
    step = int(self.optimizer.iterations.numpy())
    if step >= c.num_train_steps:
      print(f"already trained: step {step} >= num_train_steps "
            f"{c.num_train_steps}", flush=True)
      return step
    print(f"training {self.model.name} ({self.precision}, "
          f"{self.num_replicas} replica(s), "
          f"{count_params(self.model):,} parameters) from step {step} to "
          f"{c.num_train_steps}", flush=True)
    log_every = c.log_every_steps or c.iterations_per_loop
    tokens_per_seq = float(c.max_seq_length)
    start_step, start_time = step, time.time()
    while step < c.num_train_steps:
      next_save = (step // c.save_checkpoints_steps + 1) * c.save_checkpoints_steps
      next_log = (step // log_every + 1) * log_every
      n = min(c.iterations_per_loop, next_save - step, next_log - step,
              c.num_train_steps - step)
      loop_start = time.time()
      try:
        logs = train_loop(iterator, tf.constant(n, tf.int32))
        logs = {k: float(v) for k, v in logs.items()}
      except tf.errors.DataLossError as e:
        bad = data.find_corrupt_shards(self.meta["files"])
        raise UserError("corrupt or truncated TFRecord: " +
                        ("; ".join(bad) if bad else e.message)) from None
      except tf.errors.InvalidArgumentError as e:
        if "Feature" in e.message or "Key:" in e.message:
          raise UserError(f"TFRecords do not match the expected features "
                          f"{data.FEATURE_NAMES} of length "
                          f"{c.max_seq_length}: "
                          f"{e.message.splitlines()[0][:200]}") from None
        raise
      elapsed = time.time() - loop_start
      step += n
      if not math.isfinite(logs["loss"]):
        raise UserError(
            f"non-finite loss ({logs['loss']}) at step {step}; stopping "
            f"without saving, the last good checkpoint is "
            f"{manager.latest_checkpoint}. Try a lower learning_rate")
      lr = float(keras.ops.convert_to_numpy(self.optimizer.learning_rate))
      seq_per_s = n * c.train_batch_size / max(elapsed, 1e-9)
      overall = (step - start_step) * c.train_batch_size / max(
          time.time() - start_time, 1e-9)
      eta = (c.num_train_steps - step) * c.train_batch_size / max(overall,
                                                                  1e-9)
      parts = [f"step {step}/{c.num_train_steps}"]
      parts += [f"{k} {v:.4f}" for k, v in logs.items()]
      parts += [f"lr {lr:.3g}", f"{seq_per_s:.1f} seq/s",
                f"{seq_per_s * tokens_per_seq:.0f} tok/s",
                f"ETA {format_seconds(eta)}"]
      print(" | ".join(parts), flush=True)
      with writer.as_default(step=step):
        for k, v in logs.items():
          tf.summary.scalar(k, v)
        tf.summary.scalar("learning_rate", lr)
        tf.summary.scalar("sequences_per_second", seq_per_s)
      if step % c.save_checkpoints_steps == 0 or step == c.num_train_steps:
        path = manager.save(checkpoint_number=step)
        print(f"saved {path}", flush=True)
    writer.flush()
    return step

  # ------------------------------------------------------------------ eval
  def evaluate(self):
    """The objective's eval metrics over num_eval_steps batches."""
    c = self.config
    checkpoint = self._checkpoint()  # the optimizer holds the step count
    latest = tf.train.latest_checkpoint(c.model_dir)
    if latest:
      checkpoint.read(latest).expect_partial()
    else:
      print("note: no checkpoint in model_dir; evaluating initial weights")
    iterator = iter(self._distributed_dataset(c.eval_batch_size, False))
    keys = tuple(self.model.LOG_KEYS) + tuple(self.model.EVAL_KEYS)

    @tf.function
    def eval_step(batch):
      outputs = self.model(batch, training=False)
      return {k: outputs[k] for k in keys}

    arrays = {k: [] for k in keys}
    for _ in range(c.num_eval_steps):
      out = self.strategy.run(eval_step, args=(next(iterator),))
      for k in keys:
        for value in self.strategy.experimental_local_results(out[k]):
          value = np.asarray(value)
          arrays[k].append(value.reshape(1) if value.ndim == 0 else value)
    arrays = {k: np.concatenate(v) for k, v in arrays.items()}
    results = self.model.eval_metrics(arrays)
    results["global_step"] = int(self.optimizer.iterations.numpy())
    storage.write_text_atomic(os.path.join(c.model_dir, "eval_results.json"),
                              json.dumps(results, indent=2, sort_keys=True))
    writer = tf.summary.create_file_writer(os.path.join(c.model_dir, "eval"))
    with writer.as_default(step=results["global_step"]):
      for k, v in results.items():
        tf.summary.scalar(k, v)
    return results


def count_params(model):
  return int(sum(np.prod(v.shape) for v in model.trainable_variables))


def format_seconds(seconds):
  seconds = int(seconds)
  if seconds >= 3600:
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
  return f"{seconds // 60}m{seconds % 60:02d}s"
