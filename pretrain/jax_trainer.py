"""The TensorFlow-free pretraining driver: the same objective models under
KERAS_BACKEND=jax, fed from NumPy arrays (pretrain/arrays.py).

What it shares with the TensorFlow driver (pretrain/trainer.py): the
config (pretrain/config.py), the objective models (pretrain/objectives,
built by `build_model`), the masking (pretrain/masking.py `mask_batch`,
its noise drawn here inside the jitted step), the optimizer and schedule
(training/optimization.py: AdamW or LAMB, WarmupPolynomialDecay, no decay
for LayerNorm and biases), global-norm clipping, the eval metrics of each
objective (`eval_metrics`) and the FLOPs accounting (pretrain/flops.py).
What it does its own way, as JAX wants it:
  * one jitted function runs `chunk` steps (lax.scan): gather the batch's
    rows from the arrays kept on the devices, unpack and mask them,
    value_and_grad of `model.stateless_call`, clip, and the optimizer's
    `stateless_apply`; the host only hands over the rows' indices;
  * the schedule's total and warmup steps are arguments of that function,
    so one compiled step serves a run of any length (the GPU slot's
    timing run and its training run share it through JAX's compilation
    cache, slot/pretrain_phase.py);
  * data parallelism over all local devices with keras.distribution
    (DataParallel: variables replicated, each batch split on its first
    axis; XLA sums the gradients); with input_sharding files each device
    keeps only its own share of the training rows and draws its rows of
    every batch from it (pretrain/shares.py), with batches every row;
  * weights are written as .npz shards (interop/npz_weights.py) that
    --init-checkpoint reads on the CPU.
The run around it (checkpoints, resume, cadence, the objective's
schedule) is pretrain/loop.py's, through pretrain/jax_run.py.
"""

import dataclasses
import json
import time
import warnings

import jax
import jax.numpy as jnp
import keras
import numpy as np

from interop import npz_weights
from interop.weights import export_weights
from pretrain import arrays as arrays_lib
from pretrain import masking
from pretrain import shares as shares_lib
from pretrain.objectives import build_model
from training import optimization
from training.jax_devices import Devices
from training.jax_devices import fetch
from training.precision import set_precision
from util.errors import UserError


def resolve_precision(config, devices):
  """'auto': bfloat16 on GPUs and TPUs, float32 on CPUs."""
  if config.mixed_precision == "auto":
    return ("bfloat16" if devices[0].platform in ("gpu", "cuda", "tpu")
            else "float32")
  return config.mixed_precision


class JaxTrainer:
  """Model, optimizer, device-resident data and jitted steps for a
  PretrainingConfig over loaded pretrain/arrays.py Arrays."""

  def __init__(self, config, arrays, devices=None, log=print):
    self.config, self.arrays, self.log = config, arrays, log
    if keras.backend.backend() != "jax":
      raise UserError("the JAX driver needs KERAS_BACKEND=jax")
    arrays.check(config)
    self.placed = Devices(devices or jax.devices(), config)
    self.devices = self.placed.devices
    self.precision = resolve_precision(config, self.devices)
    set_precision(self.precision)
    self.distribution = self.placed.distribution
    keras.distribution.set_distribution(self.distribution)
    keras.utils.set_random_seed(config.seed)
    special = arrays.meta["special_ids"]
    counts = arrays.token_counts() if config.unigram_generator else None
    self.model = build_model(config, counts, special.values())
    self.model.build_variables()
    # A float learning rate is an optimizer variable, which the step sets
    # from the shared schedule with a traced number of total steps.
    inner = optimization.create_optimizer(
        config, schedule=float(config.learning_rate))
    optimization.build_optimizer(inner, self.model.trainable_variables)
    self.optimizer = inner
    if self.precision == "float16":  # dynamic loss scaling, as on TF
      self.optimizer = keras.optimizers.LossScaleOptimizer(inner)
      self.optimizer.build(self.model.trainable_variables)
    # The schedule sets the inner optimizer's rate from its own step count
    # (applied steps only under loss scaling, as TensorFlow's).
    offset = len(self.optimizer.variables) - len(inner.variables)
    names = [v.name for v in inner.variables]
    self._lr_index = offset + names.index("learning_rate")
    self._iteration_index = offset + names.index("iteration")
    self._scale_index = None
    if self.optimizer is not inner:
      self._scale_index = next(i for i, v in enumerate(self.optimizer.variables)
                               if v is self.optimizer.dynamic_scale)
    self.mask_config = masking.config_from(config, arrays.meta)
    self.log_keys = tuple(self.model.LOG_KEYS)
    self.eval_keys = self.log_keys + tuple(self.model.EVAL_KEYS)
    self.shares, shared = None, {}
    if shares_lib.wanted(config, len(self.devices)):
      self.arrays, shared = self._take_shares(arrays)
    self.data = {split: shared[split] if split in shared else
                 {c: self._replicated(v) for c, v in columns.items()}
                 for split, columns in self.arrays.splits.items()}
    # Placed (committed) as the jitted steps return them: one compile.
    self.initial_state = self.state = tuple(
        [self._replicated(v.value) for v in variables] for variables in (
            self.model.trainable_variables,
            self.model.non_trainable_variables, self.optimizer.variables))
    self.step = 0
    self._chunks, self._eval_fn = {}, None
    self.train_key = jax.random.PRNGKey(config.seed)
    self.eval_key = jax.random.PRNGKey(config.seed + 1)

  def _replicated(self, array):
    return self.placed.put(array)

  def _take_shares(self, arrays):
    """input_sharding files on several devices: each device's share of the
    training rows placed on it (this process's devices' only). Returns
    the arrays holding only this process's training rows, and
    {"train": the placed shares}."""
    me = jax.process_index()
    own = [d for d, device in enumerate(self.devices)
           if device.process_index == me]
    columns = arrays.train
    self.shares = shares_lib.Shares(len(columns["input_ids"]),
                                    len(self.devices), own)
    placed = {c: self.placed.put_blocks(
        {d: self.shares.block(v, d) for d in own})
              for c, v in columns.items()}
    held = self.shares.held(columns)
    self.log(f"input_sharding files: process {me} holds "
             f"{len(held['input_ids']):,} of {self.shares.num_examples:,} "
             f"training rows (the shares of {len(own)} of "
             f"{len(self.devices)} devices)")
    return arrays.with_split("train", held), {"train": placed}

  # -------------------------------------------------------------- data
  def _features(self, split, rows, key, batch_number, shared=None):
    """Masked features of `rows` of a split, noise from (key, number);
    `shared`: the training shares, when there are."""
    columns = self.data[split]
    if shared is not None:
      picked = self._from_shares(shared, rows)
    else:
      picked = {c: jnp.take(v, rows, axis=0) for c, v in columns.items()}
    features = arrays_lib.unpack(picked)
    batch = rows.shape[0]
    noise = jax.random.uniform(
        jax.random.fold_in(key, batch_number),
        (masking.NUM_NOISE, batch, self.mask_config.max_predictions))
    return self.placed.split(
        masking.mask_batch(features, self.mask_config, noise))

  def _from_shares(self, columns, rows):
    """The batch's rows, each device's drawn from its own share (rows:
    [batch], Shares.draw's layout), gathered where they are."""
    local = self.placed.split(
        {"rows": rows.reshape(len(self.devices), -1)})["rows"]
    take = jax.vmap(lambda share, picked: jnp.take(share, picked, axis=0))
    return {c: take(v, local).reshape((-1,) + v.shape[2:])
            for c, v in columns.items()}

  def train_rows(self, first_step, steps):
    """Indices [steps, batch] of the training examples of those steps
    (with shares, of each device's share: Shares.draw)."""
    if self.shares is not None:
      return self.shares.draw(self.config.seed,
                              self.config.train_batch_size, first_step,
                              steps)
    return arrays_lib.batch_rows(self.config.seed,
                                 self.arrays.num_examples("train"),
                                 self.config.train_batch_size, first_step,
                                 steps)

  # -------------------------------------------------------------- step
  def _train_step(self, state, step, rows, total_steps, warmup_steps,
                  key=None, shared=None):
    config, model = self.config, self.model
    trainable, fixed, opt_vars = state
    features = self._features("train", rows,
                              self.train_key if key is None else key, step,
                              shared)

    # float16: the loss (so its gradients) carries the dynamic scale; the
    # loss-scale optimizer divides it out, or skips the step and halves it.
    loss_scale = (jnp.float32(1.0) if self._scale_index is None else
                  opt_vars[self._scale_index].astype(jnp.float32))

    def loss_fn(trainable, fixed):
      outputs, fixed = model.stateless_call(trainable, fixed, features,
                                            training=True)
      logs = {k: outputs[k].astype(jnp.float32) for k in self.log_keys}
      return outputs["loss"].astype(jnp.float32) * loss_scale, (fixed, logs)

    (_, (fixed, logs)), grads = jax.value_and_grad(
        loss_fn, has_aux=True)(trainable, fixed)
    # What trains now (two-stage training freezes the generator): the
    # others get no gradient, so the optimizer leaves them and their slots.
    grads = [g if trains else None for g, trains in zip(grads, self._trains())]
    grads, norm = optimization.clip_by_global_norm(grads, config.clip_norm,
                                                   loss_scale)
    schedule = optimization.WarmupPolynomialDecay(
        config.learning_rate, total_steps, warmup_steps,
        config.lr_decay_power, config.warmup_scales_decay)
    opt_vars = list(opt_vars)
    opt_vars[self._lr_index] = schedule(
        opt_vars[self._iteration_index]).astype(
            opt_vars[self._lr_index].dtype)
    with warnings.catch_warnings():  # of the frozen ones' missing grads
      warnings.filterwarnings("ignore", "Gradients do not exist")
      new_trainable, new_opt = self.optimizer.stateless_apply(
          opt_vars, grads, trainable)
    finite = jnp.isfinite(norm)
    if config.skip_nonfinite_steps and self._scale_index is None:
      # keep the weights; the step counts (loss scaling skips on its own)
      keep = lambda new, old: [jnp.where(finite, a, b)  # noqa: E731
                               for a, b in zip(new, old)]
      new_trainable = keep(new_trainable, trainable)
      iteration = new_opt[self._iteration_index]
      new_opt = keep(new_opt, opt_vars)
      new_opt[self._iteration_index] = iteration
    logs["grad_norm"] = norm
    return (new_trainable, fixed, new_opt), logs, finite

  def _trains(self):
    """Per trainable variable, whether the objective trains it now."""
    now = {id(v) for v in self.model.variables_to_train()}
    return [id(v) in now for v in self.model.trainable_variables]

  def begin_step(self, step, restored=False):
    """The objective's own schedule (model.begin_step) applied to the
    state: two-stage training's switch copies the generator into the
    discriminator. The steps are traced again for what trains now."""
    if not restored:
      self.sync_model()
    changed = self.model.begin_step(step, restored)
    if changed:
      self.take_model_weights()
    if self.model.schedule_boundaries():  # the stage may have changed
      self._chunks, self._eval_fn = {}, None
    return changed

  def _chunk_fn(self, steps):
    if steps not in self._chunks:
      self._chunks[steps] = self._chunk_jit(steps)
    return self._chunks[steps]

  def _chunk_jit(self, steps):
    """jit: `steps` training steps; returns the state, the sums of the
    logs over finite steps and the number of finite steps."""
    return jax.jit(self.chunk_scan(steps))

  def chunk_scan(self, steps):
    """`steps` training steps, not jitted: run(state, first_step, rows,
    total_steps, warmup_steps, key=None, shared=None); `key` is the
    masking noise's (default the config seed's): pretrain/multi_seed.py
    vmaps it; `shared` the training shares (_shared_args)."""
    def run(state, first_step, rows, total_steps, warmup_steps, key=None,
            shared=None):
      def body(carry, xs):
        state, sums, finite_steps = carry
        step, step_rows = xs
        state, logs, finite = self._train_step(state, step, step_rows,
                                               total_steps, warmup_steps, key,
                                               shared)
        sums = {k: sums[k] + jnp.where(finite, v, 0.0)
                for k, v in logs.items()}
        return (state, sums, finite_steps + finite.astype(jnp.float32)), None

      zeros = {k: jnp.zeros((), jnp.float32)
               for k in self.log_keys + ("grad_norm",)}
      numbers = first_step + jnp.arange(steps, dtype=jnp.int32)
      (state, sums, finite_steps), _ = jax.lax.scan(
          body, (state, zeros, jnp.zeros((), jnp.float32)), (numbers, rows))
      return state, sums, finite_steps

    return run

  def _run_chunk(self, state, first_step, steps, total_steps):
    """`steps` steps of a run of total_steps (the config's warmup)."""
    rows = self._replicated(self.train_rows(first_step, steps))
    return self._chunk_fn(steps)(
        state, jnp.int32(first_step), rows, jnp.float32(total_steps),
        jnp.float32(self.config.num_warmup_steps), *self._shared_args())

  def _shared_args(self):
    """With shares, the chunk's trailing (key, shared) arguments: a jitted
    function cannot close over an array on other processes' devices."""
    return () if self.shares is None else (None, self.data["train"])

  def advance(self, steps, total_steps):
    """Trains `steps` steps on from self.step, of a run of total_steps;
    returns the steps' log sums and how many were finite."""
    self.state, sums, finite = self._run_chunk(self.state, self.step, steps,
                                               total_steps)
    self.step += steps
    return sums, finite

  STATE = ("trainable", "non_trainable", "optimizer")

  def host_state(self):
    """{part: [NumPy arrays]}: the whole training state, as a checkpoint
    keeps it (training/npz_checkpoints.py)."""
    return {name: [jax.device_get(v) for v in values]
            for name, values in zip(self.STATE, self.state)}

  def load_state(self, groups, step):
    """Goes on from a host_state() taken at `step`."""
    self.state = tuple([self._replicated(v) for v in groups[name]]
                       for name in self.STATE)
    self.step = step

  def take_model_weights(self):
    """Trains on from the Keras model's weights as they are now (assigned
    by import_weights), the optimizer's state as it was."""
    self.state = tuple(
        [self._replicated(v.value) for v in variables] for variables in (
            self.model.trainable_variables,
            self.model.non_trainable_variables)) + (self.state[2],)

  # ------------------------------------------------------------ timing
  def measure(self, chunk, calls=3, total_steps=None):
    """Times `calls` chunks of `chunk` steps from the initial weights
    (after one call that compiles); the trainer's state is unchanged.
    Returns first_call_s (with the compile), step_s (best call) and the
    last chunk's loss (benchmarks/jax_throughput.py)."""
    total = total_steps or self.config.num_train_steps
    start = time.perf_counter()
    state, sums, finite = self._run_chunk(self.initial_state, 0, chunk, total)
    jax.block_until_ready(sums)
    first_call_s = time.perf_counter() - start
    times = []
    for i in range(calls):
      start = time.perf_counter()
      state, sums, finite = self._run_chunk(state, (i + 1) * chunk, chunk,
                                            total)
      jax.block_until_ready(sums)
      times.append((time.perf_counter() - start) / chunk)
    step_s = min(times)
    batch = self.config.train_batch_size
    return {"first_call_s": first_call_s, "step_s": step_s,
            "steps_per_s": 1 / step_s, "seq_per_s": batch / step_s,
            "loss": float(sums["loss"]) / max(float(finite), 1.0),
            "chunk": chunk, "calls": calls}

  def learning_rate(self, step=None):
    config = self.config
    return float(optimization.WarmupPolynomialDecay(
        config.learning_rate, config.num_train_steps,
        config.num_warmup_steps, config.lr_decay_power,
        config.warmup_scales_decay)(self.step if step is None else step))

  # --------------------------------------------------------------- eval
  def evaluate(self, num_steps=None):
    """The objective's eval metrics over num_steps held-out batches (the
    same masks every call: noise from seed + 1 and the batch number)."""
    config, model = self.config, self.model
    steps = num_steps or config.num_eval_steps
    batch = config.eval_batch_size
    n = self.arrays.num_examples("heldout")
    if self._eval_fn is None:
      self._eval_fn = self._eval_jit()
    trainable, fixed, _ = self.state
    collected = {k: [] for k in self.eval_keys}
    for i in range(steps):
      rows = np.arange(i * batch, (i + 1) * batch) % n
      out, fixed = self._eval_fn(trainable, fixed,
                                 self._replicated(rows.astype(np.int32)),
                                 jnp.int32(i))
      for k, v in out.items():
        v = fetch(v)
        if np.issubdtype(v.dtype, np.floating):
          v = v.astype(np.float32)
        collected[k].append(v.reshape(1) if v.ndim == 0 else v)
    results = model.eval_metrics(
        {k: np.concatenate(v) for k, v in collected.items()})
    results["global_step"] = self.step
    return results

  def _eval_jit(self):
    """jit: one eval batch's outputs (EVAL_KEYS and LOG_KEYS)."""
    return jax.jit(self.eval_call())

  def eval_call(self):
    """One eval batch, not jitted: run(trainable, fixed, rows, number,
    key=None), `key` the masks' noise (default seed + 1's)."""
    def run(trainable, fixed, rows, number, key=None):
      features = self._features("heldout", rows,
                                self.eval_key if key is None else key, number)
      outputs, fixed = self.model.stateless_call(trainable, fixed, features,
                                                 training=False)
      return {k: outputs[k] for k in self.eval_keys}, fixed
    return run

  # ------------------------------------------------------------ weights
  def sync_model(self):
    """Writes the trained state into the Keras model's variables."""
    trainable, fixed, opt = self.state
    for variable, value in zip(self.model.trainable_variables, trainable):
      variable.assign(value)
    for variable, value in zip(self.model.non_trainable_variables, fixed):
      variable.assign(value)
    for variable, value in zip(self.optimizer.variables, opt):
      variable.assign(value)

  def save(self, directory, dtype="float32",
           max_shard_bytes=npz_weights.MAX_SHARD_BYTES, extra=None):
    """The networks' weights as .npz shards + weights.json (the config,
    with the vocabulary the arrays came with); returns the paths."""
    self.sync_model()
    weights = {role: export_weights(self.model, role)
               for role in self.model.networks()}
    config = dataclasses.replace(
        self.config, vocab_file=self.arrays.meta.get("vocab_file", "") or
        self.config.vocab_file,
        do_lower_case=self.arrays.meta.get("do_lower_case",
                                           self.config.do_lower_case))
    values = json.loads(json.dumps(dataclasses.asdict(config)))
    return npz_weights.write(directory, weights, values, dtype=dtype,
                             max_shard_bytes=max_shard_bytes, step=self.step,
                             extra={"trained_by": "pretrain/jax_trainer.py",
                                    **(extra or {})})
