"""The pretraining loop's TensorFlow backend (pretrain/loop.py): any
objective model, any tf.distribute strategy.

A host call runs its steps inside one tf.function; checkpoints hold the
model, the optimizer and the data iterator's state, so a resumed run
continues exactly.
"""

import os
import sys

import keras
import numpy as np
import tensorflow as tf

from pretrain import data
from pretrain import run_dir
from pretrain.loop import PretrainingLoop
from pretrain.objectives import build_model
from training import checkpointing
from training import distribution
from training import optimization
from training.precision import set_precision
from training.progress import Progress as ProgressLines
from training.step import ReplicaUpdate
from util import storage
from util.errors import UserError


class Trainer(PretrainingLoop):
  """Model, optimizer, data and checkpoints for a PretrainingConfig under
  its tf.distribute strategy. `open_source(path)` -> a Source (loading/
  sources.py) reads init_checkpoint; run_pretraining.py passes it
  (pretrain/ is below the loading layer)."""

  def __init__(self, config, open_source=None):
    self.config = config
    self.open_source = open_source
    self.lock, self._commit = None, lambda saved=False: None
    distribution.configure_threads(config)
    self.strategy = distribution.get_strategy(config)
    self.num_replicas = self.strategy.num_replicas_in_sync
    self.is_chief, self.worker_name = distribution.worker_role(self.strategy)
    for name in ("train_batch_size", "eval_batch_size"):
      if getattr(config, name) % self.num_replicas:
        raise UserError(f"{name} {getattr(config, name)} is not divisible by "
                        f"the {self.num_replicas} replicas")
    self.meta = data.load_metadata(config)
    data.check_metadata(self.meta, config)
    if config.skip_corrupt_records:
      self._report_corrupt_shards()
    keras.utils.set_random_seed(config.seed)  # init, dropout, sampling
    self.precision = distribution.resolve_precision(config)
    set_precision(self.precision)
    # A training run holds model_dir's lock until close() (or its end);
    # its config is written once the checkpoint is restored (train()).
    self.lock, self._commit = run_dir.prepare(
        config, self.is_chief, lock=config.do_train and self.is_chief)
    # Once training: the data iterator, the checkpoint that saves it with
    # the model and optimizer, and the series of saves.
    self._iterator = self._train_checkpoint = self._manager = None
    try:
      self._build(config)
    except BaseException:
      self.close()
      raise

  def _build(self, config):
    counts = (data.load_token_counts(self.meta) if config.unigram_generator
              else None)
    with self.strategy.scope():
      self.model = build_model(config, counts,
                               self.meta["special_ids"].values())
      self.model.build_variables()
      self.optimizer = optimization.create_optimizer(config)
      optimization.build_optimizer(self.optimizer,
                                   self.model.trainable_variables)
      if self.precision == "float16":
        self.optimizer = keras.optimizers.LossScaleOptimizer(self.optimizer)
        self.optimizer.build(self.model.trainable_variables)
    self.update = ReplicaUpdate(self.optimizer, self.num_replicas,
                                config.clip_norm, config.skip_nonfinite_steps)

  def _report_corrupt_shards(self):
    """With skip_corrupt_records, says up front what will be skipped."""
    bad = data.scan_shards(self.meta["files"])
    for path, readable, error in bad:
      print(f"warning: skipping the rest of {path} after record {readable} "
            f"({error})", flush=True)
    if bad:
      print(f"skip_corrupt_records: {len(bad)} of {len(self.meta['files'])} "
            f"shards are damaged; training reads what precedes the damage",
            flush=True)

  def _checkpoint(self, iterator=None, with_optimizer=True):
    return checkpointing.make_checkpoint(
        self.model, self.optimizer if with_optimizer else None, iterator)

  def _distributed_dataset(self, global_batch, is_training, start_step=0):
    def dataset_fn(input_context):
      batch = input_context.get_per_replica_batch_size(global_batch)
      return data.make_dataset(self.config, self.meta, batch, is_training,
                               input_context, start_step=start_step)
    if self.num_replicas == 1 and self.config.strategy == "default":
      return dataset_fn(tf.distribute.InputContext())
    return self.strategy.distribute_datasets_from_function(dataset_fn)

  # ------------------------------------------------ the loop's backend
  def _describe(self):
    return f"{self.precision}, {self.num_replicas} replica(s)"

  def _step(self):
    return int(self.optimizer.iterations.numpy())

  def _latest(self):
    return checkpointing.latest_checkpoint(self.config.model_dir)

  def _exists(self, path):
    return tf.io.gfile.exists(path + ".index")

  def _open_training(self):
    config = self.config
    iterator = iter(self._distributed_dataset(config.train_batch_size, True))
    # A plain tf.data iterator saves its position (shuffle buffers too);
    # distributed iterators cannot, so those resume by skipping batches.
    self._saves_position = isinstance(iterator,
                                      tf.__internal__.tracking.Trackable)
    checkpoint = self._checkpoint(iterator if self._saves_position else None)
    self._iterator, self._train_checkpoint = iterator, checkpoint
    self._manager = self._checkpoint_manager(checkpoint)

  def _restore(self, path):
    # Training reads the data position too; evaluation only what it holds.
    checkpointing.read_checkpoint(
        self._train_checkpoint or self._checkpoint(), path)

  def _initialise(self, path):
    try:
      super()._initialise(path)
    except checkpointing.RESTORE_ERRORS as e:
      raise checkpointing.restore_error(path, e) from None

  def _read_own_weights(self, source):
    try:
      checkpointing.read_checkpoint(self._checkpoint(with_optimizer=False),
                                    source.path)
      return True
    except UserError:
      return False  # another objective or sharing: match networks by name

  def _start_steps(self, step):
    if not self._saves_position and step:
      self._iterator = iter(self._distributed_dataset(
          self.config.train_batch_size, True, start_step=step))
    self._shards = data.ShardWatch(self.meta["files"])
    self._train_loop = self._build_train_loop()

  def _begin_step(self, step, restored=False):
    changed = self.model.begin_step(step, restored)
    if changed:
      self._train_loop = self._build_train_loop()  # the new variable list
    return changed

  def _run_steps(self, n):
    """One host call of n steps; data errors become one clear line."""
    try:
      logs = self._train_loop(self._iterator, tf.constant(n, tf.int32))
      return {k: float(v) for k, v in logs.items()}
    except (tf.errors.DataLossError, tf.errors.NotFoundError) as e:
      raise data.read_error(e, self.meta["files"]) from None
    except tf.errors.InvalidArgumentError as e:
      if "Feature" in e.message or "Key:" in e.message:
        raise UserError(f"TFRecords do not match the expected features "
                        f"{data.FEATURE_NAMES} of length "
                        f"{self.config.max_seq_length}: "
                        f"{e.message.splitlines()[0][:200]}") from None
      raise

  def _data_changed(self):
    changed = self._shards.changed()
    if changed and self.config.skip_corrupt_records:
      self._shards.accept()
    return changed

  def _bad_weights(self):
    return [v.path for v in self.model.variables
            if "float" in str(v.dtype) and
            not bool(tf.reduce_all(tf.math.is_finite(v.value)))]

  def _learning_rate(self):
    return float(keras.ops.convert_to_numpy(self.optimizer.learning_rate))

  # Every worker takes part in each save (the variables are synchronised by
  # collectives), but only the chief writes to model_dir; the others write
  # to a scratch directory that is deleted again, unless
  # keep_worker_checkpoints asks to keep their latest one for inspection.
  def _worker_dir(self):
    return os.path.join(self.config.model_dir, "workers", self.worker_name)

  def _checkpoint_manager(self, checkpoint):
    config = self.config
    directory = config.model_dir if self.is_chief else self._worker_dir()
    if not self.is_chief:
      return checkpointing.CheckpointSeries(checkpoint, directory, keep=1)
    return checkpointing.CheckpointSeries(
        checkpoint, directory, config.keep_checkpoint_max,
        scheduled=lambda step: (step % config.save_checkpoints_steps == 0 or
                                step == config.num_train_steps))

  def _save(self, step):
    path = self._manager.save(step)
    if not self.is_chief and not self.config.keep_worker_checkpoints:
      storage.rmtree(self._worker_dir())
    return path

  def _writer(self, name):
    if not self.is_chief:
      return tf.summary.create_noop_writer()
    return tf.summary.create_file_writer(
        os.path.join(self.config.model_dir, name))

  # ----------------------------------------------------------- the step
  def _with_global_denominators(self, batch):
    """Adds the mean over replicas of each loss denominator, so averaging
    replica losses equals the loss of the global batch (exactly)."""
    local = {
        "masked_lm_denominator": tf.reduce_sum(batch["masked_lm_weights"]),
        "input_mask_denominator": tf.reduce_sum(
            tf.cast(batch["input_mask"], tf.float32)),
    }
    if "scoring_mask" in batch:  # Electric's cloze loss (candidates)
      local["scoring_mask_denominator"] = tf.reduce_sum(batch["scoring_mask"])
    if self.num_replicas > 1:
      local = tf.distribute.get_replica_context().all_reduce("mean", local)
    return dict(batch, **local)

  def _grads(self, batch):
    return replica_grads(self.model, self.update, batch, self.num_replicas)

  def _replica_step(self, batch):
    grads, logs = self._grads_fn(self._with_global_denominators(batch))
    logs.update(self.update.apply(grads, self.model.variables_to_train()))
    return logs

  def _build_train_loop(self):
    """A tf.function running `steps` steps; returns the mean of each log
    over its finite steps, and how many steps were non-finite."""
    self._grads_fn = tf.function(self._grads, jit_compile=self.config.xla)
    keys = tuple(self.model.LOG_KEYS) + ("grad_norm",)

    @tf.function
    def train_loop(iterator, steps):
      sums = {k: tf.constant(0.0) for k in keys}
      finite_steps = tf.constant(0.0)
      for _ in tf.range(steps):
        logs = self.strategy.run(self._replica_step, args=(next(iterator),))
        finite = tf.cast(tf.equal(self.strategy.reduce(
            "mean", logs["finite"], axis=None), 1.0), tf.float32)
        sums = {k: sums[k] + tf.where(
            finite > 0, self.strategy.reduce("mean", logs[k], axis=None), 0.0)
                for k in keys}
        finite_steps += finite
      out = {k: v / tf.maximum(finite_steps, 1.0) for k, v in sums.items()}
      out["nonfinite_steps"] = tf.cast(steps, tf.float32) - finite_steps
      return out

    return train_loop

  # ----------------------------------------------------------------- eval
  def _eval_outputs(self):
    config = self.config
    print(f"eval data: {self.meta['eval_source']} "
          f"({len(self.meta['eval_files'])} shard(s))", flush=True)
    iterator = iter(self._distributed_dataset(config.eval_batch_size, False))
    keys = tuple(self.model.LOG_KEYS) + tuple(self.model.EVAL_KEYS)

    @tf.function
    def eval_step(batch):
      outputs = self.model(batch, training=False)
      return {k: outputs[k] for k in keys}

    arrays = {k: [] for k in keys}
    lines = ProgressLines("eval", config.num_eval_steps, "batches", sys.stdout)
    for done in range(1, config.num_eval_steps + 1):
      try:
        out = self.strategy.run(eval_step, args=(next(iterator),))
      except (tf.errors.DataLossError, tf.errors.NotFoundError) as e:
        raise data.read_error(e, self.meta["eval_files"]) from None
      for k in keys:
        for value in self.strategy.experimental_local_results(out[k]):
          value = np.asarray(value)
          arrays[k].append(value.reshape(1) if value.ndim == 0 else value)
      lines.update(done)
    lines.finish(
        f"{config.num_eval_steps * config.eval_batch_size:,} sequences",
        always=False)
    return self.model.eval_metrics(
        {k: np.concatenate(v) for k, v in arrays.items()})


def replica_grads(model, update, batch, num_replicas=1):
  """Forward + backward on one replica's batch: (grads of
  model.variables_to_train(), the LOG_KEYS), as the train step takes them
  to update.apply."""
  with tf.GradientTape() as tape:
    outputs = model(batch, training=True)
    loss = update.scale_loss(outputs["loss"] / num_replicas)
  grads = tape.gradient(loss, model.variables_to_train())
  logs = {k: tf.cast(outputs[k], tf.float32) for k in model.LOG_KEYS}
  return grads, logs

