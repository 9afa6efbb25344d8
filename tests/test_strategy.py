"""--strategy mirrored and --num-gpus ask for devices: where TensorFlow
does not see them the run stops with one line naming what it sees (issue
52), never a silent CPU run; several logical CPUs stay usable (tests)."""

import types

import pytest

from training import distribution
from util.errors import UserError


def config(**kw):
  return types.SimpleNamespace(**dict(dict(strategy="mirrored", num_gpus=0),
                                      **kw))


def test_gpus_asked_for_but_not_seen_is_an_error():
  with pytest.raises(UserError, match=r"num_gpus 8: TensorFlow sees 0 GPU\(s\)"
                     r" \(devices: CPU:0\); a GPU build of TensorFlow is"):
    distribution.mirrored_devices(config(num_gpus=8))


def test_mirrored_on_one_cpu_is_an_error():
  with pytest.raises(UserError, match=r"strategy mirrored: TensorFlow sees no"
                     r" GPU \(devices: CPU:0\)"):
    distribution.get_strategy(config())
