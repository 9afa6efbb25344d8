"""What a new user meets before fine-tuning trains: defaults that follow
the model being fine-tuned, the data layouts accepted (GLUE's own folder
names, CoNLL-2000 as distributed) and errors said before TensorFlow
loads."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

import run_finetuning
from configure_finetuning import FinetuningConfig
from configure_pretraining import PretrainingConfig
from finetune import data_layout
from finetune import preflight
from finetune import task_builder
from finetune.config import model_size_of
from model.config import MODEL_PRESETS
from tests.shared_data import SHARED
from tests.slot_data import slot_env
from tests.tiny_runs import MICRO
from tests.tiny_runs import tiny_run
from util.errors import UserError

ROOT = pathlib.Path(__file__).resolve().parents[1]
GLUE = os.path.join(SHARED, "glue")
QUICK = {"train_examples_limit": 16, "eval_examples_limit": 16,
         "num_train_epochs": 1.0, "train_batch_size": 16,
         "eval_batch_size": 16, "max_seq_length": 32}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  """A tiny run "tiny" and one whose config says small ("small"), both
  of MICRO's shapes; no finetuning_data/ (the tests name their own)."""
  root = tmp_path_factory.mktemp("setup")
  tiny_run(root, name="tiny")
  tiny_run(root, name="small", size="small")
  return root


def _finetune(data, model, capsys, *flags, tasks="rte", raw=GLUE):
  out_dir = data / "out" / model / "_".join(flags).replace("-", "")
  run_finetuning.main([
      "--data-dir", str(data), "--model-name", model, "--task-names", tasks,
      "--raw-data-dir", str(raw), "--output-dir", str(out_dir),
      "--hparams", json.dumps(QUICK), *flags])
  out = capsys.readouterr().out
  with open(out_dir / f"{tasks}_model" / "finetuned_model.json") as f:
    recorded = json.load(f)["finetuning_config"]
  return out, recorded


# ------------------------------------------------- defaults by model size
@pytest.mark.parametrize("model, lr", [("tiny", 1e-3), ("small", 3e-4)])
def test_defaults_follow_the_checkpoint_and_are_recorded(data, capsys, model,
                                                         lr):
  # RTE from GLUE's own folder (RTE/) through --raw-data-dir.
  out, recorded = _finetune(data, model, capsys)
  assert f"({model} model: lr {lr:g}, layer-wise decay 0.8," in out, out
  assert (recorded["model_size"], recorded["learning_rate"],
          recorded["layerwise_lr_decay"]) == (model, lr, 0.8)


def test_a_given_value_still_wins(data, capsys):
  out, recorded = _finetune(data, "tiny", capsys, "--model-size", "large",
                            "--learning-rate", "0.002")
  assert "(large model: lr 0.002, layer-wise decay 0.9," in out, out
  assert (recorded["model_size"], recorded["learning_rate"],
          recorded["layerwise_lr_decay"]) == ("large", 0.002, 0.9)


def test_the_size_is_the_architectures():
  # An import (transformers, TF1) says "base" with its sizes as overrides.
  for size, preset in MODEL_PRESETS.items():
    imported = PretrainingConfig(model_size="base", vocab_size=100,
                                 model_hparam_overrides=dict(preset))
    assert model_size_of(imported) == size
  for size in ("tiny", "small"):  # shapes of no preset: the run's own size
    assert model_size_of(PretrainingConfig(
        model_size=size, vocab_size=100,
        model_hparam_overrides=dict(MICRO))) == size


def test_the_command_line_leaves_model_defaults_unset():
  config = run_finetuning.configure_finetuning.load_config(
      ["--data-dir", str(ROOT), "--task-names", "rte"])
  assert (config.model_size, config.learning_rate,
          config.layerwise_lr_decay) == ("", None, None)
  config.validate("tiny")
  assert (config.model_size, config.learning_rate) == ("tiny", 1e-3)


# ------------------------------------------------------------- data layout
def test_every_task_has_a_layout_and_its_registered_name():
  for name in task_builder.task_names():
    cls = task_builder._task_class(name)  # pylint: disable=protected-access
    assert cls.name == name
    assert data_layout.has_layout(name), name


def _touch(root, *paths):
  for p in paths:
    path = root / p
    if p.endswith("/"):
      path.mkdir(parents=True, exist_ok=True)
    else:
      path.parent.mkdir(parents=True, exist_ok=True)
      path.write_text("x\n")


@pytest.mark.parametrize("task, files, dev", [
    ("rte", ["RTE/train.tsv", "RTE/dev.tsv"], "RTE/dev.tsv"),
    ("sst", ["sst/train.tsv", "sst/dev.tsv", "SST-2/dev.tsv"], "sst/dev.tsv"),
    ("mnli", ["MNLI/train.tsv", "MNLI/dev_matched.tsv",
              "MNLI/dev_mismatched.tsv"], "MNLI/dev_matched.tsv"),
    ("squadv1", ["squadv1/train-v1.1.json", "squadv1/dev-v1.1.json"],
     "squadv1/dev-v1.1.json"),
    ("squad", ["squad/train.json", "squad/dev.json"], "squad/dev.json"),
    ("chunk", ["chunk/train.txt", "chunk/test.txt"], "chunk/test.txt"),
    ("chunk", ["chunk/train.txt", "chunk/dev.txt", "chunk/test.txt"],
     "chunk/dev.txt"),
    ("pos", ["pos/train.txt", "pos/dev.txt"], "pos/dev.txt"),
    ("swag", ["swag/train.csv", "swag/val.csv"], "swag/val.csv"),
    ("copa", ["COPA/train.jsonl", "COPA/val.jsonl"], "COPA/val.jsonl"),
    ("race", ["RACE/train/", "RACE/dev/"], "RACE/dev"),
    ("race", ["race/RACE/train/", "race/RACE/dev/"], "race/RACE/dev"),
])
def test_accepted_layouts(tmp_path, task, files, dev):
  _touch(tmp_path, *files)
  config = FinetuningConfig(task_names=task, raw_data_dir=str(tmp_path))
  data_layout.check_files(config)  # no error: every file is there
  stem = data_layout.split_files(task, "dev")[0]  # MNLI: dev_matched
  assert data_layout.require(str(tmp_path), task, stem) == str(tmp_path / dev)


@pytest.mark.parametrize("task, files, message", [
    ("pos", ["pos/train.txt", "pos/test.txt"],  # test.txt is chunk's dev only
     r"pos: \S+/pos/dev.txt not found \(POS files go in"),
    ("mnli", ["MNLI/train.tsv", "MNLI/dev_matched.tsv"],
     r"mnli: \S+/mnli/dev_mismatched.tsv not found \(GLUE files go in the "
     r"data folder's mnli/ or MNLI/; data folder: --raw-data-dir"),
    ("chunk", ["chunk/test.txt"],
     r"chunk: \S+/chunk/train.txt not found \(CoNLL-2000 goes in the data "
     r"folder's chunk/: train.txt and dev.txt, or train.txt and test.txt as "
     r"distributed"),
])
def test_a_missing_file_names_the_layout(tmp_path, task, files, message):
  _touch(tmp_path, *files)
  config = FinetuningConfig(task_names=task, raw_data_dir=str(tmp_path))
  with pytest.raises(UserError, match=message):
    data_layout.check_files(config)


def test_conll2000_as_distributed_trains_with_test_as_dev(data, tmp_path,
                                                          capsys):
  chunk = tmp_path / "chunk"
  chunk.mkdir()
  for name in ("train.txt", "test.txt"):  # what CoNLL-2000 ships
    text = pathlib.Path(SHARED, "chunk", name).read_text()
    (chunk / name).write_text("\n\n".join(text.split("\n\n")[:24]) + "\n")
  out, _ = _finetune(data, "tiny", capsys, tasks="chunk", raw=tmp_path)
  notes = [l for l in out.splitlines() if "test.txt is the dev set" in l]
  assert notes == [f"chunk: no dev.txt in {chunk}: its test.txt is the dev "
                   "set (CoNLL-2000 as distributed; ELECTRA reports test "
                   "F1)"], out
  assert "chunk    f1" in out, out


# ------------------------------------------ errors before TensorFlow loads
def _run_without_tensorflow(tmp_path, *argv):
  """run_finetuning.py in a fresh process where `import tensorflow`
  raises: an error said before TensorFlow loads still comes whole."""
  return subprocess.run([sys.executable, "run_finetuning.py", *map(str, argv)],
                        cwd=ROOT, env=slot_env(str(tmp_path)),
                        capture_output=True, text=True,
                        timeout=120, check=False)


@pytest.mark.parametrize("flags, message", [
    (["--model-name", "nope", "--task-names", "rte"],
     "error: no checkpoint found at {data}/models/nope (train one with "
     "run_pretraining.py, or pass --init-checkpoint)"),
    (["--model-name", "tiny", "--task-names", "rte,nope"],
     "error: unknown task 'nope' (choose from chunk, cola, copa, mnli, mrpc, "
     "pos, qnli, qqp, race, rte, squad, squadv1, sst, sts, swag, wnli)"),
    (["--model-name", "tiny", "--task-names", "rte"],
     "error: rte: {data}/finetuning_data/rte/train.tsv not found (GLUE files "
     "go in the data folder's rte/ or RTE/; data folder: --raw-data-dir, "
     "default DATA_DIR/finetuning_data)"),
    (["--model-name", "tiny", "--task-names", "chunk", "--raw-data-dir",
      "{empty}"],
     "error: chunk: {empty}/chunk/train.txt not found (CoNLL-2000 goes in "
     "the data folder's chunk/: train.txt and dev.txt, or train.txt and "
     "test.txt as distributed; data folder: --raw-data-dir, default "
     "DATA_DIR/finetuning_data)"),
    (["--model-name", "tiny", "--task-names", "sst", "--do-predict",
      "--predict-file", "{predict}"],
     "error: no fine-tuned model at {data}/models/tiny/finetuning/sst_model: "
     "fine-tune sst first (keep_model best or last), or pass "
     "--init-checkpoint a fine-tuned model's folder"),
])
def test_errors_come_before_tensorflow_loads(data, tmp_path, flags, message):
  (tmp_path / "empty").mkdir()
  (tmp_path / "predict.tsv").write_text("sentence\nfine\n")
  values = dict(data=data, empty=tmp_path / "empty",
                predict=tmp_path / "predict.tsv")
  run = _run_without_tensorflow(
      tmp_path, "--data-dir", data, *[f.format(**values) for f in flags])
  assert (run.returncode, run.stderr) == (2, message.format(**values) + "\n")


def test_a_good_command_gets_to_tensorflow(data, tmp_path):
  # The control: past the checks, the blocked import is what stops it.
  run = _run_without_tensorflow(tmp_path, "--data-dir", data, "--model-name",
                                "tiny", "--task-names", "rte,sst",
                                "--raw-data-dir", GLUE)
  assert run.returncode != 0 and "tensorflow is blocked" in run.stderr, (
      run.stderr)
  config = run_finetuning.configure_finetuning.load_config(
      ["--data-dir", str(data), "--model-name", "tiny", "--task-names",
       "rte,sst", "--raw-data-dir", GLUE])
  preflight.check(config)  # the same checks, passed in-process


@pytest.mark.parametrize("script", ["run_scoring.py", "export_model.py"])
def test_a_wrong_model_name_is_said_before_tensorflow_loads(data, tmp_path,
                                                            script):
  where = (["--output-dir", tmp_path / "out"] if script == "export_model.py"
           else [])  # scoring reads the sentences from stdin first
  run = subprocess.run(
      [sys.executable, script, "--data-dir", data, "--model-name", "nope",
       *where], input="the cat sat\n", cwd=ROOT, env=slot_env(str(tmp_path)),
      capture_output=True, text=True, timeout=120, check=False)
  assert (run.returncode, run.stderr) == (
      2, f"error: no checkpoint found at {data}/models/nope (train one with "
      "run_pretraining.py, or pass --init-checkpoint)\n")
