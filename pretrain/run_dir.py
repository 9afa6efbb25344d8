"""A pretraining run's directory: created, its config recorded; a resumed
run checked against the config it was trained with (run_config.py)."""

import dataclasses
import fcntl
import json
import os
import socket
import sys
import time

from pretrain.run_config import CONFIG_FILE
from pretrain.run_config import check_architecture
from pretrain.run_config import check_resumable
from pretrain.run_config import describe_changes
from pretrain.run_config import keep_config
from pretrain.run_config import read_saved_config
from util import storage
from util.errors import UserError
from util.outputs import check_output_dir

LOCK_FILE = "training.lock"  # held while a run trains (RunLock)

def io_errors():
  """What a failed read or write raises: TensorFlow's gfile errors too,
  where TensorFlow is in use (the JAX driver runs without it)."""
  tf = sys.modules.get("tensorflow")
  return (OSError, tf.errors.OpError) if tf else (OSError,)


# Each backend's checkpoint files: a run goes on only on its own backend.
CHECKPOINT_FILES = {"tensorflow": "ckpt-*.index", "jax": "ckpt-*.npz"}


def _latest_finder(backend):
  """The newest checkpoint of model_dir, as `backend` writes them."""
  if backend == "jax":
    from training.npz_checkpoints import latest  # pylint: disable=g-import-not-at-top
  else:
    from training.checkpointing import latest_checkpoint as latest  # pylint: disable=g-import-not-at-top
  return latest


def check_backend(model_dir, backend):
  """A run trained on the other backend is refused: this one would not
  see its checkpoints and would start over beside them."""
  for other, pattern in CHECKPOINT_FILES.items():
    found = storage.glob(os.path.join(model_dir, pattern))
    if other != backend and found:
      raise UserError(
          f"{model_dir} holds checkpoints of a run trained with "
          f"KERAS_BACKEND={other} ({os.path.basename(found[-1])}): go on "
          f"with KERAS_BACKEND={other}, or use another --model-name")


def prepare(config, is_chief, lock=False, backend="tensorflow"):
  """Creates model_dir (process 0: `is_chief`) and checks a resumed run
  against its config and `backend` (whose checkpoints it finds:
  TensorFlow's, training/checkpointing.py, or the JAX driver's,
  training/npz_checkpoints.py).
  Returns (the RunLock taken first with `lock`, else None; commit()):
  commit() records the config (and keeps the previous one when hparams
  changed). The caller commits once the checkpoint is restored, so a run
  refused on the way leaves every file as it was, and again with
  saved=True after each checkpoint save: a trained run's changed hparams
  are recorded only once a checkpoint trained with them is saved, so a
  run that stops before (a diverging loss) leaves the config as it was."""
  path = os.path.join(config.model_dir, CONFIG_FILE)
  check_output_dir(config.model_dir, "model_dir")
  latest = _latest_finder(backend)
  check_backend(config.model_dir, backend)  # before the lock file is made
  try:
    if is_chief:  # the others write nothing here (TF workers: their own)
      storage.makedirs(config.model_dir)
  except io_errors() as e:
    raise UserError(
        f"cannot write to model_dir {config.model_dir}: {e}") from None
  held = RunLock(config.model_dir) if lock else None
  try:
    writes, on_save = _prepare(config, is_chief, path, latest)
  except BaseException:
    if held:
      held.release()
    raise

  def commit(saved=False):
    if held:
      held.keep_signature()
    if on_save and not saved:
      return
    try:
      while writes:
        writes.pop(0)()
    except io_errors() as e:
      raise UserError(
          f"cannot write to model_dir {config.model_dir}: {e}") from None
  return held, commit


def _prepare(config, is_chief, path, find_latest):
  """The checks; returns (the writes that commit() does, whether they
  wait for a checkpoint save: a trained run's changed config)."""
  try:
    latest = find_latest(config.model_dir)  # a broken index: refused
  except io_errors() as e:
    raise UserError(f"cannot read model_dir {config.model_dir}: {e}") from None
  writes, keep = [], None
  if storage.exists(path):
    text, old = read_saved_config(path)
    check_architecture(config, old)
    write, keep = _check_resume(config, old, latest)
    if keep and is_chief:
      def keep_old():
        kept = keep_config(config.model_dir, text, keep)
        print(f"the run's previous config is kept as {kept}", flush=True)
      writes.append(keep_old)
  elif latest:
    raise UserError(
        f"{config.model_dir} holds checkpoints (the newest "
        f"{os.path.basename(latest)}) but no {CONFIG_FILE}: the hparams "
        "they were trained with are unknown; put the run's config back, "
        "or use another --model-name")
  else:
    write = True
  if is_chief and write:
    writes.append(lambda: storage.write_text_atomic(
        path, json.dumps(dataclasses.asdict(config), indent=2,
                         sort_keys=True)))
  return writes, keep is not None


class RunLock:
  """An flock on MODEL_DIR/training.lock while a run trains there, so a
  second run on the same folder is refused instead of training into it.
  The kernel drops the lock when the process ends in any way (SIGKILL
  too): a killed run never leaves it stuck. The file names the holder;
  a run refused before it trained puts back what the file said before.
  Remote folders (gs://) are not locked."""

  def __init__(self, model_dir, file=LOCK_FILE, what="training run",
               instead="use another --model-name", name="model_dir"):
    """`file` in `model_dir`; `what` holds it, `instead` is the advice
    and `name` the folder's in a refusal (run_finetuning.py's differ)."""
    self.fd, self._previous = None, None
    if "://" in model_dir:
      return
    path = os.path.join(model_dir, file)
    try:
      fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
      raise UserError(f"cannot write to {name} {model_dir}: cannot open "
                      f"{file}: {e.strerror or e}") from None
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = os.pread(fd, 400, 0).decode("utf-8", "replace").strip()
      os.close(fd)
      raise UserError(f"{model_dir} is in use by another {what} "
                      f"({holder or 'its holder is unknown'}): wait for it "
                      f"to end, or {instead}") from None
    except OSError as e:  # a filesystem without locks (some NFS mounts)
      os.close(fd)
      print(f"warning: cannot lock {path} ({e.strerror or e}): a second "
            "run on this model_dir would not be stopped", flush=True)
      return
    self.fd = fd
    self._previous = os.pread(fd, 1 << 16, 0)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    self._write(f"pid {os.getpid()} on {socket.gethostname()}, started "
                f"{started}\n".encode())

  def _write(self, data):
    os.ftruncate(self.fd, 0)
    os.pwrite(self.fd, data, 0)

  def keep_signature(self):
    """The run goes on: the file keeps naming it."""
    self._previous = None

  def release(self):
    if self.fd is not None:
      if self._previous is not None:
        self._write(self._previous)
      os.close(self.fd)  # closing the file drops its flock
      self.fd = None

  def __del__(self):
    self.release()


class HoldsLock:
  """A run that holds model_dir's RunLock (self.lock) until close() or
  the end of its `with` block (the process's end drops it too)."""

  lock = None

  def close(self):
    if self.lock is not None:
      self.lock.release()
      self.lock = None

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


def _check_resume(config, old, latest):
  """A trained run goes on only with the hparams it was trained with
  (raising num_train_steps aside), unless accept_hparam_changes; then its
  old config is kept beside the new one. Returns (whether to write the new
  config: never for an eval-only run of a trained model; the step to keep
  the old config as, or None)."""
  if not latest:
    return True, None  # nothing trained yet: the saved config describes nothing
  step = latest.rsplit("-", 1)[-1].removesuffix(".npz")
  raised, others = check_resumable(config, old, step)
  if not config.do_train:
    if others:
      print(f"note: evaluating with hparams that differ from the run's "
            "(--accept-hparam-changes): "
            f"{describe_changes(others)}", flush=True)
    return False, None
  if raised:
    print(f"num_train_steps raised from {raised[0][1]} to {raised[0][2]}: "
          f"continuing the run from step {step} (the learning-rate "
          "schedule now ends at the new count)", flush=True)
  if others:
    print(f"hparams changed from step {step} on (--accept-hparam-changes):"
          f" {describe_changes(others)}", flush=True)
  return True, (step if raised or others else None)
