"""The TensorFlow-free fine-tuning driver: run_finetuning.py's model, heads,
losses and optimizer under KERAS_BACKEND=jax, fed from finetune/arrays.py.

What it shares with the TensorFlow runner (finetune/trainer.py): the
FinetuningModel (finetune/model.py: the encoder and the task's own head and
loss), the optimizer (finetune/optimization.py:
AdamW, layer-wise decay, warmup then linear decay), global-norm clipping,
the mean per-row loss, train steps from rows x epochs / batch, a new
permutation of the rows each epoch. What it does its own way, as JAX wants it: one
jitted call runs `chunk` train steps (lax.scan of value_and_grad of
`stateless_call` and the optimizer's `stateless_apply`; the steps past the
trial's last one, in its last chunk, leave the state as it was) per task,
traced once and reused by every trial (the state goes in and out as
arguments); the rows stay on the device and a call is handed only its
batches' indices. Data parallel over `devices` when there are several
(keras.distribution.DataParallel, as pretraining: the state and the rows
replicated, each batch split by rows, XLA sums the gradients). Several
tasks (multi-task, BAM's student): one model with a head each, the steps
in finetune/task_order.py's order as on TensorFlow, each step a call of
its task's program (its rows, length and head), whose gradient reaches
only what that task trains (the encoder and its head), so the optimizer
leaves the other heads and their slots alone, as TensorFlow's `apply`
over `variables_for(task)` does.
"""

import collections
import time

import jax
import jax.numpy as jnp
import keras
import numpy as np

from finetune import arrays as arrays_lib
from finetune import bam
from finetune import length_groups
from finetune import padding
from finetune import task_order
from finetune.model import FinetuningModel
from finetune.optimization import create_optimizer
from pretrain.arrays import batch_rows
from training.jax_devices import Devices
from training.jax_devices import fetch
from training.optimization import clip_by_global_norm
from training.precision import set_precision
from util.errors import UserError


class TaskRows:
  """One task's rows on the devices: its splits' packed columns, how many
  rows each has, each row's length, and the length a batch runs at."""

  def __init__(self, config, task, columns, put):
    self.task = task
    self.rows = {split: len(c["input_ids"]) for split, c in columns.items()}
    self.seq_len = columns["train"]["input_ids"].shape[-1]
    # Each call's batches at their longest row (finetune/padding.py), a
    # program jitted per length; 0: at seq_len.
    self.multiple = padding.multiple_for(config, self.seq_len)
    # Per row (a multiple-choice row: its longest option), what its
    # batch's length and group_by_length go by.
    self.num_tokens = {split: np.asarray(c["num_tokens"]).reshape(
        len(c["num_tokens"]), -1).max(axis=1) for split, c in columns.items()}
    self.data = {split: {k: put(v) for k, v in c.items()}
                 for split, c in columns.items()}

  def batch_numpy(self, split, rows):
    columns = {k: np.asarray(v)[np.asarray(rows)]
               for k, v in self.data[split].items()}
    return {k: np.asarray(v) for k, v in
            arrays_lib.unpack_features(columns).items()}

  def features(self, split, rows, length):
    return arrays_lib.unpack_features(padding.cut(
        {k: jnp.take(v, rows, axis=0) for k, v in self.data[split].items()},
        length))

  def length(self, split, rows):
    """The length (static: one program each) rows [...] run at."""
    if not self.multiple:
      return self.seq_len
    tokens = self.num_tokens[split][np.asarray(rows).reshape(-1)]
    mask = np.arange(self.seq_len)[None] < tokens[:, None]
    return padding.batch_length({"input_mask": mask}, self.multiple,
                                self.task.min_trimmed_length)


class JaxFinetuner:
  """The tasks' jitted train steps over their TaskArrays; `fit`
  fine-tunes a model with one seed (the fine-tuning loop's, which
  predicts with its own jitted step: finetune/jax_backend.py)."""

  def __init__(self, config, model_config, tasks, data, devices=None,
               log=print, chunk=None, model=None):
    if keras.backend.backend() != "jax":
      raise UserError("the JAX fine-tuning driver needs KERAS_BACKEND=jax")
    self.config, self.model_config = config, model_config
    self.tasks, self.task = list(tasks), tasks[0]
    self.log = log
    # A device, or several to train data parallel over (default: the first).
    if devices is None or not isinstance(devices, (list, tuple)):
      devices = [devices or jax.devices()[0]]
    self.placed = Devices(devices, config)
    self.device = self.placed.devices[0]
    infos = {t.name: data.meta["tasks"][t.name] for t in self.tasks}
    self.steps_by_task = {n: info["train_steps"] for n, info in infos.items()}
    self.rows_by_task = {n: info["train_rows"] for n, info in infos.items()}
    self.num_steps = sum(self.steps_by_task.values())
    self.inputs = {t.name: TaskRows(config, t, data.splits[t.name], self._put)
                   for t in self.tasks}
    self.first = self.inputs[self.task.name]
    # A small model's step is shorter than a host call on a GPU: steps go
    # `chunk` to a call (never more than the trial has), all at the
    # chunk's longest row. On the CPU a call costs nothing beside a step:
    # one a call, each at its own batch's length; and one a call with
    # several tasks, whose steps alternate between their programs.
    if chunk is None:
      chunk = (1 if len(self.tasks) > 1 or (
          self.device.platform == "cpu" and self.first.multiple) else 50)
    self.chunk = max(1, min(chunk, self.num_steps))
    # BAM's 1 - lambda at each step, as the TensorFlow runner's (and past
    # the last step, for the last chunk's invalid steps).
    self.teacher_weights = np.array(
        [bam.teacher_weight(step, self.num_steps, config.teacher_annealing)
         for step in range(self.num_steps + self.chunk)], np.float32)
    set_precision(config.mixed_precision)
    # The steps' template (its layers; the weights go in as arguments):
    # `model`, a built FinetuningModel of the tasks (the loop's), or one
    # built here.
    self.model = model if model is not None else self._new_model(
        config.seed)
    # Per task, which trainable variables its steps train.
    self.trains = {}
    for name in self.inputs:
      own = {id(v) for v in self.model.variables_for(name)}
      self.trains[name] = [id(v) in own
                           for v in self.model.trainable_variables]
    self.optimizer = create_optimizer(
        config, self.model.trainable_variables,
        model_config.num_hidden_layers, self.num_steps,
        model_config.share_layers)
    # On the host: each trial's state is placed afresh (its buffers are
    # donated to the step).
    self.initial_opt = [np.asarray(v.value) for v in self.optimizer.variables]
    self._train_fn = jax.jit(self._train_chunk, donate_argnums=0,
                             static_argnums=(1, 4))

  def _put(self, value):
    return self.placed.put(value)

  def _new_model(self, seed):
    """A FinetuningModel built with `seed` (the heads' init and the
    dropout seeds)."""
    keras.utils.set_random_seed(seed)
    model = FinetuningModel(self.model_config, self.tasks,
                            name="finetuning")
    for name, inputs in self.inputs.items():  # builds every head
      one = {k: v[:1] for k, v in inputs.batch_numpy("train", [0]).items()}
      model(one, task_name=name, training=False)
    return model

  # ------------------------------------------------------------- steps
  def _train_step(self, state, name, rows, length, teacher_weight=None):
    """One step of task `name` on rows [B] cut to `length`;
    teacher_weight: BAM's 1 - lambda this step (a distilling run's,
    finetune/bam.py)."""
    trainable, fixed, opt_vars = state
    features = self.inputs[name].features("train", rows, length)
    if self.config.distill:
      features["teacher_weight"] = jnp.full(
          rows.shape[:1], teacher_weight, jnp.float32)
    features = self.placed.split(features)

    def loss_fn(trainable, fixed):
      (loss, _), fixed = self.model.stateless_call(
          trainable, fixed, features, task_name=name, training=True)
      return jnp.mean(loss.astype(jnp.float32)), fixed

    (loss, fixed), grads = jax.value_and_grad(loss_fn, has_aux=True)(
        trainable, fixed)
    # No gradient for the other tasks' heads: their weights and slots stay.
    grads = [g if trains else None
             for g, trains in zip(grads, self.trains[name])]
    grads, _ = clip_by_global_norm(grads, self.config.clip_norm)
    trainable, opt_vars = self.optimizer.stateless_apply(opt_vars, grads,
                                                         trainable)
    return (trainable, fixed, opt_vars), loss

  def _train_chunk(self, state, name, rows, valid, length, weights):
    """Steps of task `name` over rows [chunk, B] cut to `length`, BAM's
    teacher weight of each in `weights` [chunk]; a step whose `valid` is
    False (past the trial's end) keeps the state. Returns the state and
    the losses."""
    def body(state, xs):
      step_rows, keep, weight = xs
      new_state, loss = self._train_step(state, name, step_rows, length,
                                         weight)
      state = jax.tree_util.tree_map(
          lambda new, old: jnp.where(keep, new, old), new_state, state)
      return state, loss
    return jax.lax.scan(body, state, (rows, valid, weights))

  def _state(self, model):
    """Fresh device copies (the train step donates them)."""
    def put(values):
      return [self._put(np.asarray(v)) for v in values]
    return (put(v.value for v in model.trainable_variables),
            put(v.value for v in model.non_trainable_variables),
            put(self.initial_opt))

  def _chunk_rows(self, rows, first):
    """A call's rows [n <= chunk, B] (padded with their first to the
    chunk, marked not valid), placed, and each step's BAM teacher weight
    from global step `first` on (as the TensorFlow runner's)."""
    valid = np.arange(self.chunk) < len(rows)
    weights = self.teacher_weights[first:first + self.chunk]
    if len(rows) < self.chunk:
      rows = np.concatenate([rows, np.resize(rows[:1], (
          self.chunk - len(rows),) + rows.shape[1:])])
    return self._put(rows), self._put(valid), self._put(weights)

  # ------------------------------------------------------------ trials
  def fit(self, model, seed):
    """Fine-tunes `model` (a FinetuningModel of these tasks and shape: the
    fine-tuning loop's, finetune/jax_backend.py) in place, its rows in
    `seed`'s order; returns {"steps", "train_s", "final_loss"}."""
    state, losses, train_s = self._train(self._state(model), seed)
    self._assign(model, state)
    return self._summary(losses, train_s)

  def calls(self, seed):
    """(task, its first step in the run, rows [n <= chunk, B]) of each
    call of a trial with `seed`: the tasks' steps in task_order's order,
    each task's rows drawn by batch_rows over its own rows (a new
    permutation each epoch), consecutive steps of one task a call."""
    config = self.config
    names = task_order.train_order(config, self.steps_by_task,
                                   self.rows_by_task, seed)
    counts = collections.Counter(names)
    orders, taken = {}, collections.Counter()
    for name, steps in counts.items():
      inputs = self.inputs[name]
      orders[name] = length_groups.group_rows(
          batch_rows(seed, inputs.rows["train"], config.train_batch_size, 0,
                     steps),
          inputs.num_tokens["train"], config.group_by_length, seed)
    first = 0
    while first < len(names):
      name, n = names[first], 1
      while (n < self.chunk and first + n < len(names)
             and names[first + n] == name):
        n += 1
      yield name, first, orders[name][taken[name]:taken[name] + n]
      taken[name] += n
      first += n

  def _train(self, state, seed):
    """(state, losses, seconds) after the trial's steps from `state`."""
    start = time.time()
    losses, sizes = [], []
    for name, first, rows in self.calls(seed):
      sizes.append(len(rows))
      length = self.inputs[name].length("train", rows)
      rows, valid, weights = self._chunk_rows(rows, first)
      state, chunk_losses = self._train_fn(state, name, rows, valid, length,
                                           weights)
      losses.append(chunk_losses)
    losses = np.concatenate([fetch(l)[:n] for l, n in zip(
        losses, sizes)]).astype(np.float32)
    train_s = time.time() - start
    if not np.all(np.isfinite(losses)):
      step = int(np.argmin(np.isfinite(losses))) + 1
      raise UserError(f"{','.join(self.inputs)}: non-finite loss at step "
                      f"{step}; try a lower learning_rate")
    return state, losses, train_s

  @staticmethod
  def _assign(model, state):
    trainable, fixed, _ = state
    for variables, values in ((model.trainable_variables, trainable),
                              (model.non_trainable_variables, fixed)):
      for variable, value in zip(variables, values):
        variable.assign(fetch(value))  # several processes: replicated

  def _summary(self, losses, train_s):
    tail = max(1, len(losses) // 10)
    return {"steps": self.num_steps, "train_s": train_s,
            "final_loss": float(losses[-tail:].mean())}
