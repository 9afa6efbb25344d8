"""BAM (dissertation chapter 3): the distillation losses, teacher annealing
and task sampling against NumPy references; teacher outputs files; and
BAM in run_finetuning.py: teachers, a multi-task student whose train step
computes section 3.2.2's loss, and its settings checked before any work."""

import collections
import json
import pathlib
import re
import types

import numpy as np
import pytest
from scipy.special import log_softmax

import run_finetuning
from configure_finetuning import FinetuningConfig
from finetune import bam
from finetune.distillation import with_teacher_weight
from finetune.trainer import FinetuningRunner
from loading import finetuned as finetuned_files
from tests.script_checks import refused
from tests.shared_data import SHARED
from tests.tiny_runs import tiny_run
from util.errors import UserError
from tests import finetuned_models


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


# ------------------------------------------------ BAM in run_finetuning.py
# A tiny model (tests/tiny_runs.py's tiny_run) on slices of the real RTE
# (classification) and STS-B (regression; its pairs doubled, so that two
# rows share an example): single-task teachers, then one multi-task student.
GLUE = pathlib.Path(SHARED) / "glue"
QUICK = {"train_examples_limit": 32, "eval_examples_limit": 32,
         "num_train_epochs": 1.0, "train_batch_size": 16,
         "eval_batch_size": 32, "max_seq_length": 32, "log_every_steps": 2,
         "learning_rate": 1e-3, "layerwise_lr_decay": 1.0}


def finetune(root, tasks, *extra, **hparams):
  return finetuned_models.finetune(root, tasks, *extra, quick=QUICK,
                                        **hparams)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
  """data/: the tiny run and RTE and STS-B slices (47 examples each);
  teacher_<task>/: a single-task teacher run that wrote its outputs."""
  root = tmp_path_factory.mktemp("bam")
  tiny_run(root)
  for task, folder in (("rte", "RTE"), ("sts", "STS-B")):
    (root / "finetuning_data" / task).mkdir(parents=True)
    for split in ("train", "dev"):
      lines = (GLUE / folder / f"{split}.tsv").read_bytes().splitlines()
      (root / "finetuning_data" / task / f"{split}.tsv").write_bytes(
          b"\n".join(lines[:48]) + b"\n")
  for task in ("rte", "sts"):
    finetune(root, task, "--output-dir", root / f"teacher_{task}",
             "--write-distill-outputs")
  return root


def teachers(root):
  """rte's teacher as its outputs file, sts's as its kept model."""
  return {"rte": str(root / "teacher_rte" / "distill" / "rte.npz"),
          "sts": str(root / "teacher_sts" / "sts_model")}


def test_teachers_then_a_multi_task_student(world, tmp_path, capsys):
  """Dissertation 3.2-3.3: Single->Multi distillation with teacher
  annealing and task sampling by |D|^0.75, on real GLUE rows."""
  rte = np.load(world / "teacher_rte" / "distill" / "rte.npz")
  assert str(rte["task"]) == "rte" and rte["values"].shape == (32, 2)
  np.testing.assert_allclose(rte["values"].sum(-1), 1.0, rtol=1e-5)
  assert rte["keys"].tolist() == [f"train-{i}#0" for i in range(32)]
  sts = np.load(world / "teacher_sts" / "distill" / "sts.npz")
  assert sts["values"].shape == (64,)  # (a, b) and (b, a): two rows each
  assert sorted(sts["keys"].tolist()) == sorted(
      f"train-{i}#{r}" for i in range(32) for r in (0, 1))
  capsys.readouterr()

  summary = finetune(world, "rte,sts", "--output-dir", tmp_path / "student",
                     distill=True, teachers=teachers(world),
                     task_weight_exponent=0.75)
  out = capsys.readouterr().out
  for task, metric in (("rte", "accuracy"), ("sts", "spearman")):
    assert np.isfinite(summary[task][metric]["median"]), summary
  assert "distilling from teachers, annealed" in out
  lambdas = [float(x) for x in re.findall(r"\| lambda ([0-9.]+) \|", out)]
  assert lambdas and lambdas == sorted(lambdas) and lambdas[-1] < 1, out
  total = int(re.search(r"for (\d+) steps", out).group(1))
  assert total == 2 + 4  # 32 rte rows, 64 sts rows: batches of 16
  assert lambdas[-1] == pytest.approx((total - 1) / total, abs=1e-3)
  kept = finetuned_files.load(str(tmp_path / "student" / "rte_sts_model"))
  assert kept.finetuning_config["distill"] is True
  assert sorted(kept.tasks) == ["rte", "sts"]


def test_a_distill_step_trains_on_the_annealed_target(world, tmp_path):
  """The loss of the driver's own train step (its batches, teacher
  outputs attached by row key, the [B] teacher weight) is section
  3.2.2's, computed here in NumPy from the student's outputs; a teacher
  that says the wrong label moves the loss as the formula says."""
  from finetune.optimization import create_optimizer
  config = FinetuningConfig(data_dir=str(world), model_name="tiny",
                            task_names="rte,sts", output_dir=str(tmp_path),
                            distill=True, teachers=teachers(world), **QUICK)
  runner = FinetuningRunner(config)
  runner.data.check_inputs()
  data = runner.data.train_data(runner.teachers.outputs())
  # The kept sts model predicts what its run wrote to sts.npz.
  sts_examples, sts_rows = runner.data.examples_and_features(
      runner.tasks[1], "train")
  np.testing.assert_allclose(
      data["sts"][0]["teacher_outputs"],
      bam.read_teacher_outputs(
          str(world / "teacher_sts" / "distill" / "sts.npz"), "sts",
          bam.row_keys(sts_examples, sts_rows), ()),
      rtol=1e-5, atol=1e-5)
  model = runner._build(0)  # pylint: disable=protected-access
  rng = np.random.default_rng(0)
  for v in model.heads["rte"].trainable_variables + model.heads[
      "sts"].trainable_variables:  # O(1) logits: far from uniform
    v.assign(rng.normal(0.0, 1.0, tuple(v.shape)).astype(np.float32))
  optimizer = create_optimizer(config, model.trainable_variables, 1, 10,
                               False)
  for name in ("rte", "sts"):
    features = data[name][0]
    # rte: eight rows of one label, so that gold and wrong CEs differ even
    # where the student says about the same for every row
    rows = (np.flatnonzero(features["label_ids"] == 0)[:8] if name == "rte"
            else np.arange(8))
    batch = {k: v[rows] for k, v in features.items()}
    teacher = batch["teacher_outputs"]
    if name == "rte":  # also a teacher sure of the wrong label
      wrong = np.eye(2, dtype=np.float32)[1 - batch["label_ids"]]
      cases = [(teacher, 1.0), (teacher, 0.25), (teacher, 0.0), (wrong, 1.0)]
    else:
      cases = [(teacher, 1.0), (teacher, 0.25), (teacher, 0.0)]
    step = runner._train_step(model, optimizer, name)  # pylint: disable=protected-access
    for values, weight in cases:
      plain = {k: v for k, v in batch.items() if k != "teacher_outputs"}
      gold, out = model(plain, task_name=name, training=False)  # no dropout
      fed = with_teacher_weight(dict(batch, teacher_outputs=values), weight)
      got = float(step(fed))  # the loss before this step's update
      if name == "rte":
        log_p = np.log(np.asarray(out["probabilities"], np.float64))
        onehot = np.eye(2)[batch["label_ids"]]
        target = (1 - weight) * onehot + weight * values
        want = -(target * log_p).sum(-1).mean()
      else:
        # Trained on score / 5 (the original's targets); predictions and
        # a teacher's outputs are reported on the 0-5 scale.
        pred = np.asarray(out["predictions"], np.float64) / 5
        target = (1 - weight) * batch["labels"] + weight * values / 5
        want = ((pred - target) ** 2).mean()
      assert got == pytest.approx(want, rel=1e-4), (name, weight)
      if weight == 0.0:
        assert got == pytest.approx(float(np.mean(gold)), rel=1e-4)
      elif values is not teacher:  # the wrong label's CE, not the gold's
        assert got == pytest.approx(-np.mean(
            log_p[np.arange(8), 1 - batch["label_ids"]]), rel=1e-4)
        assert abs(got - float(np.mean(gold))) > 1e-3
    # One trace for every weight: the weight is a tensor, not a constant.
    assert step.experimental_get_tracing_count() == 1


BAM_ERRORS = {  # name -> (argv extras, hparams, the error line's pattern)
    "distill_without_teachers": (
        "rte", {"distill": True}, r"distill needs teachers"),
    "a_teacher_for_another_task": (
        "rte", {"distill": True, "teachers": {"rte": "a.npz", "mnli": "b"}},
        r"teachers names mnli, which is not in --task-names \(rte\)"),
    "a_task_without_a_teacher": (
        "rte,sts", {"distill": True, "teachers": {"rte": "a.npz"}},
        r"distill: no teacher for sts"),
    "not_classification_or_regression": (
        "chunk", {"distill": True, "teachers": {"chunk": "a.npz"}},
        r"chunk is a tagging task: BAM's distill and write_distill_outputs "
        r"take classification and regression \(GLUE\) tasks only"),
    "teacher_of_another_task": (
        "rte", {"distill": True, "teachers": {"rte": "@sts.npz"}},
        r"sts.npz holds a sts teacher, not rte's"),
    "teacher_of_fewer_rows": (
        "rte", {"distill": True, "teachers": {"rte": "@rte.npz"},
                "train_examples_limit": 40},
        r"rte: the teacher in .*rte.npz has no output for 8 of the 40 train "
        r"rows \(first: train-32#0\)"),
    "teacher_not_found": (
        "rte", {"distill": True, "teachers": {"rte": "@nowhere.npz"}},
        r"rte: teacher outputs .*nowhere.npz not found"),
    "teacher_a_folder_not_a_model": (
        "rte", {"distill": True, "teachers": {"rte": "@"}},
        r"rte: teacher .*distill is a folder but not a fine-tuned model"),
    "write_distill_outputs_keeping_nothing": (
        "rte", {"write_distill_outputs": True, "keep_model": "none"},
        r"write_distill_outputs .* needs do_train and keep_model best or "
        r"last"),
    "negative_task_weight_exponent": (
        "rte,sts", {"task_weight_exponent": -1},
        r"'task_weight_exponent' must be >= 0, got -1"),
}


@pytest.mark.parametrize("name", sorted(BAM_ERRORS))
def test_bam_settings_are_checked_before_any_work(world, tmp_path, capsys,
                                                  name):
  tasks, hparams, match = BAM_ERRORS[name]
  distill = world / "teacher_rte" / "distill"
  for task, path in dict(hparams.get("teachers", {})).items():
    if path.startswith("@"):  # beside the rte teacher's outputs
      other = world / "teacher_sts" / "distill" / "sts.npz"
      hparams["teachers"] = dict(hparams["teachers"], **{
          task: str(other if path == "@sts.npz" else distill / path[1:])})
  argv = ["--data-dir", str(world), "--model-name", "tiny", "--task-names",
          tasks, "--output-dir", str(tmp_path / "out"), "--hparams",
          json.dumps(dict(QUICK, **hparams))]
  out, _ = refused(run_finetuning.main, argv, match, capsys,
                   [world, tmp_path])
  assert "step 1/" not in out and not (tmp_path / "out").exists()
