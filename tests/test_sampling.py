"""Generator sampling draws from softmax(logits / T), as ids."""

import keras
import numpy as np
from scipy import stats

from pretrain.sampling import gumbel_max_sample
from pretrain.sampling import sample_from_softmax


def softmax(x):
  e = np.exp(x - x.max())
  return e / e.sum()


def chi2_pvalue(ids, probs):
  counts = np.bincount(ids, minlength=len(probs))
  probs = np.asarray(probs, np.float64)
  return stats.chisquare(counts, probs / probs.sum() * counts.sum()).pvalue


def test_samples_follow_tempered_softmax():
  logits = np.log(np.array([0.5, 0.2, 0.15, 0.1, 0.05], np.float32))
  n = 20000
  tiled = np.tile(logits, (n, 1))
  for temperature in (1.0, 2.0):
    seed = keras.random.SeedGenerator(3)
    for sampler in (sample_from_softmax, gumbel_max_sample):
      ids = np.asarray(sampler(tiled, seed, temperature))
      assert ids.shape == (n,) and ids.dtype == np.int32
      assert chi2_pvalue(ids, softmax(logits / temperature)) > 1e-3


def test_disallowed_ids_are_never_sampled():
  logits = np.zeros((4000, 3), np.float32)
  logits[:, 1] = 5.0  # the "original" is by far the most likely
  disallow = np.ones((4000,), np.int32)
  ids = np.asarray(sample_from_softmax(logits, keras.random.SeedGenerator(0),
                                       1.0, disallow_ids=disallow))
  assert not np.any(ids == 1)
  assert set(np.unique(ids)) == {0, 2}


def test_batch_shape_is_kept():
  logits = np.random.RandomState(0).randn(2, 3, 9).astype(np.float32)
  ids = sample_from_softmax(logits, keras.random.SeedGenerator(0))
  assert tuple(ids.shape) == (2, 3)
