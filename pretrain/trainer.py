"""The one pretraining driver: any objective model, any tf.distribute strategy.

Host loop: run `iterations_per_loop` steps inside one tf.function call,
log, checkpoint every `save_checkpoints_steps` (model, optimizer and data
iterator state, so a resumed run continues exactly), repeat.
"""

import json
import os
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from interop.weights import import_weights
from pretrain import data
from pretrain import run_dir
from pretrain.objectives import build_model
from training import checkpointing
from training import distribution
from training import optimization
from training.progress import Progress as ProgressLines
from training.preemption import Preempted
from training.preemption import PreemptionGuard
from training.step import ReplicaUpdate
from training.step_log import StepLog
from pretrain import flops
from util import storage
from util.errors import UserError
from util.errors import cause

class Trainer(run_dir.HoldsLock):
  """Builds model, optimizer, data and checkpoints for a PretrainingConfig.
  `open_source(path)` -> a Source (loading/sources.py) reads
  init_checkpoint; run_pretraining.py passes it (pretrain/ is below the
  loading layer)."""

  def __init__(self, config, open_source=None):
    self.config = config
    self.open_source = open_source
    self.lock, self._commit_config = None, lambda saved=False: None
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
    distribution.set_precision(self.precision)
    # A training run holds model_dir's lock until close() (or its end);
    # its config is written once the checkpoint is restored (train()).
    self.lock, self._commit_config = run_dir.prepare(
        config, self.is_chief, lock=config.do_train and self.is_chief)
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
    self.skipped_steps = 0

  # ---------------------------------------------------------------- setup
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

  def restore(self, checkpoint):
    """Restores the latest checkpoint of model_dir, or init_checkpoint."""
    config = self.config
    latest = checkpointing.latest_checkpoint(config.model_dir)
    try:
      if latest:
        checkpoint.read(latest).assert_existing_objects_matched()
        print(f"resumed from {latest} at step "
              f"{int(self.optimizer.iterations.numpy())}", flush=True)
      elif config.init_checkpoint:
        self._initialise(config.init_checkpoint)
    except (tf.errors.OpError, AssertionError, ValueError, IndexError,
            OSError) as e:  # a truncated data file raises IndexError
      first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
      raise UserError(
          f"cannot restore checkpoint {latest or config.init_checkpoint}"
          f": {first}") from None

  def _initialise(self, path):
    """Weights (no optimizer state) from another run of ours with this
    architecture, or from any format self.open_source reads (the TF1
    release, transformers, .keras): every network of this model must be
    found there with the same shapes, else one error lists what differs."""
    if self.open_source is None:
      raise UserError(f"cannot initialise from {path}: this Trainer was "
                      "made without open_source (loading/sources.py)")
    source = self.open_source(path)
    if source.kind == "ours":
      try:
        checkpointing.read_checkpoint(
            self._checkpoint(with_optimizer=False), source.path)
        print(f"initialised weights from {source.path}", flush=True)
        return
      except UserError:
        pass  # another objective or sharing: match the networks by name
    weights = source.weights()
    import_weights(self.model, weights, source=path,
                   require=self.model.networks())
    print(f"initialised weights from {path} ({source.kind}: "
          f"{', '.join(weights)})", flush=True)

  # ------------------------------------------------------ several workers
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

  def _save(self, manager, step):
    self._check_weights(manager, step)
    path = manager.save(step)
    self._commit_config(saved=True)  # changed hparams: recorded now
    if not self.is_chief and not self.config.keep_worker_checkpoints:
      storage.rmtree(self._worker_dir())
    return path

  def _summary_writer(self, name):
    if not self.is_chief:
      return tf.summary.create_noop_writer()
    return tf.summary.create_file_writer(
        os.path.join(self.config.model_dir, name))

  # ----------------------------------------------------------------- train
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

  def train(self):
    config = self.config
    iterator = iter(self._distributed_dataset(config.train_batch_size, True))
    # A plain tf.data iterator saves its position (shuffle buffers too);
    # distributed iterators cannot, so those resume by skipping batches.
    saves_position = isinstance(iterator, tf.__internal__.tracking.Trackable)
    checkpoint = self._checkpoint(iterator if saves_position else None)
    manager = self._checkpoint_manager(checkpoint)
    self.restore(checkpoint)
    self._commit_config()  # nothing is written before this point
    step = int(self.optimizer.iterations.numpy())
    if not saves_position and step:
      iterator = iter(self._distributed_dataset(config.train_batch_size, True,
                                                start_step=step))
    self.model.begin_step(step, restored=True)
    boundaries = self.model.schedule_boundaries()
    train_loop = self._build_train_loop()
    writer = self._summary_writer("train")
    if step >= config.num_train_steps:
      print(f"already trained: step {step} >= num_train_steps "
            f"{config.num_train_steps}", flush=True)
      return step
    print(f"training {self.model.name} ({self.precision}, "
          f"{self.num_replicas} replica(s), "
          f"{count_params(self.model):,} parameters) from step {step} to "
          f"{config.num_train_steps}", flush=True)
    # ELECTRA appendix E's convention, as the paper's Table 1 counts.
    print(f"FLOPs: {flops.train_flops_per_step(config):.3g} per step, "
          f"{flops.total_train_flops(config):.3g} for the whole run (ELECTRA "
          "appendix E convention)", flush=True)
    log_every = config.log_every_steps or config.iterations_per_loop
    progress = StepLog(config, step)
    shards = data.ShardWatch(self.meta["files"])
    last_save = time.time()
    with PreemptionGuard() as preemption:
      while step < config.num_train_steps:
        next_save = (step // config.save_checkpoints_steps + 1) * \
            config.save_checkpoints_steps
        next_log = (step // log_every + 1) * log_every
        n = min(config.iterations_per_loop, next_save - step, next_log - step,
                config.num_train_steps - step)
        n = min([n] + [b - step for b in boundaries if b > step])
        n = progress.steps(step, n, log_every)  # a line every ~15 s
        loop_start = time.time()
        logs = self._run_loop(train_loop, iterator, n)
        elapsed = time.time() - loop_start
        step += n
        self._check_shards(shards, manager)
        self._check_finite(logs, step, n, manager)
        lr = float(keras.ops.convert_to_numpy(self.optimizer.learning_rate))
        progress.log(step, n, elapsed, logs, lr, writer)
        if step in boundaries:
          # The objective's own schedule (two-stage training's switch); when
          # what trains changed, a new loop traces the new variable list.
          changed = self.model.begin_step(step)
          if changed:
            train_loop = self._build_train_loop()
            print(changed, flush=True)
        timed = (config.save_checkpoints_secs and
                 time.time() - last_save >= config.save_checkpoints_secs)
        if (step % config.save_checkpoints_steps == 0 or timed or
            step == config.num_train_steps or preemption.requested):
          path = self._save(manager, step)
          last_save = time.time()
          print(f"saved {path}", flush=True)
        if preemption.requested:
          writer.flush()
          raise Preempted(f"{preemption.name}: saved step {step} and "
                          "stopped", preemption.exit_code)
    writer.flush()
    return step

  def _run_loop(self, train_loop, iterator, n):
    """One host call of n steps; data errors become one clear line."""
    config = self.config
    try:
      logs = train_loop(iterator, tf.constant(n, tf.int32))
      return {k: float(v) for k, v in logs.items()}
    except (tf.errors.DataLossError, tf.errors.NotFoundError) as e:
      raise data.read_error(e, self.meta["files"]) from None
    except tf.errors.InvalidArgumentError as e:
      if "Feature" in e.message or "Key:" in e.message:
        raise UserError(f"TFRecords do not match the expected features "
                        f"{data.FEATURE_NAMES} of length "
                        f"{config.max_seq_length}: "
                        f"{e.message.splitlines()[0][:200]}") from None
      raise

  def _check_shards(self, shards, manager):
    """A shard deleted or damaged while the run reads it stops the run
    before its next save (skip_corrupt_records: a warning)."""
    changed = shards.changed()
    if changed and self.config.skip_corrupt_records:
      print(f"warning: {changed}", flush=True)
      shards.accept()
    elif changed:
      raise UserError(f"{changed}; stopping without saving, "
                      f"{self._last_good(manager)}")

  def _check_finite(self, logs, step, n, manager):
    """Non-finite steps stop the run before anything is saved, unless they
    were skipped (skip_nonfinite_steps, or float16's loss scaling)."""
    bad = int(logs.pop("nonfinite_steps"))
    if not bad:
      return
    skipping = self.config.skip_nonfinite_steps or (
        self.precision == "float16")
    if skipping and bad < n:
      self.skipped_steps += bad
      print(f"skipped {bad} non-finite step(s) before step {step} "
            f"({self.skipped_steps} in this run)", flush=True)
      return
    what = (f"all {n} steps up to {step} were non-finite" if skipping else
            f"non-finite loss or gradients at step {step - n + 1}-{step}")
    raise UserError(f"{what}; stopping without saving, "
                    f"{self._last_good(manager)}. Try a lower learning_rate")

  def _check_weights(self, manager, step):
    """An update can make weights inf or NaN after a finite loss (a huge
    learning rate): such weights are never saved, so the newest
    checkpoint stays the last finite one and none is rotated out."""
    bad = [v.path for v in self.model.variables
           if "float" in str(v.dtype) and
           not bool(tf.reduce_all(tf.math.is_finite(v.value)))]
    if bad:
      raise UserError(
          f"the weights after step {step} are not finite ({len(bad)} "
          f"variable(s), e.g. {bad[0]}); stopping without saving, "
          f"{self._last_good(manager)}. Try a lower learning_rate")

  @staticmethod
  def _last_good(manager):
    latest = manager.latest_checkpoint
    return (f"the last good checkpoint is {latest}" if latest else
            "no checkpoint was saved yet")

  # ------------------------------------------------------------------ eval
  def evaluate(self):
    """The objective's eval metrics over num_eval_steps batches."""
    config = self.config
    checkpoint = self._checkpoint()  # the optimizer holds the step count
    latest = config.eval_checkpoint or checkpointing.latest_checkpoint(
        config.model_dir)
    if config.eval_checkpoint and not tf.io.gfile.exists(latest + ".index"):
      raise UserError(f"eval_checkpoint not found: {latest}")
    if latest:
      checkpointing.read_checkpoint(checkpoint, latest)
    elif config.init_checkpoint:
      self._initialise(config.init_checkpoint)
    else:
      print("note: no checkpoint in model_dir; evaluating initial weights")
    self.model.begin_step(int(self.optimizer.iterations.numpy()),
                          restored=True)
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
    arrays = {k: np.concatenate(v) for k, v in arrays.items()}
    results = self.model.eval_metrics(arrays)
    results["global_step"] = int(self.optimizer.iterations.numpy())
    if self.is_chief and not config.eval_checkpoint:  # the latest model's
      path = os.path.join(config.model_dir, "eval_results.json")
      try:
        storage.write_text_atomic(
            path, json.dumps(results, indent=2, sort_keys=True))
      except (OSError, tf.errors.OpError) as e:
        raise UserError(f"cannot write {path}: {cause(e)}") from None
    writer = self._summary_writer("eval")
    with writer.as_default(step=results["global_step"]):
      for k, v in results.items():
        tf.summary.scalar(k, v)
    return results


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


def count_params(model):
  return int(sum(np.prod(v.shape) for v in model.trainable_variables))
