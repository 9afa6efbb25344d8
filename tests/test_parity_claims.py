"""results/original_parity/README.md states the figures claims.py computes
from the records (issue 63), and its equivalence test is a TOST."""

import os

from tests import parity_scripts

claims = parity_scripts.load("claims")

STATED = ("ours disc_auc outside at 500", "ours disc_auc outside at 2500",
          "ours disc_auc outside at 4000",
          "ours_origdense disc_auc outside at 4000",
          "TOST ours_origdense disc_loss at 0.001",
          "TOST ours_origdense disc_auc at 0.01",
          "TOST ours_origdense masked_lm_loss at 0.05",
          "evaluator offset seed 1", "evaluator offset seed 2",
          "one-evaluator gap ours_origorder_fp32 seed 1",
          "one-evaluator gap ours_origorder_fp32 seed 2",
          "one-evaluator gap ours_origdense_fp32 seed 1",
          "one-evaluator gap ours_origdense_fp32 seed 2",
          "original's evaluator ours_origorder_fp32 mean outside from 1500",
          "original's evaluator ours_origorder_fp32 gap at 4000",
          "original's evaluator ours_origorder_fp32 TOST at 0.05",
          "evaluators' offset over mask seeds ours_origorder_fp32_seed1",
          "evaluators' offset over mask seeds on the original's rows "
          "ours_origorder_fp32_seed1",
          "ours sts 0.0003 interval", "ours_orighead sts 0.0003 interval",
          "ours_orighead sts 0.001 interval",
          "electric evaluator offset seed 1",
          "electric evaluator offset seed 2",
          "electric original's evaluator seed 1 inside at 4000",
          "electric original's evaluator seed 2 inside at 4000",
          "electric ours' evaluator ranges apart",
          "electric the original's evaluator ranges apart",
          "small ours' evaluator ranges apart",
          "small the original's evaluator ranges apart",
          "small originit ours' evaluator ranges apart",
          "small ours vs ours_originit ranges apart",
          "small originit disc_auc minus original per seed at 1000",
          "small disc information ours vs original at 1000",
          "small original seed 1 disc information at 1000",
          "small ours_originit seed 1 disc information at 1000",
          "small ours_originit seed 2 disc information at 1000",
          "small ours seed 1 disc information at 1000 on the original's "
          "evaluator",
          "small ours seed 2 disc information at 1000 on the original's "
          "evaluator",
          "small ours seed 3 disc information at 1000 on the original's "
          "evaluator",
          "small ours_originit seed 2 disc information at 1000 on the "
          "original's evaluator",
          "small originit the original's evaluator ranges apart",
          "small Holm-adjusted Welch p at 1000", "small TOST at 1000")


def test_the_readme_says_each_figure_the_records_give():
  with open(os.path.join(claims.RECORDS, "README.md")) as f:
    readme = " ".join(f.read().split())
  found = claims.figures()
  for name in STATED:
    assert found[name] in readme, (name, found[name])


def test_tost_establishes_only_a_difference_inside_the_margin():
  a = [1.0, 1.1, 0.9, 1.05, 0.95] * 4
  assert claims.tost_p(a, [x + 0.01 for x in a], 0.2) < 1e-6
  assert claims.tost_p(a, [x + 0.5 for x in a], 0.2) > 0.99
  assert claims.outside([1, 2], [3, 4]) == -1
  assert claims.outside([5, 6], [3, 4]) == 1
  assert claims.outside([2, 3.5], [3, 4]) == 0.0


def test_holm_adjusts_the_family_step_down():
  # Holm (1979): sorted p times m, m - 1, ...; monotone; capped at 1.
  got = claims.holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.5})
  assert got == {"a": 0.04, "c": 0.09, "b": 0.09, "d": 0.5}
  assert claims.holm({"a": 0.6, "b": 0.7}) == {"a": 1.0, "b": 1.0}
