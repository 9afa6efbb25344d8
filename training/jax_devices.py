"""The JAX devices a step runs on: one, or several data parallel
(keras.distribution.DataParallel: the state and the data replicated, each
batch split by rows inside the jitted step, XLA summing the gradients),
those of this process or, once `join_hosts` joined several processes
(jax.distributed), of all of them. Pretraining's and fine-tuning's JAX
backends both place through it."""

import contextlib
import json
import os

import jax
import keras
import numpy as np

from util.errors import UserError


# Keras' own launch settings (keras.distribution.initialize): the
# coordinator's host:port first, the number of processes, this one's index.
HOSTS_ENV = ("KERAS_DISTRIBUTION_JOB_ADDRESSES",
             "KERAS_DISTRIBUTION_NUM_PROCESSES",
             "KERAS_DISTRIBUTION_PROCESS_ID")


_JOINED = []


def join_hosts():
  """Joins the processes the environment names (HOSTS_ENV), before any
  JAX computation; returns (this process's index, the number of them)."""
  given = [os.environ.get(k) for k in HOSTS_ENV]
  if not any(given):
    return 0, 1
  if not all(given):
    raise UserError("several hosts need all of " + ", ".join(HOSTS_ENV) +
                    "; missing: " + ", ".join(
                        k for k, v in zip(HOSTS_ENV, given) if not v))
  if not _JOINED:  # once a process (--seeds makes a run per seed)
    # CPU devices of several processes reduce over gloo (GPUs: NCCL).
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    keras.distribution.initialize()
    _JOINED.append(True)
  return jax.process_index(), jax.process_count()


def fetch(value):
  """A step's output on the host, whole: gathered from every process when
  its rows are split over several."""
  if jax.process_count() > 1 and not value.is_fully_addressable:
    from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
    return np.asarray(multihost_utils.process_allgather(value, tiled=True))
  return np.asarray(value)


def barrier(name):
  """Every process waits here for all others (after the chief's write,
  before anyone reads it)."""
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
    multihost_utils.sync_global_devices(name)


def chief_decides(decide):
  """decide() run by process 0 alone (it reads what the others must not
  race it to, or that only its host may hold: the output folder's record,
  its locks), its JSON result or UserError given to every process, so
  that all go on alike (the same trial to start from, or the same one
  error line)."""
  if jax.process_count() == 1:
    return decide()
  said = ""
  if jax.process_index() == 0:
    try:
      said = json.dumps({"value": decide()})
    except UserError as e:
      said = json.dumps({"error": str(e)})
    except BaseException as e:  # the others stop too, not wait forever
      _broadcast_text(json.dumps(
          {"error": f"process 0 stopped ({type(e).__name__}: {e})"}))
      raise
  said = json.loads(_broadcast_text(said))
  if "error" in said:
    raise UserError(said["error"])
  return said["value"]


def _broadcast_text(text):
  """Process 0's `text`, on every process (the others pass anything)."""
  from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
  data = np.frombuffer(text.encode(), np.uint8)
  n = int(multihost_utils.broadcast_one_to_all(np.int32(len(data))))
  if jax.process_index():
    data = np.zeros(n, np.uint8)
  return bytes(np.asarray(
      multihost_utils.broadcast_one_to_all(data))).decode()


class Devices:
  """`put` replicates a value on every device; `split` (inside a step, or
  on the host) shards a batch's arrays by rows. Also what the fine-tuning
  loop asks of a strategy (num_replicas_in_sync, scope)."""

  def __init__(self, devices, config=None):
    self.devices = list(devices)
    self.num_replicas_in_sync = len(self.devices)
    self.distribution = None
    if len(self.devices) > 1:
      for name in ("train_batch_size", "eval_batch_size"):
        if config is not None and getattr(config, name) % len(self.devices):
          raise UserError(f"{name} {getattr(config, name)} is not divisible"
                          f" by the {len(self.devices)} devices")
      self.distribution = keras.distribution.DataParallel(
          devices=self.devices)

  @staticmethod
  def scope():
    return contextlib.nullcontext()

  def put(self, value):
    if self.distribution is None:
      return jax.device_put(value, self.devices[0])
    layout = keras.distribution.TensorLayout(
        [None] * np.ndim(value), self.distribution.device_mesh)
    return keras.distribution.distribute_tensor(value, layout)

  def put_blocks(self, blocks):
    """One array whose first axis is the devices': blocks[d] (the same
    shape for every d) on the device at mesh position d. A process gives
    only its own devices' blocks (jax.make_array_from_callback asks it
    for no other)."""
    some = next(iter(blocks.values()))
    layout = keras.distribution.TensorLayout(
        [self.distribution.batch_dim_name] + [None] * some.ndim,
        self.distribution.device_mesh)
    return jax.make_array_from_callback(
        (len(self.devices),) + some.shape, layout.backend_layout,
        lambda index: blocks[index[0].start][None])

  def split(self, tensors):
    if self.distribution is None:
      return tensors
    return {k: keras.distribution.distribute_tensor(
        v, self.distribution.get_data_layout(v.shape))
            for k, v in tensors.items()}
