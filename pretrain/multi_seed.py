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

import jax
import jax.numpy as jnp
import numpy as np

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
