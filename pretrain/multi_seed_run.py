"""run_pretraining.py --seeds 1,2 under KERAS_BACKEND=jax: each seed's run
(pretrain/jax_run.py's JaxRun: its model_dir, lock, config check,
checkpoints, scalars, weights and eval_results.json) as its separate run
writes it, trained together by pretrain/multi_seed.py's vmapped step.
The loop is pretrain/loop.py's, once for all the seeds: its cadence,
saves, non-finite checks, preemption and resume; here only what several
seeds change (each seed's logs, writers and checkpoint)."""

import contextlib

from pretrain.config import parse_seeds
from pretrain.jax_run import JaxRun
from pretrain.loop import PretrainingLoop
from pretrain.multi_seed import MultiSeedTrainer
from pretrain.multi_seed import seed_config
from pretrain.multi_seed import share_eval
from training import npz_checkpoints
from util import storage
from util.errors import UserError


class MultiSeedRun(PretrainingLoop):
  """The seeds' JaxRuns (locks held) and their trainer; `train()`,
  `evaluate()` -> {seed K: results}; a context manager. It calls each
  run's own backend methods."""
  # pylint: disable=protected-access

  SHORTENS_CALLS = False  # each length of call compiles

  def __init__(self, config, open_source=None):
    self.seeds = parse_seeds(config.seeds)
    if config.eval_checkpoint:
      raise UserError("eval_checkpoint names one run's checkpoint: evaluate "
                      "it without --seeds")
    if config.training_algorithm == "two_stage":
      raise UserError("two-stage training switches what trains mid-run: "
                      "train each seed separately (without --seeds)")
    self.configs = [seed_config(config, k) for k in self.seeds]
    self._stack = contextlib.ExitStack()
    try:
      self.runs = [self._stack.enter_context(JaxRun(c, open_source))
                   for c in self.configs]
    except BaseException:
      self._stack.close()
      raise
    first = self.runs[0]
    self.config, self.model, self.precision = (
        self.configs[0], first.model, first.precision)
    self.is_chief, self.multi = first.is_chief, None

  def close(self):
    self._stack.close()

  def _describe(self):
    return (f"{len(self.seeds)} seeds {self.seeds} in one step, "
            f"{self.runs[0]._describe()}")

  def _seeds(self):
    return [f"seed {k}: " for k in self.seeds]

  def _step(self):
    return self.multi.step if self.multi else self.runs[0].trainer.step

  def _latest(self):
    found = [run._latest() for run in self.runs]
    steps = [npz_checkpoints.step_of(p) if p else 0 for p in found]
    if len(set(steps)) > 1:
      raise UserError("the seeds' runs are at different steps (" + ", ".join(
          f"{c.model_dir}: {s}" for c, s in zip(self.configs, steps)) +
                      "): resume each as a separate run (without --seeds)")
    return found[0]

  def _exists(self, path):
    return storage.exists(path)

  def _restore(self, path):
    del path  # each seed's own
    for run in self.runs:
      run._restore(run._latest())

  def _initialise(self, path):
    for run in self.runs:
      run._initialise(path)

  def _commit(self, saved=False):
    for run in self.runs:
      run._commit(saved)

  def _begin_step(self, step, restored=False):
    return [run._begin_step(step, restored)
            for run in self.runs][0]

  def _start_steps(self, step):
    del step
    self.multi = MultiSeedTrainer([run.trainer for run in self.runs])

  def _seed_steps(self, n):
    sums, finite = self.multi.advance(n, self.config.num_train_steps)
    keys = self.runs[0].keys
    out = []
    for i in range(len(self.runs)):
      done = float(finite[i])
      out.append(dict({k: float(sums[k][i]) / max(done, 1.0) for k in keys},
                      nonfinite_steps=n - done))
    return out

  def _unstacked(self):
    if self.multi:
      self.multi.unstack()
    return self.runs

  def _bad_weights(self):
    return [f"seed {k}: {path}" for k, run in zip(self.seeds,
                                                  self._unstacked())
            for path in run._bad_weights()]

  def _save(self, step):
    return ", ".join(run._save(step) for run in self._unstacked())

  def _finish(self):
    for run in self._unstacked():
      run._finish()

  def _learning_rate(self):
    return self.runs[0].trainer.learning_rate(self._step())

  def _writers(self, name):
    return [run._writer(name) for run in self.runs]

  def evaluate(self):
    """Each seed's JaxRun.evaluate (its eval_results.json), one compiled
    eval step shared."""
    share_eval([run.trainer for run in self._unstacked()])
    return {k: run.evaluate() for k, run in zip(self.seeds, self.runs)}
