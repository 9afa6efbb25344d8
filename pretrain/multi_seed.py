"""Several pretraining seeds of one model in one compiled step (JAX).

Each seed is a JaxTrainer of its own config (pretrain/jax_trainer.py), so
its initial weights, dropout and sampling streams (Keras seed-generator
state, part of the non-trainable state), data order and masking noise are
its separate run's. Their states are stacked on a new first axis and the
first trainer's un-jitted chunk of steps is vmapped over (state, the
seed's rows, the seed's noise key): one program trains all of them, which
fills more of a GPU than one small model does. Only the stacked state
lives on the device while training; `unstack` hands each trainer its
seed's state back (to save, evaluate or checkpoint it as its own run).
"""

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np

from pretrain.loop import skips_nonfinite
from util.errors import UserError


def seed_config(config, k):
  """Seed K's config: the run run_comparison.py would make of it (seed +
  K - 1; model_dir NAME.seedK for K > 1, NAME itself for K = 1)."""
  suffix = f".seed{k}" if k > 1 else ""
  return dataclasses.replace(
      config, seeds="", seed=config.seed + k - 1,
      model_name=config.model_name + suffix if config.model_name else "",
      model_dir=config.model_dir.rstrip("/") + suffix)


def _stack(states):
  return jax.tree_util.tree_map(lambda *a: jnp.stack(a), *states)


class MultiSeedTrainer:
  """N JaxTrainers of one architecture trained as one vmapped program.
  `step` is shared: the seeds advance together."""

  def __init__(self, trainers):
    self.trainers = list(trainers)
    first = self.trainers[0]
    if len(first.devices) > 1:
      raise UserError("several seeds in one step train on one device: set "
                      "num_gpus 1 (or train the seeds as separate runs)")
    shapes = [[(tuple(v.shape), str(v.dtype)) for group in t.state
               for v in group] for t in self.trainers]
    if any(s != shapes[0] for s in shapes):
      raise UserError("the seeds' models differ in shape: only the seed "
                      "may differ between runs trained in one step")
    steps = {t.step for t in self.trainers}
    if len(steps) > 1:
      raise UserError(f"the seeds' runs are at different steps "
                      f"({sorted(steps)}): resume each as a separate run")
    self.config, self.step = first.config, first.step
    self.train_keys = jnp.stack([t.train_key for t in self.trainers])
    self.state = _stack([t.state for t in self.trainers])
    self._chunks = {}
    share_eval(self.trainers)

  @property
  def n(self):
    return len(self.trainers)

  # ------------------------------------------------------------- steps
  def _chunk_jit(self, steps):
    run = self.trainers[0].chunk_scan(steps)
    # state, rows and key per seed; the step numbers and schedule shared.
    return jax.jit(jax.vmap(run, in_axes=(0, None, 0, None, None, 0)))

  def _chunk_fn(self, steps):
    if steps not in self._chunks:
      self._chunks[steps] = self._chunk_jit(steps)
    return self._chunks[steps]

  def rows(self, first_step, steps):
    """[N, steps, batch]: each seed's own data order."""
    return np.stack([t.train_rows(first_step, steps) for t in self.trainers])

  def _args(self, state, first_step, steps, total_steps):
    first = self.trainers[0]
    return (state, jnp.int32(first_step),
            first._replicated(self.rows(first_step, steps)),
            jnp.float32(total_steps),
            jnp.float32(self.config.num_warmup_steps), self.train_keys)

  def advance(self, steps, total_steps):
    """`steps` steps of every seed; returns the log sums and finite-step
    counts, each [N]."""
    self.state, sums, finite = self._chunk_fn(steps)(
        *self._args(self.state, self.step, steps, total_steps))
    self.step += steps
    return sums, finite

  def lower(self, chunk):
    """The vmapped chunk and the (shared) eval step lowered, as
    JaxTrainer.lower: {"train", "eval"}."""
    first = self.trainers[0]
    train = self._chunk_jit(chunk).lower(*self._args(self.state, 0, chunk, 1))
    trainable, fixed, _ = first.initial_state
    rows = first._replicated(  # pylint: disable=protected-access
        np.zeros(self.config.eval_batch_size, np.int32))
    evaluate = jax.jit(first.eval_call()).lower(trainable, fixed, rows,
                                                jnp.int32(0), first.eval_key)
    return {"train": train, "eval": evaluate}

  def install(self, chunk, compiled):
    self._chunks[chunk] = compiled["train"]
    share_eval(self.trainers, compiled["eval"])

  def measure(self, chunk, calls=3, total_steps=None):
    """JaxTrainer.measure for all seeds at once (the state unchanged):
    step_s is one vmapped step of all N; seq_per_s counts every seed's."""
    total = total_steps or self.config.num_train_steps
    fn = self._chunk_fn(chunk)
    start = time.perf_counter()
    state, sums, finite = fn(*self._args(self.state, 0, chunk, total))
    jax.block_until_ready(sums)
    first_call_s = time.perf_counter() - start
    times = []
    for i in range(calls):
      start = time.perf_counter()
      state, sums, finite = fn(*self._args(state, (i + 1) * chunk, chunk,
                                           total))
      jax.block_until_ready(sums)
      times.append((time.perf_counter() - start) / chunk)
    step_s = min(times)
    batch = self.config.train_batch_size * self.n
    return {"first_call_s": first_call_s, "step_s": step_s,
            "steps_per_s": 1 / step_s, "seq_per_s": batch / step_s,
            "loss": float(np.mean(np.asarray(sums["loss"]) /
                                  np.maximum(np.asarray(finite), 1.0))),
            "chunk": chunk, "calls": calls, "seeds_per_step": self.n}

  def train(self, num_steps=None, chunk=None, deadline=None, stop_at=None):
    """JaxTrainer.train for all seeds at once (the slot's loop): from the
    shared step to num_steps, or only to `stop_at`; stops after a chunk
    that ends past `deadline`. Returns each seed's list of chunk dicts;
    the trainers hold their seeds' states after it (`unstack`)."""
    config, first = self.config, self.trainers[0]
    total = num_steps or config.num_train_steps
    for trainer in self.trainers:
      trainer.config.num_train_steps = total
    chunk = chunk or config.iterations_per_loop
    first.log(f"training {first.model.name} x {self.n} seeds in one step "
              f"({first.precision}, {first.devices[0].device_kind}) from "
              f"step {self.step} to {total}")
    histories, start = [[] for _ in self.trainers], time.time()
    end = min(stop_at or total, total)
    while self.step < end:
      n = min(chunk, end - self.step)
      t0 = time.time()
      sums, finite = self.advance(n, total)
      finite = np.asarray(finite, np.float64)
      sums = {k: np.asarray(v, np.float64) for k, v in sums.items()}
      elapsed = time.time() - t0
      skips = skips_nonfinite(first.config, first.precision)
      if (finite < n).any() and not (skips and (finite > 0).all()):
        raise UserError(f"non-finite loss or gradients at steps "
                        f"{self.step - n + 1}-{self.step} of seed(s) "
                        f"{[i + 1 for i in np.flatnonzero(finite < n)]} of "
                        "the step; nothing saved. Try a lower learning_rate")
      lr = first.learning_rate(self.step)
      for i, history in enumerate(histories):
        logs = {k: v[i] / max(finite[i], 1.0) for k, v in sums.items()}
        history.append({"step": self.step, **logs, "lr": lr,
                        "seq_per_s": n * config.train_batch_size /
                                     max(elapsed, 1e-9),
                        "elapsed_s": time.time() - start,
                        "skipped_steps": n - finite[i]})
      seq_per_s = n * config.train_batch_size * self.n / max(elapsed, 1e-9)
      losses = " ".join(f"{h[-1]['loss']:.4f}" for h in histories)
      first.log(f"step {self.step}/{total} | loss {losses} (each seed) | "
                f"lr {lr:.3g} | {seq_per_s:.1f} seq/s (all seeds) | "
                f"{time.time() - start:.0f}s")
      if deadline is not None and time.time() > deadline:
        first.log(f"stopping at step {self.step}: past the deadline")
        break
    self.unstack()
    return histories

  # -------------------------------------------------------- the seeds
  def unstack(self):
    """Each trainer gets its seed's state and the shared step."""
    for i, trainer in enumerate(self.trainers):
      trainer.state = jax.tree_util.tree_map(lambda a: a[i], self.state)
      trainer.step = self.step
    return self.trainers



def share_eval(trainers, fn=None):
  """One compiled eval step (`fn`, lowered with the key as an argument)
  for every trainer, each with its own masking noise."""
  fn = fn or jax.jit(trainers[0].eval_call())
  for trainer in trainers:
    trainer._eval_fn = (  # pylint: disable=protected-access
        lambda t, f, r, n, key=trainer.eval_key: fn(t, f, r, n, key))
