"""benchmarks/squad_backends.py's comparison of the backends' seed spreads,
on made-up trials, and its check that a trials record is the scorer's."""

import json

import pytest

from benchmarks import squad_backends as sb
from util.errors import UserError


def backends(tf, jax):
  """{backend: {"trials": ...}} with each trial's EM and F1 the value."""
  return {b: {"trials": [dict(seed=i + 1, exact_match=x, f1=x + 10.0,
                              loss=5.0 - x)
                         for i, x in enumerate(values)]}
          for b, values in (("tensorflow", tf), ("jax", jax))}


def test_ranges_and_welch_p():
  em = sb.compare(backends([1.0, 2.0, 3.0], [2.0, 3.0, 4.0]))["exact_match"]
  assert em["spread"]["jax"] == dict(mean=3.0, min=2.0, max=4.0)
  assert not em["jax_within_tf"]  # 4 > TF's max 3
  assert not em["tf_within_jax"]  # 1 < JAX's min 2
  # t = 1 / sqrt(2/3), 4 degrees of freedom: p = 0.2879
  assert em["welch_p"] == pytest.approx(0.2879, abs=1e-4)
  inside = sb.compare(backends([1.0, 2.0, 3.0], [1.5, 2.0, 3.0]))["f1"]
  assert inside["jax_within_tf"] and not inside["tf_within_jax"]
  # Two constants: no variance, so no p (not 0, not 1).
  assert sb.compare(backends([2.0] * 3, [2.0] * 3))["f1"]["welch_p"] is None


def test_table_says_which_side_falls_outside():
  trials = backends([1.0, 2.0, 3.0], [1.0, 2.0, 3.5])
  record = dict(comparison=sb.compare(trials), backends=trials,
                settings=dict(seeds=3, train_examples=0), dev_questions=9,
                cpu="a CPU")
  rows = sb.table(record).splitlines()
  assert rows[2].startswith("| EM | 2.00 [1.00, 3.00] | 2.17 [1.00, 3.50] |")
  assert rows[2].endswith("| yes | **no** | yes |")  # mean 2.17 inside
  assert rows[4] == ("| dev loss | 3.000 [2.000, 4.000] | 2.833 [1.500, "
                     "4.000] | 0.867 | yes | **no** | yes |")
  assert "not that they are the same" in sb.table(record)
  assert "with chance 0.20" in sb.table(record)


def test_chance_within_counts_orders():
  # 2 and 1 draws: the 1 is the middle of 3 in 1 order of 3.
  assert sb.chance_within(2, 1) == pytest.approx(1 / 3)
  assert sb.chance_within(3, 3) == pytest.approx(1 / 5)


def test_a_record_not_the_scorers_is_refused(tmp_path):
  golds = {"q1": ["Paris"], "q2": ["1066", "in 1066"]}
  with open(tmp_path / "squadv1_dev_predictions_trial1.json", "w") as f:
    json.dump({"q1": "paris", "q2": "1066 AD"}, f)
  right = dict(exact_match=50.0, f1=100 * (1 + 2 / 3) / 2, total=2)
  sb.check_scored(str(tmp_path), 1, right, golds)
  with pytest.raises(UserError, match="exact_match 50.0 by the scorer"):
    sb.check_scored(str(tmp_path), 1, dict(right, exact_match=100.0), golds)
