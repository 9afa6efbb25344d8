"""pretrain/shares.py: the training rows' shares per device and each
device's draw from its own, known for any step without the ones before."""

import numpy as np
import pytest

from pretrain.arrays import batch_rows
from pretrain.config import PretrainingConfig
from pretrain.shares import Shares
from pretrain.shares import wanted
from util.errors import UserError


def test_contiguous_shares_cover_every_row_once():
  shares = Shares(11, 3, own=[2, 1])
  assert shares.bounds == [0, 3, 7, 11] and shares.rows == 4
  column = np.arange(11 * 2).reshape(11, 2)
  block = shares.block(column, 0)
  assert block.shape == (4, 2)
  np.testing.assert_array_equal(block[:3], column[:3])
  assert not np.shares_memory(block, column)
  np.testing.assert_array_equal(shares.held({"x": column})["x"],
                                column[3:])


def test_each_device_draws_from_its_own_share_and_resumes_exactly():
  shares = Shares(11, 2, own=[0, 1])
  rows = shares.draw(seed=5, batch=8, first_step=0, steps=6)
  assert rows.shape == (6, 8) and rows.dtype == np.int32
  assert rows[:, :4].max() < 5 and rows[:, 4:].max() < 6
  np.testing.assert_array_equal(shares.draw(5, 8, 4, 2), rows[4:])
  # Share 0 keeps the run's own seed; the other draws with another.
  np.testing.assert_array_equal(rows[:, :4], batch_rows(5, 5, 4, 0, 6))
  assert not np.array_equal(rows[:, 4:], batch_rows(5, 6, 4, 0, 6))


def test_one_device_or_batches_keep_the_whole_arrays():
  files = PretrainingConfig(input_sharding="files")
  batches = PretrainingConfig(input_sharding="batches")
  assert wanted(files, 2) and not wanted(files, 1)
  assert not wanted(batches, 2)


def test_too_few_rows_for_the_devices_is_one_line():
  with pytest.raises(UserError, match=r"^1 training example\(s\) cannot "
                     "give each of 2 devices a share .*: use input_sharding "
                     "batches$"):
    Shares(1, 2, own=[0])
