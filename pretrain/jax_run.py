"""run_pretraining.py under KERAS_BACKEND=jax: the run around the JAX
trainer (pretrain/jax_trainer.py) that the TensorFlow path's Trainer is
around its tf.function: the same config and run directory (the lock, the
hparam drift check, pretrain_config.json; pretrain/run_dir.py), resumable
checkpoints (training/npz_checkpoints.py: the whole state, and the step that
fixes the data position and the masking noise), the log line (training/
step_log.py), SIGTERM/Ctrl-C saves then stops, held-out eval with
eval_results.json. Its own: the data are NumPy arrays (pretrain/arrays.py,
DATA_DIR/pretrain_arrays, exported from the TFRecords on first use where
TensorFlow is installed); every local device trains as one data-parallel
replica set (keras.distribution); the scalars go to TensorBoard events
through the tensorboard package (not TensorFlow's writer) and to
train/scalars.jsonl; the finished run's weights are also written as .npz
shards in MODEL_DIR (interop/npz_weights.py), which fine-tuning, scoring
and export read.
"""

import importlib.util
import json
import os
import time

import jax

from pretrain import arrays as arrays_lib
from pretrain import flops
from pretrain import run_dir
from pretrain.jax_trainer import JaxTrainer
from pretrain.jax_trainer import count_params
from interop import npz_weights
from interop.weights import import_weights
from training import npz_checkpoints
from training.heartbeat import Heartbeat
from training.preemption import Preempted
from training.preemption import PreemptionGuard
from training.step_log import LOG_SECONDS
from training.step_log import ScalarLog
from training.step_log import StepLog
from util import storage
from util.errors import UserError
from util.paths import located
from util.tf_quiet import import_tensorflow

def check_supported(config):
  """One line naming an option only the TensorFlow path has."""
  if config.strategy in ("multi_worker", "tpu"):
    raise UserError(f"strategy {config.strategy} is TensorFlow's: under "
                    "KERAS_BACKEND=jax every local device (TPU cores too) "
                    "trains with strategy default, and several hosts join "
                    "with jax.distributed (docs/distributed.md)")


def devices(config):
  """The local devices that train: all of them, or the first num_gpus."""
  found = jax.local_devices()
  if config.num_gpus:
    if len(found) < config.num_gpus:
      raise UserError(f"num_gpus {config.num_gpus}, but JAX sees "
                      f"{len(found)} device(s): "
                      f"{', '.join(str(d) for d in found)}")
    found = found[:config.num_gpus]
  return found


def load_arrays(config):
  """DATA_DIR/pretrain_arrays (MODEL_DIR's when DATA_DIR is read-only:
  arrays.cache_folder), exported from the TFRecords if missing."""
  folder, fallback = arrays_lib.cache_folder(config)
  if fallback:
    print("note: the data folder cannot be written: the arrays the JAX "
          f"path reads are kept in {folder}", flush=True)
  if not storage.exists(os.path.join(folder, arrays_lib.META)):
    try:
      import_tensorflow()
    except ImportError:
      raise UserError(f"no {folder}: without TensorFlow the JAX path reads "
                      "the pretraining data as NumPy arrays; the same command"
                      " where TensorFlow is installed writes them there from"
                      " the TFRecords: copy that folder here") from None
    print(f"exporting the TFRecords to {folder} (once)", flush=True)
    arrays_lib.export(config, folder, max_train_mb=0)
  loaded = arrays_lib.load(folder)
  if not storage.exists(config.vocab_file or ""):
    vocab = located(loaded.meta.get("vocab_file", ""))
    if vocab and storage.exists(vocab):
      config.vocab_file = vocab
  return loaded


def restore(trainer, path):
  like = dict(zip(trainer.STATE, trainer.state))  # shapes: no copy made
  groups = npz_checkpoints.load(path, like)
  trainer.load_state(groups, npz_checkpoints.step_of(path))


def initialise(trainer, path):
  """Weights (no optimizer state) from any format loading/sources.py
  reads, as the TensorFlow path's Trainer._initialise: our runs of either
  backend, the TF1 release, transformers, KerasHub, .keras, a fine-tuned
  model; every network of this model must be there with its shapes."""
  from loading.sources import open_source  # pylint: disable=g-import-not-at-top (only when asked)
  source = open_source(path)
  weights = source.weights()
  import_weights(trainer.model, weights, source=path,
                 require=trainer.model.networks())
  trainer.take_model_weights()
  print(f"initialised weights from {path} ({source.kind}: "
        f"{', '.join(weights)})", flush=True)


def write_weights(trainer, config):
  """The weights fine-tuning, scoring and export read (.npz shards +
  weights.json in MODEL_DIR) at the trainer's step; written whenever a run
  stops with a saved state, and again only when their step is not it."""
  manifest = os.path.join(config.model_dir, npz_weights.MANIFEST)
  if storage.exists(manifest):
    try:
      if json.loads(storage.read_text(manifest)).get("step") == trainer.step:
        return
    except (ValueError, AttributeError):
      pass  # unreadable: written anew
  paths = trainer.save(config.model_dir)
  print(f"weights for fine-tuning (step {trainer.step}): "
        f"{os.path.dirname(paths[0])} ({len(paths)} file(s))", flush=True)


def save(trainer, config):
  path = npz_checkpoints.save(config.model_dir, trainer.step,
                              trainer.host_state(),
                              keep=config.keep_checkpoint_max)
  print(f"saved {path}", flush=True)
  return path


class JaxRun(run_dir.HoldsLock):
  """A pretraining run under JAX: `train()`, `evaluate()`; a context
  manager holding model_dir's lock."""

  def __init__(self, config):
    check_supported(config)
    self.config = config
    self.arrays = load_arrays(config)
    self.arrays.check(config)  # vocab_size, as the saved config has it
    self.lock, self._commit = run_dir.prepare(
        config, True, lock=config.do_train, backend="jax")
    if importlib.util.find_spec("tensorflow"):
      # Keras' set_random_seed seeds TensorFlow too where it is installed:
      # imported here first, without its C++ banner.
      import_tensorflow()
    try:
      self.trainer = JaxTrainer(config, self.arrays, devices(config))
    except BaseException:
      self.close()
      raise

  def train(self):
    config, trainer = self.config, self.trainer
    latest = npz_checkpoints.latest(config.model_dir)
    if latest:
      restore(trainer, latest)
      print(f"resuming from {latest}", flush=True)
    elif config.init_checkpoint:
      initialise(trainer, config.init_checkpoint)
    self._commit()  # nothing is written before this point
    total = config.num_train_steps
    if trainer.step >= total:
      print(f"already trained: step {trainer.step} >= num_train_steps "
            f"{total}", flush=True)
      write_weights(trainer, config)  # as a stop in its last loop left it
      return trainer.step
    trainer.log(f"training {trainer.model.name} ({trainer.precision}, "
                f"{len(trainer.devices)} device(s): "
                f"{trainer.devices[0].device_kind}, "
                f"{count_params(trainer.model):,} parameters) from step "
                f"{trainer.step} to {total}")
    trainer.log(f"FLOPs: {flops.train_flops_per_step(config):.3g} per step, "
                f"{flops.total_train_flops(config):.3g} for the whole run "
                "(ELECTRA appendix E convention)")
    keys = trainer.log_keys + ("grad_norm",)  # the TF path's order
    log = StepLog(config, trainer.step)
    writer = ScalarLog(os.path.join(config.model_dir, "train"))
    last_save = time.time()
    with PreemptionGuard() as preemption:
      while trainer.step < total:
        step = trainer.step
        # Fixed boundaries (a chunk's length is compiled into its step):
        # the next loop, save or end, so a resumed run cuts as this one.
        n = min(_next(step, config.iterations_per_loop),
                _next(step, config.save_checkpoints_steps), total) - step
        start = time.time()
        if log.calls:
          what = f"steps {step + 1}-{step + n}"
        else:
          what = "compiling the training step (first call)"
          print(f"{what}; a line every {LOG_SECONDS:.0f} s until it runs",
                flush=True)
        with Heartbeat(what):
          sums, finite = trainer.advance(n, total)
          finite = float(finite)
        # Fatal unless skipped (skips_nonfinite), or if every step was.
        if finite < n and not (trainer.skips_nonfinite() and finite > 0):
          raise UserError(
              f"non-finite loss or gradients at steps {step + 1}-"
              f"{trainer.step}; nothing saved past step {step} (try a lower"
              " learning_rate, or skip_nonfinite_steps)")
        logs = {k: float(sums[k]) / max(finite, 1.0) for k in keys}
        log.log(trainer.step, n, time.time() - start, logs,
                trainer.learning_rate(), writer)
        timed = (config.save_checkpoints_secs and
                 time.time() - last_save >= config.save_checkpoints_secs)
        if (trainer.step % config.save_checkpoints_steps == 0 or timed or
            trainer.step == total or preemption.requested):
          save(trainer, config)
          self._commit(saved=True)  # changed hparams: recorded now
          last_save = time.time()
        if preemption.requested:
          writer.flush()
          write_weights(trainer, config)
          raise Preempted(f"{preemption.name}: saved step {trainer.step} "
                          "and stopped", preemption.exit_code)
    writer.flush()
    write_weights(trainer, config)
    return trainer.step

  def evaluate(self):
    config, trainer = self.config, self.trainer
    path = config.eval_checkpoint or npz_checkpoints.latest(config.model_dir)
    if config.eval_checkpoint and not storage.exists(path):
      raise UserError(f"eval_checkpoint not found: {path}")
    if path:
      restore(trainer, path)
    elif config.init_checkpoint:
      initialise(trainer, config.init_checkpoint)
    else:
      print("note: no checkpoint in model_dir; evaluating initial weights")
    with Heartbeat("evaluating (the first call compiles the eval step)"):
      results = trainer.evaluate()
    if not config.eval_checkpoint:
      storage.write_text_atomic(
          os.path.join(config.model_dir, "eval_results.json"),
          json.dumps(results, indent=2, sort_keys=True))
    return results


def _next(step, every):
  return (step // every + 1) * every
