"""--strategy mirrored and --num-gpus ask for devices: where TensorFlow
does not see them the run stops with one line naming what it sees (issue
52), never a silent CPU run; several logical CPUs stay usable (tests)."""

import os
import types

import pytest

from training import distribution
from util.errors import UserError


def config(**kw):
  return types.SimpleNamespace(**dict(dict(strategy="mirrored", num_gpus=0),
                                      **kw))


def test_gpus_asked_for_but_not_seen_is_an_error():
  with pytest.raises(UserError, match=r"num_gpus 8: TensorFlow sees 0 GPU\(s\)"
                     r" \(devices: CPU:0\); install TensorFlow's GPU build "
                     r"with `.venv/bin/pip install \"\.\[gpu\]\"`"):
    distribution.mirrored_devices(config(num_gpus=8))


def test_one_gpu_install_instruction():
  """The error's instruction is docs/distributed.md's, and setup.py's gpu
  extra is TensorFlow's CUDA build."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  command = '.venv/bin/pip install ".[gpu]"'
  assert f"`{command}`" in distribution.GPU_HINT
  with open(os.path.join(root, "docs", "distributed.md")) as f:
    assert f"`{command}`" in f.read()
  with open(os.path.join(root, "setup.py")) as f:
    assert '"gpu": ["tensorflow[and-cuda]' in f.read()


def test_mirrored_on_one_cpu_is_an_error():
  with pytest.raises(UserError, match=r"strategy mirrored: TensorFlow sees no"
                     r" GPU \(devices: CPU:0\)"):
    distribution.get_strategy(config())
