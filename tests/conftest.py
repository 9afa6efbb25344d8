"""Shared test setup."""

import keras
import pytest


@pytest.fixture(autouse=True)
def float32_policy():
  """In-process training runs set a global mixed-precision policy (bf16 on
  CPUs that have it); every test starts from float32 again."""
  keras.config.set_dtype_policy("float32")
  yield
  keras.config.set_dtype_policy("float32")
