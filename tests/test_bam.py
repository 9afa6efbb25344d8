"""BAM (dissertation chapter 3): the distillation losses, teacher annealing
and task sampling against NumPy references; teacher outputs files."""

import collections
import types

import numpy as np
import pytest
from scipy.special import log_softmax

from finetune import bam
from util.errors import UserError


def test_classification_loss_mixes_gold_and_teacher():
  """Section 3.2.2: CE(lambda y + (1 - lambda) f_teacher, f_student)."""
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(5, 3))
  labels = np.array([0, 2, 1, 1, 0])
  teacher = np.exp(log_softmax(rng.normal(size=(5, 3)), axis=-1))
  weight = np.array([1.0, 0.75, 0.5, 0.25, 0.0])  # 1 - lambda
  log_p = log_softmax(logits, axis=-1)
  target = (1 - weight[:, None]) * np.eye(3)[labels] + weight[:, None] * teacher
  expected = -(target * log_p).sum(-1)
  got = bam.classification_loss(log_p, labels, teacher, weight)
  np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-5)
  # weight 0: the usual cross-entropy; weight 1: pure distillation
  assert np.isclose(float(got[4]), -log_p[4, labels[4]], rtol=1e-5)
  assert np.isclose(float(got[0]), -(teacher[0] * log_p[0]).sum(), rtol=1e-5)


def test_regression_loss_is_l2_to_the_mixed_target():
  """Regression tasks: the L2 distance to the teacher's prediction."""
  pred = np.array([1.0, 2.0, 3.5])
  gold = np.array([0.0, 4.0, 3.0])
  teacher = np.array([2.0, 3.0, 1.0])
  weight = np.array([1.0, 0.5, 0.0])
  expected = (pred - ((1 - weight) * gold + weight * teacher)) ** 2
  np.testing.assert_allclose(
      np.asarray(bam.regression_loss(pred, gold, teacher, weight)),
      expected, rtol=1e-6)


def test_teacher_annealing_is_linear_from_teacher_to_gold():
  """lambda rises linearly from 0 to 1 over training (section 3.2.2)."""
  total = 8
  weights = [bam.teacher_weight(s, total) for s in range(total)]
  np.testing.assert_allclose(weights, 1 - np.arange(total) / total)
  assert weights[0] == 1.0 and np.allclose(np.diff(weights), -1 / total)
  assert bam.teacher_weight(5, total, annealing=False) == 1.0  # lambda = 0


def test_task_sampling_follows_size_to_the_075():
  """Section 3.3: P(tau) proportional to |D_tau|^0.75."""
  sizes = {"mnli": 392702, "rte": 2490, "sst": 67349}
  probs = bam.task_probabilities(sizes)
  raw = np.array(list(sizes.values()), float) ** 0.75
  np.testing.assert_allclose(list(probs.values()), raw / raw.sum())
  assert bam.task_probabilities(sizes, 0.0)["rte"] == pytest.approx(1 / 3)
  order = bam.sample_schedule(20000, sizes, 0.75, seed=3)
  counts = collections.Counter(order)
  for name, p in probs.items():
    assert abs(counts[name] / len(order) - p) < 0.01, name
  assert order == bam.sample_schedule(20000, sizes, 0.75, seed=3)
  assert order != bam.sample_schedule(20000, sizes, 0.75, seed=4)


def _examples(*guids):
  return [types.SimpleNamespace(guid=g) for g in guids]


def test_teacher_outputs_round_trip_by_row_key(tmp_path):
  """Rows are matched by guid and rank, whatever their order."""
  teacher_examples = _examples("train-0", "train-1", "train-2")
  # MRPC-style doubling: example 1 twice (the pair swapped)
  keys = bam.row_keys(teacher_examples, {"example_index": [0, 1, 2, 1]})
  assert keys == ["train-0#0", "train-1#0", "train-2#0", "train-1#1"]
  values = np.arange(8, dtype=np.float32).reshape(4, 2)
  path = str(tmp_path / "rte.npz")
  bam.write_teacher_outputs(path, "rte", keys, values)
  student = ["train-1#1", "train-0#0"]
  np.testing.assert_array_equal(
      bam.read_teacher_outputs(path, "rte", student, (2,)),
      values[[3, 0]])


def test_bad_teacher_outputs_are_one_clear_error(tmp_path):
  path = str(tmp_path / "rte.npz")
  bam.write_teacher_outputs(path, "rte", ["train-0#0"], np.ones((1, 2)))
  cases = [
      (str(tmp_path / "none.npz"), "rte", ["train-0#0"], (2,), "not found"),
      (path, "mrpc", ["train-0#0"], (2,), "holds a rte teacher"),
      (path, "rte", ["train-0#0"], (3,), "another label set"),
      (path, "rte", ["train-0#0", "train-9#0"], (2,), "1 of the 2"),
  ]
  for where, task, keys, shape, message in cases:
    with pytest.raises(UserError, match=message):
      bam.read_teacher_outputs(where, task, keys, shape)
  junk = tmp_path / "junk.npz"
  junk.write_text("not numpy")
  with pytest.raises(UserError, match="not a file of teacher outputs"):
    bam.read_teacher_outputs(str(junk), "rte", ["train-0#0"], (2,))
