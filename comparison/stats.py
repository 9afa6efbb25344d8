"""Tests of one objective against BERT over pretraining seeds.

The unit is the pretraining seed: fine-tuning seeds of one pretrained model
share its weights, so their scores are not independent samples of the
objective. Each pretraining run's score is the mean over its fine-tuning
seeds; two objectives' run means are compared by Welch's t-test and by
the exact permutation test of the difference of means (every split of
the pooled means, two-sided as SciPy's permutation_test), whose smallest
possible p is 2 / C(n_a + n_b, n_a): 0.1 for 3 vs 3, 0.2 for 2 vs 3, so
such counts cannot reach 0.05 by that test whatever the scores.
"""

import itertools
import math

import numpy as np
from scipy import stats

ALPHA = 0.05


def welch_p(a, b):
  """Two-sided Welch t-test p of mean(a) vs mean(b); nan under 2 each."""
  if min(len(a), len(b)) < 2:
    return float("nan")
  return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def permutation_p(a, b):
  """Exact two-sided permutation p of mean(a) - mean(b): twice the smaller
  one-sided p over every split of the pooled values (SciPy's
  permutation_test convention), at most 1."""
  pooled = np.asarray(list(a) + list(b), np.float64)
  n, k = len(pooled), len(a)
  total = pooled.sum()
  diffs = np.array([pooled[list(picked)].sum() / k -
                    (total - pooled[list(picked)].sum()) / (n - k)
                    for picked in itertools.combinations(range(n), k)])
  observed = np.mean(a) - np.mean(b)
  eps = 1e-12 * max(1.0, abs(observed))  # the observed split itself counts
  one_sided = min(np.mean(diffs >= observed - eps),
                  np.mean(diffs <= observed + eps))
  return float(min(1.0, 2 * one_sided))


def smallest_permutation_p(n_a, n_b):
  return 2 / math.comb(n_a + n_b, n_a) if n_a and n_b else float("nan")


def compare(a, b):
  """{margin, welch_p, permutation_p, smallest_p, verdict} of run means a
  (the objective) against b (BERT); the verdict is Welch's at ALPHA."""
  margin = float(np.mean(a) - np.mean(b))
  p = welch_p(a, b)
  if math.isnan(p):
    verdict = f"not tested ({len(a)} vs {len(b)} pretraining seeds)"
  elif p < ALPHA:
    verdict = f"{'ahead' if margin > 0 else 'behind'} (p = {p:.2g})"
  else:
    verdict = f"not established (p = {p:.2g})"
  def number(x):  # JSON has no NaN
    return None if math.isnan(x) else x
  return {"margin": margin, "welch_p": number(p),
          "permutation_p": number(permutation_p(a, b)) if len(a) and len(b)
          else None,
          "smallest_p": number(smallest_permutation_p(len(a), len(b))),
          "seeds": [len(a), len(b)], "verdict": verdict}
