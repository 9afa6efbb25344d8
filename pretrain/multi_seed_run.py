"""run_pretraining.py --seeds 1,2 under KERAS_BACKEND=jax: each seed's run
(pretrain/jax_run.py's JaxRun: its model_dir, lock, config check,
checkpoints, scalars, weights and eval_results.json) as its separate run
writes it, trained together by pretrain/multi_seed.py's vmapped step.
The loop is pretrain/loop.py's, once for all the seeds: the same chunk
boundaries, saves and SIGTERM handling."""

import contextlib
import os
import time

from pretrain import flops
from pretrain.config import parse_seeds
from pretrain.jax_run import JaxRun
from pretrain.loop import _next
from pretrain.loop import skips_nonfinite
from pretrain.multi_seed import MultiSeedTrainer
from pretrain.multi_seed import seed_config
from pretrain.multi_seed import share_eval
from training.preemption import Preempted
from training.preemption import PreemptionGuard
from training.step_log import ScalarLog
from training.step_log import StepLog
from util.errors import UserError


class MultiSeedRun:
  """The seeds' JaxRuns (locks held) and their trainer; `train()`,
  `evaluate()` -> {seed K: results}; a context manager."""

  def __init__(self, config):
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
      self.runs = [self._stack.enter_context(JaxRun(c)) for c in self.configs]
    except BaseException:
      self._stack.close()
      raise

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self._stack.close()

  def train(self):
    trainers = [run.trainer for run in self.runs]
    for run in self.runs:
      latest = run._latest()  # pylint: disable=protected-access
      if latest:
        run._restore(latest)  # pylint: disable=protected-access
        print(f"resumed from {latest} at step {run.trainer.step}",
              flush=True)
    if len({t.step for t in trainers}) > 1:
      raise UserError("the seeds' runs are at different steps (" + ", ".join(
          f"{c.model_dir}: {t.step}" for c, t in zip(self.configs, trainers))
                      + "): resume each as a separate run (without --seeds)")
    for run in self.runs:
      run._commit()  # pylint: disable=protected-access
    config, first = self.configs[0], trainers[0]
    total = config.num_train_steps
    if first.step >= total:
      print(f"already trained: step {first.step} >= num_train_steps "
            f"{total}", flush=True)
      return first.step
    multi = MultiSeedTrainer(trainers)
    first.log(f"training {first.model.name} x {multi.n} seeds "
              f"{self.seeds} in one step ({first.precision}, "
              f"{first.devices[0].device_kind}) from step {multi.step} to "
              f"{total}: " + ", ".join(c.model_dir for c in self.configs))
    first.log(f"FLOPs: {flops.train_flops_per_step(config):.3g} per step "
              f"and seed, {flops.total_train_flops(config):.3g} for each "
              "seed's run (ELECTRA appendix E convention)")
    keys = first.log_keys + ("grad_norm",)
    logs_of = [StepLog(c, multi.step) for c in self.configs]
    writers = [ScalarLog(os.path.join(c.model_dir, "train"))
               for c in self.configs]
    last_save = time.time()
    with PreemptionGuard() as preemption:
      while multi.step < total:
        step = multi.step
        n = min(_next(step, config.iterations_per_loop),
                _next(step, config.save_checkpoints_steps), total) - step
        start = time.time()
        sums, finite = multi.advance(n, total)
        elapsed = time.time() - start
        for i, (k, log, writer) in enumerate(zip(self.seeds, logs_of,
                                                 writers)):
          done = float(finite[i])
          if done < n and not (skips_nonfinite(config, first.precision) and
                               done > 0):
            raise UserError(
                f"seed {k}: non-finite loss or gradients at steps "
                f"{step + 1}-{multi.step}; nothing saved past step {step} "
                "(try a lower learning_rate, or skip_nonfinite_steps)")
          logs = {key: float(sums[key][i]) / max(done, 1.0) for key in keys}
          print(f"seed {k}: ", end="")
          log.log(multi.step, n, elapsed, logs, first.learning_rate(
              multi.step), writer)
        timed = (config.save_checkpoints_secs and
                 time.time() - last_save >= config.save_checkpoints_secs)
        if (multi.step % config.save_checkpoints_steps == 0 or timed or
            multi.step == total or preemption.requested):
          multi.unstack()
          for run in self.runs:
            path = run._save(multi.step)  # pylint: disable=protected-access
            run._commit(saved=True)  # pylint: disable=protected-access
            print(f"saved {path}", flush=True)
          last_save = time.time()
        if preemption.requested:
          for writer in writers:
            writer.flush()
          raise Preempted(f"{preemption.name}: saved step {multi.step} of "
                          f"seeds {self.seeds} and stopped",
                          preemption.exit_code)
    for writer in writers:
      writer.flush()
    for trainer, c in zip(multi.unstack(), self.configs):
      paths = trainer.save(c.model_dir)
      print(f"weights for fine-tuning: {os.path.dirname(paths[0])} "
            f"({len(paths)} file(s))", flush=True)
    return multi.step

  def evaluate(self):
    """Each seed's JaxRun.evaluate (its eval_results.json), one compiled
    eval step shared."""
    share_eval([run.trainer for run in self.runs])
    return {k: run.evaluate() for k, run in zip(self.seeds, self.runs)}
