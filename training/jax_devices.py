"""The JAX devices a step runs on: one, or several data parallel
(keras.distribution.DataParallel: the state and the data replicated, each
batch split by rows inside the jitted step, XLA summing the gradients).
Pretraining's and fine-tuning's JAX backends both place through it."""

import contextlib

import jax
import keras
import numpy as np

from util.errors import UserError


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

  def split(self, tensors):
    if self.distribution is None:
      return tensors
    return {k: keras.distribution.distribute_tensor(
        v, self.distribution.get_data_layout(v.shape))
            for k, v in tensors.items()}
