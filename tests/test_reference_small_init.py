"""Our initial ELECTRA-Small (Table 5.1's shape, today's defaults) draws
every weight from the distribution the original release draws it from:
the same variables and shapes in the release's names (interop/tf1.py), and
per variable a mean, std and largest |value| within sampling error of the
original's own initial draw (tests/reference/small_init.json, recorded by
record_original.py item 11). The draws are independent seeds, so values
are never compared one by one."""

import json
import os

import keras
import numpy as np

from interop import tf1
from pretrain.config import PretrainingConfig
from pretrain.objectives import build_model
from tests.tiny_models import SPECIALS

HERE = os.path.dirname(os.path.abspath(__file__))
Z = 6  # standard errors: ~200 variables, no false alarm by chance


def _original():
  with open(os.path.join(HERE, "reference", "small_init.json")) as f:
    recorded = json.load(f)
  return recorded["vocab_size"], {v["name"]: v for v in
                                  recorded["variables"]}


def _ours(vocab_size):
  keras.utils.set_random_seed(5)
  config = PretrainingConfig(data_dir="/tmp/unused", model_name="m",
                             model_size="small", vocab_size=vocab_size)
  config.validate()
  model = build_model(config, None, SPECIALS)
  model.build_variables()
  return {k: np.asarray(v, np.float64)
          for k, v in tf1.release_weights(model).items()}


def departures(ours, theirs):
  """Lines naming each variable of `ours` whose draw is not the original's."""
  found = []
  for name, value in ours.items():
    ref = theirs[name]
    if list(value.shape) != ref["shape"]:
      found.append(f"{name}: shape {value.shape} vs {ref['shape']}")
      continue
    n, std = value.size, ref["std"]
    if std == 0:  # a constant: zeros or LayerNorm's ones, exactly
      if not (value.std() == 0 and value.mean() == ref["mean"]):
        found.append(f"{name}: constant {value.mean()} vs {ref['mean']}")
      continue
    # Two independent draws of n: their means differ by ~std*sqrt(2/n);
    # their stds by ~std/sqrt(n) (a normal's; the truncated and uniform
    # draws here vary less).
    if abs(value.mean() - ref["mean"]) > Z * std * np.sqrt(2 / n):
      found.append(f"{name}: mean {value.mean():.5f} vs {ref['mean']:.5f}")
    if abs(value.std() - std) > Z * std / np.sqrt(n):
      found.append(f"{name}: std {value.std():.5f} vs {std:.5f}")
    # The tails: the truncated normal's cut (2 std) or the uniform's
    # bound, which the largest of 16k draws or more reaches to 1%.
    if n >= 16384 and abs(np.abs(value).max() / ref["max_abs"] - 1) > 0.01:
      found.append(f"{name}: max |x| {np.abs(value).max():.5f} vs "
                   f"{ref['max_abs']:.5f}")
  return found


def test_initial_small_weights_are_drawn_as_the_originals():
  vocab_size, theirs = _original()
  ours = _ours(vocab_size)
  assert sorted(ours) == sorted(theirs)
  assert len(ours) > 200
  assert not departures(ours, theirs)


def test_the_check_sees_a_wrong_draw():
  """A kernel drawn from the untruncated normal of std 0.02, and one
  scaled by 1.1 (glorot's bound for the wrong fans): each is named."""
  vocab_size, theirs = _original()
  ours = _ours(vocab_size)
  query = "electra/encoder/layer_3/attention/self/query/kernel"
  project = "electra/embeddings_project/kernel"
  ours[query] = np.random.default_rng(0).normal(0, 0.02, ours[query].shape)
  ours[project] = ours[project] * 1.1
  found = departures(ours, theirs)
  assert sorted(line.split(":")[0] for line in found) == [
      project, project, query, query]  # std and tail, std and tail
