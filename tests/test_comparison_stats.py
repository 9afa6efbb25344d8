"""comparison/stats.py against SciPy: Welch's t-test, the exact
permutation test of a difference of means and its smallest p."""

import math

import numpy as np
import pytest
from scipy import stats as sp

from comparison import report
from comparison import stats

# Issue 51's seed means (results/comparison_tiny_gpu): GLUE of BERT,
# ELECTRA, Replace MLM; All-Tokens MLM has two pretraining seeds.
BERT = [47.167, 46.772, 45.200]
ELECTRA = [55.435, 55.677, 56.512]
REPLACE = [44.768, 44.321, 45.050]
ALL_TOKENS = [55.624, 56.114]


def scipy_permutation(a, b):
  def diff(x, y, axis):
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)
  return sp.permutation_test((a, b), diff, permutation_type="independent",
                             alternative="two-sided",
                             n_resamples=10**6).pvalue


@pytest.mark.parametrize("a,b", [(ELECTRA, BERT), (REPLACE, BERT),
                                 (ALL_TOKENS, BERT), ([1.0, 2.5, 2.0, 7.0],
                                                      [3.0, 1.5, 4.0])])
def test_against_scipy(a, b):
  out = stats.compare(a, b)
  assert out["welch_p"] == pytest.approx(
      sp.ttest_ind(a, b, equal_var=False).pvalue, rel=1e-12)
  assert out["permutation_p"] == pytest.approx(scipy_permutation(a, b))
  assert out["margin"] == pytest.approx(np.mean(a) - np.mean(b))


def test_the_smallest_p_the_seed_counts_allow():
  # Every run of one objective above every run of the other: the extreme.
  for n_a, n_b in ((3, 3), (2, 3), (4, 4), (5, 2)):
    a, b = list(range(10, 10 + n_a)), list(range(n_b))
    assert stats.permutation_p(a, b) == pytest.approx(
        scipy_permutation(a, b))
    assert stats.smallest_permutation_p(n_a, n_b) == pytest.approx(
        stats.permutation_p(a, b))
  assert stats.smallest_permutation_p(3, 3) == pytest.approx(0.1)
  assert stats.smallest_permutation_p(2, 3) == pytest.approx(0.2)


def test_verdicts_carry_their_p():
  assert stats.compare(ELECTRA, BERT)["verdict"] == "ahead (p = 0.0007)"
  assert stats.compare(BERT, ELECTRA)["verdict"].startswith("behind (p = ")
  assert stats.compare(REPLACE, BERT)["verdict"] == (
      "not established (p = 0.096)")
  one = stats.compare([50.0], [40.0])
  assert one["verdict"] == "not tested (1 vs 1 pretraining seeds)"
  assert one["welch_p"] is None and math.isclose(one["margin"], 10.0)


def test_the_report_tests_pretraining_seed_means():
  """Fine-tuning seeds of one pretrained model are averaged first: the
  test sees one number per pretraining run."""
  tasks = ["rte", "sts"]
  def scores(runs):
    return {(run, seed): {"rte": base + seed, "sts": base - seed}
            for run, base in runs.items() for seed in (1, 2)}
  bert = report.summarize(tasks, scores({"b1": 40.0, "b2": 41.0, "b3": 39.5}))
  electra = report.summarize(tasks, scores({"e1": 45.0, "e2": 47.0,
                                            "e3": 46.0}))
  assert electra["glue_runs"] == {"e1": 45.0, "e2": 47.0, "e3": 46.0}
  versus = report.versus_baseline({"mlm": bert, "electra": electra})
  assert versus["electra"]["welch_p"] == pytest.approx(sp.ttest_ind(
      [45.0, 47.0, 46.0], [40.0, 41.0, 39.5], equal_var=False).pvalue)
  assert versus["electra"]["baseline"] == "mlm"
  line = report.markdown({"tasks": tasks, "objectives": {
      "mlm": dict(bert, steps=1), "electra": dict(electra, steps=1)},
      "seeds": 2, "budget_flops": 1e12, "machine": "m",
      "versus_baseline": versus})
  assert "- electra vs mlm: GLUE +5.8 (3 vs 3 seeds): ahead (p = " in line
  assert "permutation p = 0.1 (smallest possible 0.1)" in line
