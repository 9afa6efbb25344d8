"""Shared test setup and the fixtures several test modules use."""

import os
import tempfile

# Keras on TensorFlow here and in every subprocess that does not ask for
# JAX, whatever a JAX run left in ~/.keras/keras.json.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# JAX runs here and in subprocesses compile the same tiny programs again and
# again (a resumed run, a rerun, the reference beside it); XLA's persistent
# cache keys on the program, so a hit is the same executable, not a shortcut.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(
    tempfile.gettempdir(), f"electra-tests-jax-cache-{os.getuid()}"))

from util import tf_quiet  # noqa: E402

# TensorFlow's C++ start-up banner, muted as the scripts do; otherwise each
# xdist worker's copy lands under the test report.
tf_quiet.import_tensorflow(with_text=True)

import keras  # noqa: E402 (after the muted import)
import pytest  # noqa: E402

from tests import pretraining_runs  # noqa: E402
from tests import tiny_runs  # noqa: E402


@pytest.fixture(autouse=True)
def float32_policy():
  """In-process training runs set a global mixed-precision policy (bf16 on
  CPUs that have it); every test starts from float32 again."""
  keras.config.set_dtype_policy("float32")
  yield
  keras.config.set_dtype_policy("float32")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  """A small dataset in the data-dir layout, built from the sample text."""
  return pretraining_runs.build_data_dir(tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="module")
def pretrained(data_dir):
  """A tiny pretrained ELECTRA and a finetuning_data/ folder."""
  # Here, not at the top: it needs ../shared/data, which most tests do not.
  from tests import finetuning_data  # pylint: disable=g-import-not-at-top
  return finetuning_data.make_pretrained(data_dir)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """Tiny random runs of each objective (tests/tiny_runs.py's save_run):
  (data_dir, {name: (config, model)})."""
  data_dir = str(tmp_path_factory.mktemp("scoring"))
  made = {name: tiny_runs.save_run(data_dir, objective, name=name, **kw)
          for name, objective, kw in (
              ("electric", "electric", {}), ("script", "script", {}),
              ("mlm", "mlm", {}), ("electra", "electra", {}),
              ("electra_tt", "electra", dict(two_tower_generator=True)))}
  return data_dir, made
