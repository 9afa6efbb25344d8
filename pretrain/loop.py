"""The pretraining loop, one for both backends: from model_dir's latest
checkpoint (else init_checkpoint, else the initial weights) to
num_train_steps, then held-out evaluation.

Here, once: where each host call of steps ends (iterations_per_loop, the
save and log cadence, the objective's schedule boundaries), the log line
and its scalars, non-finite steps (fatal, or skipped and counted), the
data or weights going bad (never saved), saves on schedule, by the clock
and on a preemption notice (SIGTERM / Ctrl-C: save, then stop), the run
directory's config written once restored, eval_results.json.

A backend's part is its subclass's: pretrain/trainer.py (TensorFlow:
tf.function, tf.distribute, tf.data, TensorFlow checkpoints) and
pretrain/jax_run.py (jit, keras.distribution, NumPy arrays, .npz
checkpoints). It builds the model and gives what differs: how steps run
(`_run_steps`), and how state is restored, saved and evaluated.
"""

import json
import os
import time

import numpy as np

from interop.weights import import_weights
from pretrain import flops
from pretrain import run_dir
from training.heartbeat import Heartbeat
from training.preemption import Preempted
from training.preemption import PreemptionGuard
from training.step_log import LOG_SECONDS
from training.step_log import StepLog
from training.step_log import write_scalars
from util import storage
from util.errors import UserError
from util.errors import cause


class PretrainingLoop(run_dir.HoldsLock):
  """`train()` and `evaluate()` over a backend subclass that sets
  config, model, precision, open_source (loading/sources.py's, for
  init_checkpoint), lock and _commit (pretrain/run_dir.py prepare) and
  is_chief, and
  implements the methods below that raise NotImplementedError."""

  # JAX compiles a host call per length: its calls end on fixed boundaries
  # only; TensorFlow's also end early to keep a log line every ~15 s.
  SHORTENS_CALLS = True
  is_chief = True
  open_source = None

  # ------------------------------------------------------ the backend's
  def _describe(self):
    """'precision, devices' for the first log line."""
    raise NotImplementedError

  def _step(self):
    raise NotImplementedError

  def _latest(self):
    """model_dir's newest complete checkpoint, or None."""
    raise NotImplementedError

  def _exists(self, path):
    raise NotImplementedError

  def _open_training(self):
    """Before a training restore: the data iterator and what saves it."""

  def _restore(self, path):
    """The whole state (the data position too, in training) of `path`."""
    raise NotImplementedError

  def _read_own_weights(self, source):
    """init_checkpoint of our own format read directly: True if it was."""
    del source
    return False

  def _took_weights(self):
    """After import_weights assigned the model's variables."""

  def _start_steps(self, step):
    """Ready to train on from `step` (restored): compile the host call."""

  def _run_steps(self, n):
    """n steps in one host call: the mean of each log over the finite
    steps, and "nonfinite_steps"."""
    raise NotImplementedError

  def _seeds(self):
    """Each seed's label in the log (--seeds: several in one step)."""
    return [""]

  def _seed_steps(self, n):
    """n steps of every seed in one host call: each its _run_steps logs."""
    return [self._run_steps(n)]

  def _begin_step(self, step, restored=False):
    """The objective's schedule at `step` (model.begin_step): its line
    when what trains changed (the backend then traces its step again)."""
    return self.model.begin_step(step, restored)

  def _data_changed(self):
    """A line if the data changed under the run, else None (accepted
    from now on under skip_corrupt_records)."""
    return None

  def _bad_weights(self):
    """Paths of the variables that are not finite."""
    raise NotImplementedError

  def _save(self, step):
    """Saves the state at `step`; returns the checkpoint's path."""
    raise NotImplementedError

  def _finish(self):
    """Once a training run stops with its state saved."""

  def _learning_rate(self):
    raise NotImplementedError

  def _writer(self, name):
    """model_dir/name's scalar writer (training/step_log.write_scalars)."""
    raise NotImplementedError

  def _writers(self, name):
    """Each seed's writer of model_dir/name."""
    return [self._writer(name)]

  def _eval_outputs(self):
    """The objective's eval metrics over num_eval_steps batches."""
    raise NotImplementedError

  # ---------------------------------------------------------- weights
  def _initialise(self, path):
    """Weights (no optimizer state) from another run of ours, or from any
    format open_source reads (the TF1 release, transformers, KerasHub,
    .keras, npz, a fine-tuned model): every network of this model must be
    there with its shapes, else one error lists what differs."""
    if self.open_source is None:
      raise UserError(f"cannot initialise from {path}: this run was made "
                      "without open_source (loading/sources.py)")
    source = self.open_source(path)
    if source.kind == "ours" and self._read_own_weights(source):
      print(f"initialised weights from {source.path}", flush=True)
      return
    weights = source.weights()
    import_weights(self.model, weights, source=path,
                   require=self.model.networks())
    self._took_weights()
    print(f"initialised weights from {path} ({source.kind}: "
          f"{', '.join(weights)})", flush=True)

  def _last_good(self):
    latest = self._latest()
    return (f"the last good checkpoint is {latest}" if latest else
            "no checkpoint was saved yet")

  # ------------------------------------------------------------ train
  def train(self):
    config = self.config
    self._open_training()
    latest = self._latest()
    if latest:
      self._restore(latest)
      print(f"resumed from {latest} at step {self._step()}", flush=True)
    elif config.init_checkpoint:
      self._initialise(config.init_checkpoint)
    self._commit()  # nothing is written before this point
    step, total = self._step(), config.num_train_steps
    self._begin_step(step, restored=True)
    if step >= total:
      print(f"already trained: step {step} >= num_train_steps {total}",
            flush=True)
      self._finish()  # as a stop in its last call left it
      return step
    self._start_steps(step)
    print(f"training {self.model.name} ({self._describe()}, "
          f"{count_params(self.model):,} parameters) from step {step} to "
          f"{total}", flush=True)
    # ELECTRA appendix E's convention, as the paper's Table 1 counts.
    print(f"FLOPs: {flops.train_flops_per_step(config):.3g} per step, "
          f"{flops.total_train_flops(config):.3g} for the whole run (ELECTRA "
          "appendix E convention)", flush=True)
    boundaries = self.model.schedule_boundaries()
    log_every = config.log_every_steps or config.iterations_per_loop
    labels = self._seeds()
    progress = [StepLog(config, step) for _ in labels]
    writers = self._writers("train")
    self.skipped_steps = [0] * len(labels)
    last_save = time.time()
    with PreemptionGuard() as preemption:
      while step < total:
        # Fixed boundaries, so a resumed run cuts its calls as this one.
        ends = [_next(step, config.iterations_per_loop),
                _next(step, config.save_checkpoints_steps),
                _next(step, log_every), total]
        n = min(ends + [b for b in boundaries if b > step]) - step
        if self.SHORTENS_CALLS:
          n = progress[0].steps(step, n, log_every)  # a line every ~15 s
        if progress[0].calls:
          what = f"steps {step + 1}-{step + n}"
        else:
          what = "compiling the training step (first call)"
          print(f"{what}; a line every {LOG_SECONDS:.0f} s until it runs",
                flush=True)
        start = time.time()
        with Heartbeat(what):
          seed_logs = self._seed_steps(n)
        elapsed = time.time() - start
        step += n
        self._check_data()
        for i, logs in enumerate(seed_logs):
          self._check_finite(logs, step, n, i)
        for label, logs, log, writer in zip(labels, seed_logs, progress,
                                            writers):
          print(label, end="")
          log.log(step, n, elapsed, logs, self._learning_rate(), writer)
        if step in boundaries:
          # The objective's own schedule (two-stage training's switch).
          changed = self._begin_step(step)
          if changed:
            print(changed, flush=True)
        timed = (config.save_checkpoints_secs and
                 time.time() - last_save >= config.save_checkpoints_secs)
        if (step % config.save_checkpoints_steps == 0 or timed or
            step == total or preemption.requested):
          self._check_weights(step)
          path = self._save(step)
          self._commit(saved=True)  # changed hparams: recorded now
          last_save = time.time()
          print(f"saved {path}", flush=True)
        if preemption.requested:
          for writer in writers:
            writer.flush()
          self._finish()
          raise Preempted(f"{preemption.name}: saved step {step} and "
                          "stopped", preemption.exit_code)
    for writer in writers:
      writer.flush()
    self._finish()
    return step

  def _check_data(self):
    """A shard deleted or damaged while the run reads it stops the run
    before its next save (skip_corrupt_records: a warning)."""
    changed = self._data_changed()
    if changed and self.config.skip_corrupt_records:
      print(f"warning: {changed}", flush=True)
    elif changed:
      raise UserError(f"{changed}; stopping without saving, "
                      f"{self._last_good()}")

  def _check_finite(self, logs, step, n, seed=0):
    """Non-finite steps stop the run before anything is saved, unless they
    were skipped and some step of the call was not."""
    bad = int(logs.pop("nonfinite_steps"))
    if not bad:
      return
    skipping = skips_nonfinite(self.config, self.precision)
    label = self._seeds()[seed]
    if skipping and bad < n:
      self.skipped_steps[seed] += bad
      print(f"{label}skipped {bad} non-finite step(s) before step {step} "
            f"({self.skipped_steps[seed]} in this run)", flush=True)
      return
    what = (f"all {n} steps up to {step} were non-finite" if skipping else
            f"non-finite loss or gradients at step {step - n + 1}-{step}")
    raise UserError(f"{label}{what}; stopping without saving, "
                    f"{self._last_good()}. Try a lower learning_rate")

  def _check_weights(self, step):
    """An update can make weights inf or NaN after a finite loss (a huge
    learning rate): such weights are never saved, so the newest
    checkpoint stays the last finite one and none is rotated out."""
    bad = self._bad_weights()
    if bad:
      raise UserError(
          f"the weights after step {step} are not finite ({len(bad)} "
          f"variable(s), e.g. {bad[0]}); stopping without saving, "
          f"{self._last_good()}. Try a lower learning_rate")

  # ------------------------------------------------------------- eval
  def evaluate(self):
    """The objective's eval metrics on the held-out data, of
    eval_checkpoint or the latest checkpoint; the latest's are kept in
    model_dir/eval_results.json."""
    config = self.config
    path = config.eval_checkpoint or self._latest()
    if config.eval_checkpoint and not self._exists(path):
      raise UserError(f"eval_checkpoint not found: {path}")
    if path:
      self._restore(path)
    elif config.init_checkpoint:
      self._initialise(config.init_checkpoint)
    else:
      print("note: no checkpoint in model_dir; evaluating initial weights")
    self._begin_step(self._step(), restored=True)
    with Heartbeat("evaluating (the first call compiles the eval step)"):
      results = self._eval_outputs()
    results["global_step"] = self._step()
    if self.is_chief and not config.eval_checkpoint:  # the latest model's
      where = os.path.join(config.model_dir, "eval_results.json")
      try:
        storage.write_text_atomic(
            where, json.dumps(results, indent=2, sort_keys=True))
      except run_dir.io_errors() as e:
        raise UserError(f"cannot write {where}: {cause(e)}") from None
    writer = self._writer("eval")
    write_scalars(writer, results["global_step"], results)
    writer.flush()
    return results


def _next(step, every):
  return (step // every + 1) * every


def skips_nonfinite(config, precision):
  """A non-finite step is skipped rather than fatal: when asked, and
  always under float16's loss scaling."""
  return config.skip_nonfinite_steps or precision == "float16"


def count_params(model):
  return int(sum(np.prod(v.shape) for v in model.trainable_variables))
