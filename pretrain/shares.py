"""input_sharding "files" under JAX on several devices: the training rows
split into one contiguous share per data-parallel device, each device's
rows of every batch drawn from its own share, so a process holds only its
devices' shares (TensorFlow's "files" gives each worker its own shards).
One process with two devices and two processes with one each train
alike; with one device there is one share, the whole arrays.
"""

import numpy as np

from pretrain.arrays import batch_rows
from util.errors import UserError

# Share d draws with seed + SEED_STRIDE * d (pretrain/data.py's per-worker
# seed): share 0 keeps the run's own seed.
SEED_STRIDE = 7919


def wanted(config, num_devices):
  """Whether a run of `config` on num_devices trains on shares."""
  return config.input_sharding == "files" and num_devices > 1


class Shares:
  """The shares of a split of `num_examples` rows over num_devices; `own`
  the mesh positions of this process's devices."""

  def __init__(self, num_examples, num_devices, own):
    n = num_examples
    if n < num_devices:
      raise UserError(f"{n} training example(s) cannot give each of "
                      f"{num_devices} devices a share (input_sharding "
                      "files): use input_sharding batches")
    self.num_examples, self.num_devices = n, num_devices
    self.bounds = [n * d // num_devices for d in range(num_devices + 1)]
    self.sizes = np.diff(self.bounds)
    self.rows = int(self.sizes.max())
    self.own = sorted(own)

  def block(self, column, d):
    """Share d of `column` padded to `rows` rows (the padding is never
    drawn): a copy, not a view that keeps the whole column alive."""
    share = column[self.bounds[d]:self.bounds[d + 1]]
    pad = np.zeros((self.rows - len(share),) + share.shape[1:], share.dtype)
    return np.concatenate([share, pad])

  def held(self, columns):
    """{column: the rows of this process's shares}, copied."""
    return {c: np.concatenate([v[self.bounds[d]:self.bounds[d + 1]]
                               for d in self.own])
            for c, v in columns.items()}

  def draw(self, seed, batch, first_step, steps):
    """int32 [steps, batch]: columns [d * b, (d + 1) * b) (b = batch / D)
    are device d's rows of each step, indices into its own share, drawn
    as batch_rows draws (any step's known without the ones before)."""
    per = batch // self.num_devices
    return np.concatenate(
        [batch_rows(seed + SEED_STRIDE * d, int(size), per, first_step,
                    steps) for d, size in enumerate(self.sizes)], axis=1)
