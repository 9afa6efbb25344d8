"""Pretrained checkpoint -> fine-tuning on slices of the real GLUE, SQuAD and
CoNLL-2000 data: every task trains, evaluates and writes predictions."""

import glob
import json
import os
import re

import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import run_finetuning
import run_pretraining
from loading import finetuned as finetuned_files
from tests.finetuning_data import QUICK
from tests.pretraining_runs import MICRO
from tests.pretraining_runs import ROOT
from tests.pretraining_runs import hparams
from tests.script_checks import error_line


def finetune(data_dir, tasks, capsys, **extra):
  summary = run_finetuning.main([
      "--data-dir", data_dir, "--model-name", "pre", "--task-names", tasks,
      "--hparams", json.dumps(dict(QUICK, **extra))])
  return summary, capsys.readouterr().out


EXPECTED = {
    "cola": ("mcc",), "sst": ("accuracy",), "mrpc": ("accuracy", "f1"),
    "sts": ("pearson", "spearman"), "rte": ("accuracy",),
    "squadv1": ("exact_match", "f1"),
    "squad": ("exact_match", "f1", "best_f1"),
    "chunk": ("f1",),
}


@pytest.mark.parametrize("task", list(EXPECTED))
def test_every_task_trains_evaluates_and_writes_predictions(pretrained,
                                                            capsys, task):
  extra = (dict(max_seq_length=128, max_query_length=32, doc_stride=64)
           if task.startswith("squad") else {})
  summary, out = finetune(pretrained, task, capsys, **extra)
  assert re.search(r"step \d+/\d+ \| loss [0-9.]+ \| [0-9.]+ examples/s",
                   out), out
  for metric in EXPECTED[task]:
    value = summary[task][metric]["median"]
    assert np.isfinite(value), (metric, value)
  outputs = os.path.join(pretrained, "models", "pre", "finetuning")
  ext = {"squadv1": ".json", "squad": ".json", "chunk": ".txt"}.get(task,
                                                                 ".tsv")
  assert f"{task}_dev_predictions_trial1{ext}" in os.listdir(outputs), (
      os.listdir(outputs))


def test_multi_task_trials_report_median_mean_std(pretrained, capsys):
  summary, out = finetune(pretrained, "rte,mrpc", capsys, num_trials=2)
  for task in ("rte", "mrpc"):
    stats = summary[task]["accuracy"]
    assert len(stats["values"]) == 2
    assert stats["median"] == pytest.approx(np.median(stats["values"]))
    assert stats["std"] == pytest.approx(np.std(stats["values"]))
  assert "glue" in summary
  assert "median over 2 trial(s)" in out


def test_init_from_the_generator(pretrained, capsys):
  summary, out = finetune(pretrained, "rte", capsys, init_from="generator")
  assert np.isfinite(summary["rte"]["accuracy"]["median"])


def test_glue_test_outputs_are_leaderboard_tsvs(pretrained, capsys):
  finetune(pretrained, "sst", capsys, do_train=False,
           write_test_outputs=True, eval_examples_limit=20)
  # Evaluate only: files named by time, never over a training run's.
  path, = glob.glob(os.path.join(pretrained, "models", "pre", "finetuning",
                                 "sst_test_predictions_eval-*.tsv"))
  lines = open(path).read().splitlines()
  assert lines[0] == "index\tprediction"
  assert len(lines) == 21
  assert all(re.fullmatch(r"\d+\t[01]", line) for line in lines[1:])


def test_encoder_starts_from_the_discriminator(pretrained):
  from configure_finetuning import FinetuningConfig
  from finetune.trainer import FinetuningRunner
  config = FinetuningConfig(data_dir=pretrained, model_name="pre",
                            task_names="rte", **QUICK)
  runner = FinetuningRunner(config)
  model = runner._build(0)  # pylint: disable=protected-access
  reader = tf.train.load_checkpoint(runner.pretrained.checkpoint)
  names = reader.get_variable_to_shape_map()
  for variable in model.encoder.weights:
    # finetuning/encoder/X -> electra/discriminator/X, or electra/X for the
    # embeddings the discriminator shares with the generator.
    inner = variable.path.split("/", 2)[2]
    owner = "" if inner.startswith("embeddings/") else "discriminator.S"
    key = ("model/electra.S" + owner + inner.replace("/", ".S") +
           "/.ATTRIBUTES/VARIABLE_VALUE")
    assert key in names, (variable.path, key)
    np.testing.assert_array_equal(np.asarray(variable),
                                  reader.get_tensor(key))


def test_one_eval_trace_serves_every_trial(pretrained):
  """The eval step is traced once for a run: a later trial's model (another
  seed, so another head) goes through the same step, with no new trace, and
  gets the loss the model itself computes."""
  from configure_finetuning import FinetuningConfig
  from finetune.featurization import model_inputs
  from finetune.trainer import FinetuningRunner
  config = FinetuningConfig(data_dir=pretrained, model_name="pre",
                            task_names="rte", **QUICK)
  runner = FinetuningRunner(config)
  task, predictor = runner.tasks[0], runner.predictor
  _, features = runner.data.examples_and_features(task, "dev")
  inputs = model_inputs(features)
  size = config.eval_batch_size
  steps, losses, traces = [], [], []
  for seed in (0, 1):
    model = runner._build(seed)  # pylint: disable=protected-access
    _, loss = predictor.predict(model, task, "dev")
    steps.append(predictor._eval_step(  # pylint: disable=protected-access
        model, task.name))
    traces.append(steps[-1].experimental_get_tracing_count())
    direct = np.concatenate([np.asarray(model(
        {k: v[i:i + size] for k, v in inputs.items()}, task_name=task.name,
        training=False)[0]) for i in range(0, len(inputs["input_ids"]),
                                           size)])
    assert loss == pytest.approx(float(np.mean(direct)), rel=1e-5)
    losses.append(loss)
  assert steps[0] is steps[1] and traces[1] == traces[0]  # none new
  assert losses[0] != losses[1]  # two models, not one seen twice


def expect_error(capsys, argv, match):
  line = error_line(run_finetuning.main, argv, capsys)
  assert re.search(match, line), line


def test_user_errors_are_one_clear_line(pretrained, capsys, tmp_path):
  base = ["--data-dir", pretrained, "--model-name", "pre"]
  expect_error(capsys, base + ["--task-names", "nope"], r"unknown task 'nope'")
  expect_error(capsys, ["--data-dir", pretrained, "--model-name", "missing",
                        "--task-names", "rte"], r"no checkpoint found")
  small_vocab = tmp_path / "vocab.txt"
  small_vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n")
  expect_error(capsys, base + ["--task-names", "rte", "--vocab-file",
                               str(small_vocab)],
               r"has 6 entries but the pretrained model has 30522")
  expect_error(capsys, base + ["--task-names", "rte", "--max-seq-length",
                               "1024"], r"exceeds the model's 512 positions")
  expect_error(capsys, base + ["--task-names", "qnli"],
               r"qnli.*train.tsv not found \(GLUE files go in")


MIRRORED_FINETUNING = """
import sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import run_finetuning
run_finetuning.main(sys.argv[1:])
"""


def test_mirrored_strategy_matches_one_device(pretrained, tmp_path):
  """Fine-tuning on two replicas (each half of the global batch, gradients
  summed, clipped once) ends as on one device: same dev metrics and
  weights. Without dropout, so that nothing is drawn per replica."""
  run_pretraining.main([
      "--data-dir", pretrained, "--model-name", "nodrop", "--hparams",
      hparams(num_train_steps=2, model_hparam_overrides=dict(
          MICRO["model_hparam_overrides"], attention_probs_dropout_prob=0.0,
          hidden_dropout_prob=0.0))])
  settings = json.dumps(dict(QUICK, hidden_dropout_prob=0.0, clip_norm=0.5))

  def run(strategy):
    out = tmp_path / strategy
    result = subprocess.run(
        [sys.executable, "-c", MIRRORED_FINETUNING, "--data-dir", pretrained,
         "--model-name", "nodrop", "--task-names", "rte,sts",
         "--output-dir", str(out), "--strategy", strategy,
         "--hparams", settings], capture_output=True, text=True, cwd=ROOT,
        timeout=600, env=dict(os.environ, PYTHONPATH=ROOT,
                              TF_DETERMINISTIC_OPS="1"))
    assert result.returncode == 0, result.stderr[-3000:]
    [path] = out.glob("results_rte_sts_*.json")
    summary = json.loads(path.read_text())["summary"]
    return (result.stdout, summary,
            finetuned_files.load(str(out / "rte_sts_model")))

  log1, one, one_model = run("default")
  log2, two, two_model = run("mirrored")
  assert "(2 replicas; " in log2 and "replicas" not in log1
  # (The printed losses are not compared: lines also come by the clock.)
  # STS-B's Pearson is of predictions that barely vary after these few
  # steps: weights equal to 1e-8 (checked below) move it by ~1e-2 (x100).
  for task, metric, tolerance in (("rte", "accuracy", 1e-4),
                                  ("rte", "loss", 1e-4),
                                  ("sts", "pearson", 5e-2),
                                  ("sts", "loss", 1e-4)):
    assert two[task][metric]["values"] == pytest.approx(
        one[task][metric]["values"], rel=1e-4, abs=tolerance), (
            task, metric, two[task][metric]["values"],
            one[task][metric]["values"])
  (enc1, heads1), (enc2, heads2) = one_model.weights(), two_model.weights()
  moved = 0
  for name in enc1:
    np.testing.assert_allclose(enc2[name], enc1[name], rtol=1e-4, atol=1e-5,
                               err_msg=name)
  for task in heads1:
    for name in heads1[task]:
      np.testing.assert_allclose(heads2[task][name], heads1[task][name],
                                 rtol=1e-4, atol=1e-5, err_msg=name)
      moved += 1
  assert moved
