"""run_pretraining.py under KERAS_BACKEND=jax: the pretraining loop's
JAX backend (pretrain/loop.py) around the JAX trainer (pretrain/
jax_trainer.py). Its own: the data are NumPy arrays (pretrain/arrays.py,
DATA_DIR/pretrain_arrays, exported from the TFRecords on first use where
TensorFlow is installed); every local device trains as one data-parallel
replica set (keras.distribution); checkpoints are .npz files of the whole
state and the step, which fixes the data position and the masking noise
(training/npz_checkpoints.py); the scalars go to TensorBoard events
through the tensorboard package (not TensorFlow's writer) and to
scalars.jsonl; the finished run's weights are also written as .npz shards
in MODEL_DIR (interop/npz_weights.py), which fine-tuning, scoring and
export read.
"""

import importlib.util
import json
import os

import jax

from pretrain import arrays as arrays_lib
from pretrain import run_dir
from pretrain import shares
from pretrain.jax_trainer import JaxTrainer
from pretrain.loop import PretrainingLoop
from interop import npz_weights
from training import npz_checkpoints
from training.jax_devices import barrier
from training.jax_devices import chief_decides
from training.jax_devices import join_hosts
from training.step_log import ScalarLog
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


def devices(config, processes=1):
  """The devices that train: every local one (or the first num_gpus), or
  with several processes every device of all of them."""
  if processes > 1:
    if config.num_gpus:
      raise UserError(f"num_gpus {config.num_gpus}: with several processes "
                      "every device of each trains (leave num_gpus 0)")
    return jax.devices()
  found = jax.local_devices()
  if config.num_gpus:
    if len(found) < config.num_gpus:
      raise UserError(f"num_gpus {config.num_gpus}, but JAX sees "
                      f"{len(found)} device(s): "
                      f"{', '.join(str(d) for d in found)}")
    found = found[:config.num_gpus]
  return found


def load_arrays(config, is_chief=True, lazy_train=False):
  """DATA_DIR/pretrain_arrays (MODEL_DIR's when DATA_DIR is read-only:
  arrays.cache_folder), exported from the TFRecords if missing: by
  process 0 first, the others waiting; another process exports its own
  only where its disk is not process 0's. `lazy_train`: arrays.load's."""
  folder = chief_decides(lambda: _exported(config))
  if not is_chief:
    folder = _exported(config)
  loaded = arrays_lib.load(folder, lazy_train=lazy_train)
  if not storage.exists(config.vocab_file or ""):
    vocab = located(loaded.meta.get("vocab_file", ""))
    if vocab and storage.exists(vocab):
      config.vocab_file = vocab
  return loaded


def _exported(config):
  """The arrays' folder, exported there first when missing."""
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
  return folder


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


class NoScalars(ScalarLog):
  """A process other than the chief writes no scalars."""

  def __init__(self):  # pylint: disable=super-init-not-called
    pass

  def write(self, step, scalars):
    del step, scalars

  def flush(self):
    pass


class JaxRun(PretrainingLoop):
  """A pretraining run under JAX: `train()`, `evaluate()`; a context
  manager holding model_dir's lock."""

  SHORTENS_CALLS = False  # each length of call compiles

  def __init__(self, config, open_source=None):
    check_supported(config)
    self.config, self.open_source = config, open_source
    # Several processes (jax.distributed): each trains its devices' share
    # of every batch; process 0 alone writes to model_dir.
    index, self.processes = join_hosts()
    self.is_chief = index == 0
    found = devices(config, self.processes)
    # With shares a process reads only its devices' training rows.
    self.arrays = load_arrays(config, self.is_chief, lazy_train=shares.wanted(
        config, len(found)))
    self.arrays.check(config)  # vocab_size, as the saved config has it
    self.lock, self._commit = run_dir.prepare(
        config, self.is_chief, lock=config.do_train and self.is_chief,
        backend="jax")
    if importlib.util.find_spec("tensorflow"):
      # Keras' set_random_seed seeds TensorFlow too where it is installed:
      # imported here first, without its C++ banner.
      try:
        import_tensorflow()
      except ImportError:  # present but broken: the JAX path needs none
        pass
    try:
      self.trainer = JaxTrainer(config, self.arrays, found)
    except BaseException:
      self.close()
      raise
    # With shares the trainer's arrays hold this process's rows only: the
    # others' are freed.
    self.arrays = self.trainer.arrays
    self.model, self.precision = self.trainer.model, self.trainer.precision
    self.keys = self.trainer.log_keys + ("grad_norm",)  # the TF path's order

  def _describe(self):
    devices = self.trainer.devices
    return (f"{self.precision}, {len(devices)} device(s): "
            f"{devices[0].device_kind}")

  def _step(self):
    return self.trainer.step

  def _latest(self):
    return npz_checkpoints.latest(self.config.model_dir)

  def _exists(self, path):
    return storage.exists(path)

  def _restore(self, path):
    trainer = self.trainer
    like = dict(zip(trainer.STATE, trainer.state))  # shapes: no copy made
    groups = npz_checkpoints.load(path, like)
    trainer.load_state(groups, npz_checkpoints.step_of(path))

  def _begin_step(self, step, restored=False):
    return self.trainer.begin_step(step, restored)

  def _took_weights(self):
    self.trainer.take_model_weights()

  def _run_steps(self, n):
    sums, finite = self.trainer.advance(n, self.config.num_train_steps)
    finite = float(finite)
    logs = {k: float(sums[k]) / max(finite, 1.0) for k in self.keys}
    return dict(logs, nonfinite_steps=n - finite)

  def _bad_weights(self):
    variables = (self.model.trainable_variables +
                 self.model.non_trainable_variables)
    values = self.trainer.state[0] + self.trainer.state[1]
    finite = jax.device_get([jax.numpy.isfinite(v).all() for v in values])
    return [v.path for v, ok in zip(variables, finite)
            if "float" in str(v.dtype) and not ok]

  def _save(self, step):
    path = npz_checkpoints.checkpoint_path(self.config.model_dir, step)
    if self.is_chief:  # the others hold the same state
      path = npz_checkpoints.save(self.config.model_dir, step,
                                  self.trainer.host_state(),
                                  keep=self.config.keep_checkpoint_max)
    barrier(f"saved step {step}")  # in place before any process reads it
    return path

  def _finish(self):
    if self.is_chief:
      write_weights(self.trainer, self.config)
    barrier("weights written")

  def _learning_rate(self):
    return self.trainer.learning_rate()

  def _writer(self, name):
    if not self.is_chief:
      return NoScalars()
    return ScalarLog(os.path.join(self.config.model_dir, name))

  def _eval_outputs(self):
    return self.trainer.evaluate()
