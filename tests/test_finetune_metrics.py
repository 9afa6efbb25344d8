"""GLUE metrics against scikit-learn / scipy, the GLUE score, TSVs, scorers."""

import pathlib
import sys
import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as sk

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from finetune import metrics  # noqa: E402

SIZES = [1, 2, 7, 100, 1000]
SEEDS = [0, 1, 2]


def classes(seed, size, num_classes=2):
  rng = np.random.default_rng(seed)
  return (rng.integers(0, num_classes, size),
          rng.integers(0, num_classes, size))


def quiet(fn, *args, **kwargs):
  """sklearn, without its warnings on one-class inputs (size 1)."""
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    return fn(*args, **kwargs)


def values(seed, size, ties=False):
  rng = np.random.default_rng(seed)
  if ties:  # a 1-5 scale, as STS gold has, makes many ties
    return rng.integers(1, 6, size).astype(float), rng.integers(1, 6, size)
  x = rng.normal(size=size)
  return x, x + rng.normal(size=size)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("size", SIZES)
def test_accuracy_and_f1_match_sklearn(seed, size):
  labels, predictions = classes(seed, size)
  assert metrics.accuracy(labels, predictions) == pytest.approx(
      100 * sk.accuracy_score(labels, predictions))
  assert metrics.f1(labels, predictions) == pytest.approx(
      100 * quiet(sk.f1_score, labels, predictions, zero_division=0))


@pytest.mark.parametrize("num_classes", [2, 3])
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("size", SIZES)
def test_mcc_matches_sklearn(seed, size, num_classes):
  labels, predictions = classes(seed, size, num_classes)
  assert metrics.mcc(labels, predictions) == pytest.approx(
      100 * quiet(sk.matthews_corrcoef, labels, predictions), abs=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("size", SIZES[2:])
@pytest.mark.parametrize("ties", [False, True])
def test_correlations_match_scipy(seed, size, ties):
  labels, predictions = values(seed, size, ties)
  assert metrics.pearson(labels, predictions) == pytest.approx(
      100 * stats.pearsonr(labels, predictions)[0], abs=1e-9)
  assert metrics.spearman(labels, predictions) == pytest.approx(
      100 * stats.spearmanr(labels, predictions)[0], abs=1e-9)


def test_degenerate_cases_follow_sklearn():
  labels = np.array([0, 1, 1, 0, 1])
  constant = np.ones(5, int)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # sklearn warns on 0/0
    assert metrics.mcc(labels, constant) == sk.matthews_corrcoef(
        labels, constant) == 0.0
    assert metrics.mcc(constant, constant) == 0.0
    zeros = np.zeros(5, int)
    assert metrics.f1(zeros, zeros) == sk.f1_score(zeros, zeros) == 0.0
  assert metrics.mcc(labels, labels) == 100.0
  assert metrics.mcc(labels, 1 - labels) == -100.0
  assert metrics.f1(labels, constant) == pytest.approx(75.0)  # 2*3/(5+3)
  assert metrics.accuracy(labels, constant) == pytest.approx(60.0)
  # A constant predictor carries no correlation; scipy says nan.
  assert metrics.pearson(labels, constant) == 0.0
  assert metrics.spearman(labels, constant) == 0.0
  assert metrics.pearson([1.0, 2.0, 3.0], [2.0, 4.0, 6.0]) == pytest.approx(
      100.0)
  assert metrics.spearman([1, 2, 3], [30, 20, 10]) == pytest.approx(-100.0)


def test_metric_inputs_are_checked():
  with pytest.raises(ValueError, match="3 labels but 2 predictions"):
    metrics.accuracy([0, 1, 1], [0, 1])
  with pytest.raises(ValueError, match="no predictions"):
    metrics.mcc([], [])
  for value in (metrics.accuracy([1], [1]), metrics.spearman([1, 2], [1, 2])):
    assert type(value) is float  # pylint: disable=unidiomatic-typecheck
  assert set(metrics.METRICS) == {"accuracy", "f1", "mcc", "pearson",
                                 "spearman"}


def bert_base_test_results():
  """ELECTRA Table 7's BERT-Base row ("Avg." 80.9) as trainer results, with
  the metrics that must not count set to something else."""
  return {
      "cola": {"mcc": 52.1, "loss": 0.5},
      "sst": {"accuracy": 93.5},
      "mrpc": {"accuracy": 84.8, "f1": 1.0},
      "sts": {"pearson": 1.0, "spearman": 85.8},
      "qqp": {"accuracy": 89.2, "f1": 1.0},
      "mnli": {"accuracy": 84.6, "accuracy_mm": 1.0},
      "qnli": {"accuracy": 90.5},
      "rte": {"accuracy": 66.4},
      "wnli": {"accuracy": 1.0},  # excluded, following BERT
      "chunk": {"f1": 1.0},
  }


def test_glue_average_uses_each_tasks_headline_metric():
  results = bert_base_test_results()
  expected = (52.1 + 93.5 + 84.8 + 85.8 + 89.2 + 84.6 + 90.5 + 66.4) / 8
  assert metrics.glue_average(results) == pytest.approx(expected)
  assert round(metrics.glue_average(results), 1) == 80.9
  assert metrics.GLUE_METRICS["mrpc"] == "accuracy"
  assert "wnli" not in metrics.GLUE_TASKS


def test_glue_average_of_a_subset():
  results = {"rte": {"accuracy": 70.0}, "cola": {"mcc": 50.0},
             "chunk": {"f1": 95.0}}
  assert metrics.glue_average(results) is None  # not the GLUE score
  assert metrics.glue_average(results, require_all=False) == 60.0
  assert metrics.glue_average({"chunk": {"f1": 95.0}},
                             require_all=False) is None
  assert metrics.glue_average({}) is None


def test_write_glue_tsv(tmp_path):
  path = tmp_path / "out" / "RTE.tsv"
  metrics.write_glue_tsv(str(path), [0, 1, "2"],
                        ["entailment", "not_entailment", "entailment"])
  assert path.read_text() == ("index\tprediction\n0\tentailment\n"
                              "1\tnot_entailment\n2\tentailment\n")
  metrics.write_glue_tsv(str(path), [0, 1], [np.float32(4.25), 1.0])
  assert path.read_text() == "index\tprediction\n0\t4.250\n1\t1.000\n"
  with pytest.raises(ValueError, match="2 ids but 1 predictions"):
    metrics.write_glue_tsv(str(path), [0, 1], ["a"])
