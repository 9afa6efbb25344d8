"""The fine-tuning loop's TensorFlow backend (finetune/loop.py has the
loop): the devices (tf.distribute), the train batches (tf.data), the
compiled train step (tf.function) and the Predictor's traced eval step."""

import time

import numpy as np
import tensorflow as tf

from finetune import bam
from finetune.distillation import with_teacher_weight
from finetune.loop import FinetuningLoop
from finetune.optimization import create_optimizer
from finetune.prediction import Predictor
from training import distribution
from training.progress import Progress
from training.progress import format_seconds
from training.step import ReplicaUpdate
from util.errors import UserError


class FinetuningRunner(FinetuningLoop):
  """The loop on TensorFlow: any strategy (training/distribution.py)."""

  def _devices(self, config):
    return distribution.get_strategy(config)

  def _predictor(self, config, data):
    return Predictor(config, data)

  def train(self, model, seed):
    config = self.config
    data = self.data.train_data(self.teachers.outputs() if config.distill
                                else None)
    order = self.data.train_order(data, seed)
    total = len(order)
    with self.strategy.scope():  # slot variables beside the model's
      optimizer = create_optimizer(config, model.trainable_variables,
                                   self.model_config.num_hidden_layers, total,
                                   self.model_config.share_layers)
    tasks = {task.name: task for task in self.tasks}
    iterators = {name: self.data.batches(features, config.train_batch_size,
                                         seed, tasks[name].min_trimmed_length)
                 for name, (features, _) in data.items()}
    train_steps = {name: self._train_step(
        model, optimizer, name, None if tasks[name].static_length
        else iterators[name].element_spec) for name in data}
    print(self._training_line(data, total, devices=(
        f"{self.num_replicas} replicas; " if self.num_replicas > 1 else "")),
          flush=True)
    start = last = time.time()
    losses, last_step = [], 0
    # Every log_every_steps, and also each tenth of the run (a short run
    # is not silent until its last step) and at least every 30 s.
    progress = Progress("step", total)
    weight = None
    for step, name in enumerate(order, 1):
      batch = next(iterators[name])
      if config.distill:  # 1 - lambda (section 3.2.2)
        weight = bam.teacher_weight(step - 1, total, config.teacher_annealing)
        losses.append(float(train_steps[name](
            batch, tf.constant(weight, tf.float32))))
      else:
        losses.append(float(train_steps[name](batch)))
      if not np.isfinite(losses[-1]):
        raise UserError(f"non-finite loss at step {step} ({name}); try a "
                        "lower learning_rate")
      if (step % config.log_every_steps == 0 or step == total or
          progress.due(step)):
        now = time.time()
        n = step - last_step
        rate = n * config.train_batch_size / max(now - last, 1e-9)
        eta = (total - step) * (now - start) / step
        bam_lambda = ("" if weight is None else
                      f" | lambda {1 - weight:.3f}")
        print(f"step {step}/{total} | loss {np.mean(losses[-n:]):.4f}"
              f"{bam_lambda} | {rate:.1f} examples/s | elapsed "
              f"{format_seconds(now - start)}, ETA {format_seconds(eta)}",
              flush=True)
        last, last_step = now, step
    return float(np.mean(losses[-config.log_every_steps:]))

  def _train_step(self, model, optimizer, task_name, spec=None):
    """The task's compiled step: step(batch[, teacher_weight]) -> loss,
    run on every replica of the strategy (training/step.py's update).
    spec: the batches' element_spec, whose length is None where they are
    cut to their longest row (finetune/padding.py): one trace for all
    (None: traced per shape)."""
    variables = model.variables_for(task_name)
    update = ReplicaUpdate(optimizer, self.num_replicas, self.config.clip_norm)
    replicas = self.num_replicas

    def replica_step(batch, teacher_weight):
      if teacher_weight is not None:
        batch = with_teacher_weight(batch, teacher_weight)
      with tf.GradientTape() as tape:
        loss, _ = model(batch, task_name=task_name, training=True)
        loss = tf.reduce_mean(loss)
        scaled = update.scale_loss(loss / replicas)
      update.apply(tape.gradient(scaled, variables), variables)
      return loss

    signature = None
    if spec is not None and replicas == 1:  # (else a spec per replica)
      signature = ((spec, tf.TensorSpec([], tf.float32))
                   if self.config.distill else (spec,))

    # Else (several replicas, or a head that needs a known length: a CRF)
    # a trace per length, at most max_seq_length / pad_to_multiple.
    @tf.function(input_signature=signature, jit_compile=self.config.xla)
    def step(batch, teacher_weight=None):
      losses = self.strategy.run(replica_step, args=(batch, teacher_weight))
      return self.strategy.reduce("mean", losses, axis=None)

    return step
