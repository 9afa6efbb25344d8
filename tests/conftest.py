"""Shared test setup."""

from util import tf_quiet

# TensorFlow's C++ start-up banner, muted as the scripts do; otherwise each
# xdist worker's copy lands under the test report.
tf_quiet.import_tensorflow(with_text=True)

import keras  # noqa: E402 (after the muted import)
import pytest


@pytest.fixture(autouse=True)
def float32_policy():
  """In-process training runs set a global mixed-precision policy (bf16 on
  CPUs that have it); every test starts from float32 again."""
  keras.config.set_dtype_policy("float32")
  yield
  keras.config.set_dtype_policy("float32")
