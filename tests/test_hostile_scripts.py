"""Hostile inputs to run_finetuning.py, run_scoring.py and export_model.py
(run_pretraining.py's and run_comparison.py's: test_hostile_runs.py).

As a new user or a scraper would feed them: files in other encodings or
binary, NUL bytes, empty and header-only files, huge fields, wrong layouts,
JSON that is not what it should be, damaged model directories, output
paths that are files, folders, symlink loops or already taken, flags that
contradict each other, and writes that fail half way. Every case must end
with exit status 2 and exactly one `error:` line on stderr, no traceback,
and every file that existed before byte-identical afterwards.

One tiny random model (tests/tiny_runs.py's save_run) serves every case;
most cases fail before any model work and run in-process. Subprocesses only
where the process boundary matters (binary stdin, tracebacks).
"""

import errno
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

import export_model
import run_finetuning
import run_scoring
from tests.script_checks import refused
from tests.script_checks import snapshot
from tests.shared_data import SHARED
from tests.tiny_runs import save_run

REPO = pathlib.Path(__file__).resolve().parents[1]
RTE = pathlib.Path(SHARED) / "glue" / "RTE"
QUICK = json.dumps({"train_examples_limit": 4, "eval_examples_limit": 4,
                    "num_train_epochs": 1.0, "train_batch_size": 2,
                    "eval_batch_size": 2, "max_seq_length": 16,
                    "log_every_steps": 1})


@pytest.fixture(scope="module")
def world(tmp_path_factory):
  """data/: a tiny ELECTRA run "m" and a finetuning_data/rte/ slice."""
  root = tmp_path_factory.mktemp("hostile_scripts")
  data = root / "data"
  data.mkdir()
  save_run(str(data), "electra", name="m")
  rte = data / "finetuning_data" / "rte"
  rte.mkdir(parents=True)
  for split in ("train", "dev"):
    lines = (RTE / f"{split}.tsv").read_bytes().splitlines(keepends=True)
    (rte / f"{split}.tsv").write_bytes(b"".join(lines[:9]))
  return root


def _glue_lines():
  return (RTE / "train.tsv").read_bytes().splitlines()[:9]


def _tsv(*replace):
  """The RTE slice with (line number, bytes) lines replaced."""
  lines = _glue_lines()
  for number, line in replace:
    lines[number - 1] = line
  return b"\n".join(lines) + b"\n"


def _copy_model(world, tmp_path, damage):
  """A copy of the run, damaged by damage(folder)."""
  copy = tmp_path / "model"
  shutil.copytree(world / "data" / "models" / "m", copy)
  damage(copy)
  return copy


def _truncate(name):
  def damage(folder):
    data = (folder / name).read_bytes()
    (folder / name).write_bytes(data[:len(data) // 2])
  return damage


def _write(name, data):
  def damage(folder):
    (folder / name).write_bytes(data)
  return damage


def _loop(tmp_path, *below):
  """A path through a symlink that points at itself."""
  os.symlink("loop", tmp_path / "loop")
  return str(tmp_path.joinpath("loop", *below))


def _file(tmp_path, name="notes.txt"):
  path = tmp_path / name
  path.write_text("the user's own file\n")
  return path


# ------------------------------------------------------------ fine-tuning
def _raw(tmp_path, train=None, task="rte", name="train.tsv"):
  """A finetuning_data/ folder with `train` as the task's train file."""
  folder = tmp_path / "raw" / task
  folder.mkdir(parents=True)
  if task == "rte":
    for split in ("train", "dev"):
      (folder / f"{split}.tsv").write_bytes(_tsv())
  if isinstance(train, bytes):
    (folder / name).write_bytes(train)
    if name == "train.json":  # SQuAD's dev must be there too (read after)
      (folder / "dev.json").write_bytes(train)
  elif train == "folder":
    (folder / name).unlink(missing_ok=True)
    (folder / name).mkdir()
  return str(tmp_path / "raw")


def _ft(world, tmp_path, *extra, raw=None, out=None, task="rte"):
  argv = ["--data-dir", str(world / "data"), "--model-name", "m",
          "--task-names", task, "--hparams", QUICK,
          "--output-dir", str(out or tmp_path / "out")]
  if raw:
    argv += ["--raw-data-dir", raw]
  return argv + [str(x) for x in extra]


FINETUNING = {}  # name -> (argv maker, the error line's pattern)


def case(table, match):
  """Registers fn(world, tmp_path) -> argv under its name in `table`."""
  def register(fn):
    table[fn.__name__] = (fn, match)
    return fn
  return register


@case(FINETUNING, r"rte/train.tsv line 3: not UTF-8 text \(byte 0xe9\)")
def latin1_tsv(w, t):  # 0xE9: "é" in Latin-1
  return _ft(w, t, raw=_raw(t, _tsv((3, b"3\tCaf\xe9 owners\tx\tentailment"))))


@case(FINETUNING, r"train.tsv line \d+: not UTF-8 text")
def binary_tsv(w, t):
  return _ft(w, t, raw=_raw(t, np.random.RandomState(0).bytes(4000)))


@case(FINETUNING, r"train.tsv line 4: binary data \(a NUL byte\)")
def nul_in_tsv(w, t):
  return _ft(w, t, raw=_raw(t, _tsv((4, b"4\ta\x00b\tc\tentailment"))))


@case(FINETUNING, r"train.tsv is empty")
def empty_tsv(w, t):
  return _ft(w, t, raw=_raw(t, b""))


@case(FINETUNING, r"train.tsv has a header line but no examples")
def header_only_tsv(w, t):
  return _ft(w, t, raw=_raw(t, _glue_lines()[0] + b"\r\n\r\n"))


@case(FINETUNING, r"train.tsv line 5: unknown label 'maybe'")
def unknown_label(w, t):  # the header is line 1: this is line 5
  return _ft(w, t, raw=_raw(t, _tsv((5, b"5\ta\tb\tmaybe"))))


@case(FINETUNING, r"train.tsv line 6: 2 columns, expected at least 4")
def missing_columns(w, t):
  return _ft(w, t, raw=_raw(t, _tsv((6, b"6\tonly two"))))


@case(FINETUNING, r"train.tsv is a folder, not a file")
def tsv_is_a_folder(w, t):
  return _ft(w, t, raw=_raw(t, "folder"))


@case(FINETUNING, r"train.json is not usable JSON")
def squad_deeply_nested(w, t):
  return _ft(w, t, "--max-query-length", 4, task="squad", raw=_raw(
      t, b"[" * 100_000, task="squad", name="train.json"))


@case(FINETUNING, r"output_dir .*notes.txt is a file, not a folder")
def output_dir_is_a_file(w, t):
  return _ft(w, t, out=_file(t))


@case(FINETUNING, r"notes.txt is a file, not a folder")
def output_dir_below_a_file(w, t):
  return _ft(w, t, out=_file(t) / "out")


@case(FINETUNING, r"loop is a broken symlink or a symlink loop")
def output_dir_symlink_loop(w, t):
  return _ft(w, t, out=_loop(t, "out"))


@case(FINETUNING, r"rte_dev_predictions_trial1.tsv already exists: pass "
                  r"--overwrite")
def predictions_exist(w, t):
  return _ft(w, t, out=_taken(t, "rte_dev_predictions_trial1.tsv"))


@case(FINETUNING, r"--hparams is JSON but not an object: \[1, 2\]")
def hparams_a_list(w, t):
  return _ft(w, t, "--hparams", "[1, 2]")


@case(FINETUNING, r"--hparams file .*blob.json is not UTF-8 text")
def hparams_binary_file(w, t):
  return _ft(w, t, "--hparams", _text(t, b"\xff\xfe{\x00}\x00", "blob.json"))


@case(FINETUNING, r"task 'rte' is named twice")
def task_named_twice(w, t):
  return _ft(w, t, "--task-names", "rte,RTE")


@case(FINETUNING, r"pretrain_config.json is not valid JSON")
def config_not_json(w, t):
  return _ft(w, t, "--init-checkpoint", _copy_model(
      w, t, _write("pretrain_config.json", b"{oops")))


@case(FINETUNING, r"cannot restore checkpoint .*ckpt-1")
def checkpoint_truncated(w, t):
  return _ft(w, t, "--init-checkpoint", _copy_model(
      w, t, _truncate("ckpt-1.data-00000-of-00001")))


@case(FINETUNING, r"^error: init_checkpoint .*/gone does not exist$")
def init_checkpoint_missing(w, t):  # issue 54, 8: was "no checkpoint found"
  return _ft(w, t, "--init-checkpoint", t / "gone")


@case(FINETUNING, r"hparam 'max_seq_length' must be >= 5, got 2")
def max_seq_length_2(w, t):  # issue 41, 3.: was IndexError in featurization
  return _ft(w, t, "--max-seq-length", 2)


@case(FINETUNING, r"hparam 'learning_rate' must be a finite number, got nan")
def learning_rate_nan(w, t):  # was: failed at step 2, minutes later
  return _ft(w, t, "--learning-rate", "nan")


@case(FINETUNING, r"hparam 'num_train_epochs' must be > 0, got -1")
def negative_epochs(w, t):  # was: exit 0 with metrics
  return _ft(w, t, "--num-train-epochs=-1")


@case(FINETUNING, r"--hparams names 'train_batch_size' twice \(2, then 4\)")
def hparams_key_twice(w, t):
  return _ft(w, t, "--hparams", '{"train_batch_size": 2, '
             '"train_batch_size": 4}')


def _squad(context, answer_start, text="the cat"):
  return json.dumps({"version": "v2.0", "data": [{"paragraphs": [{
      "context": context, "qas": [{
          "id": "q1", "question": "who sat?", "is_impossible": False,
          "answers": [{"text": text, "answer_start": answer_start}]}]}]}]}
                    ).encode()


@case(FINETUNING, r"squad/train.json: article 0 paragraph 0 question 0: "
                  r"answer_start 5000 \(of 'the cat'\) lies outside its "
                  r"context of 64 characters")
def squad_answer_outside_context(w, t):  # issue 41, 7.
  return _ft(w, t, "--max-query-length", 4, task="squad", raw=_raw(
      t, _squad("the cat sat on the mat and looked at the dog in the garden "
                "now!!", 5000), task="squad", name="train.json"))


@case(FINETUNING, r"squad/train.json: article 0 paragraph 0 has an empty "
                  r"\"context\" \(and 1 question\(s\) about it\)")
def squad_empty_context(w, t):
  return _ft(w, t, "--max-query-length", 4, task="squad", raw=_raw(
      t, _squad(" ", 0, "x"), task="squad", name="train.json"))


@case(FINETUNING, r"model/checkpoint names ckpt-99, which is not there, but "
                  r".*/model holds ckpt-1")
def index_names_a_missing_checkpoint(w, t):
  return _ft(w, t, "--init-checkpoint", _copy_model(
      w, t, _write("checkpoint", b'model_checkpoint_path: "ckpt-99"\n')))


def _taken(tmp_path, name="notes.txt"):
  """A folder holding a file of the user's."""
  folder = tmp_path / "taken"
  folder.mkdir()
  _file(folder, name)
  return folder


@pytest.mark.parametrize("name", sorted(FINETUNING))
def test_finetuning_refuses(world, tmp_path, capsys, name):
  make_argv, match = FINETUNING[name]
  argv = make_argv(world, tmp_path)
  out, _ = refused(run_finetuning.main, argv, match, capsys,
                   [world, tmp_path])
  assert "step 1/" not in out  # refused before any training


def test_finetuning_refuses_an_unwritable_output_dir(world, tmp_path,
                                                     capsys, monkeypatch):
  """Permissions do not stop root (as tests here run), so the check is
  faked: the folder reads as not writable."""
  locked = tmp_path / "locked"
  locked.mkdir()
  real_access = os.access
  monkeypatch.setattr(os, "access", lambda path, mode: (
      False if os.path.abspath(path) == str(locked) else
      real_access(path, mode)))
  refused(run_finetuning.main, _ft(world, tmp_path, out=str(locked / "out")),
          r"cannot write to output_dir", capsys, [world, tmp_path])


def test_huge_tsv_field_is_read_and_truncated(world, tmp_path):
  """A field longer than csv's 131,072-character limit is text like any
  other: read, then cut to max_seq_length by featurization."""
  from configure_finetuning import FinetuningConfig
  from finetune.classification.classification_tasks import RTE as Task
  from util.tokenization import load_tokenizer
  huge = b"the cat sat on the mat " * 8000  # 184,000 characters
  raw = _raw(tmp_path, _tsv((2, b"1\t" + huge + b"\tshort\tentailment")))
  config = FinetuningConfig(raw_data_dir=raw, output_dir=str(tmp_path),
                            max_seq_length=16)
  task = Task(config, load_tokenizer(str(world / "data" / "vocab.txt")))
  examples = task.get_examples("train")
  assert len(examples) == 8 and len(examples[0].text_a) == len(huge)
  features = task.featurize(examples, is_training=True)
  assert features["input_ids"].shape == (8, 16)
  assert features["input_mask"][0].sum() == 16


def test_finetuning_outputs_and_an_interrupted_write(world, tmp_path,
                                                     capsys, monkeypatch):
  """Prediction files carry their extension (.tsv here, .json for SQuAD);
  a write that fails (disk full) after training ends as one error line,
  and the file it was replacing (--overwrite) is still whole."""
  out = tmp_path / "out"
  out.mkdir()
  mine = _file(out, "rte_dev_predictions_trial1.tsv")
  real_replace = os.replace

  def disk_full(src, dst):
    if str(dst).endswith(".tsv"):
      raise OSError(errno.ENOSPC, "No space left on device")
    return real_replace(src, dst)

  monkeypatch.setattr(os, "replace", disk_full)
  stdout, _ = refused(
      run_finetuning.main, _ft(world, tmp_path, "--overwrite"),
      r"cannot write .*rte_dev_predictions_trial1.tsv: No space left on "
      r"device", capsys, [world, tmp_path])
  assert "step 2/2" in stdout  # it did train, then failed to write
  assert mine.read_text() == "the user's own file\n"
  monkeypatch.undo()
  # Planned names: one per trial, task and split, with the extension.
  from configure_finetuning import FinetuningConfig
  from finetune.trainer import FinetuningRunner
  config = FinetuningConfig(
      data_dir=str(world / "data"), model_name="m", task_names="rte",
      output_dir=str(out), overwrite=True, write_test_outputs=True,
      num_trials=2)
  names = [os.path.basename(p) for p in
           FinetuningRunner(config).outputs.planned()]
  assert names == ["rte_dev_predictions_trial1.tsv",
                   "rte_test_predictions_trial1.tsv",
                   "rte_dev_predictions_trial2.tsv",
                   "rte_test_predictions_trial2.tsv"]
  from finetune.qa.qa_scorer import prediction_files
  assert prediction_files("d/squad_dev_predictions_trial0.json", True) == [
      "d/squad_dev_predictions_trial0.json",
      "d/squad_dev_predictions_trial0_nbest.json",
      "d/squad_dev_predictions_trial0_null_odds.json"]


def test_a_full_disk_while_keeping_a_model_loses_nothing(world, tmp_path,
                                                         capsys, monkeypatch):
  """Issue 65, 7: safetensors' own error for a full disk, met keeping
  trial 2's model, is one line; trial 1's model, the record and every
  file there at that moment are byte-identical, nothing half-written."""
  from safetensors import SafetensorError  # pylint: disable=g-import-not-at-top
  from loading import finetuned  # pylint: disable=g-import-not-at-top
  out = tmp_path / "out"
  real_save, calls, at_fault = finetuned.safetensors_np.save_file, [], {}

  def save_file(tensors, path):
    calls.append(path)
    if len(calls) == 2:
      at_fault.update(snapshot(out))
      raise SafetensorError("Error while serializing: I/O error: No space "
                            "left on device (os error 28)")
    return real_save(tensors, path)
  monkeypatch.setattr(finetuned.safetensors_np, "save_file", save_file)
  refused(run_finetuning.main, _ft(world, tmp_path, "--num-trials", "2",
                                   "--keep-model", "last"),
          rf"^error: cannot write {out}/rte_model: No space left on device$",
          capsys, [world])
  assert at_fault and snapshot(out) == at_fault
  record = json.loads((out / "rte_trials.json").read_text())
  assert len(record["trials"]) == 1 and record["kept"]["trial"] == 1


def test_a_second_finetuning_of_a_task_in_one_folder_is_refused(
    world, tmp_path, capsys):
  """Issue 65, 8: the task's lock in the output folder (TrialRecord's, for
  both backends), held here by another open file as a running run holds
  it, refuses a second run in one line, nothing written; released (each
  run releases it when it ends), the same command runs, and again."""
  from pretrain import run_dir  # pylint: disable=g-import-not-at-top
  out = tmp_path / "out"
  out.mkdir()
  lock = run_dir.RunLock(str(out), "rte_finetuning.lock")
  try:
    refused(run_finetuning.main, _ft(world, tmp_path),
            rf"^error: {out} is in use by another fine-tuning run of rte "
            rf"\(pid {os.getpid()} on .*, started .*\): wait for it to end, "
            r"or use another --output-dir$", capsys, [world, tmp_path])
    assert os.listdir(out) == ["rte_finetuning.lock"]
  finally:
    lock.release()
  run_finetuning.main(_ft(world, tmp_path))
  run_finetuning.main(_ft(world, tmp_path))
  assert "1 of 1 trial(s) done earlier" in capsys.readouterr().out


# ---------------------------------------------- a fine-tuned model's use
@pytest.fixture(scope="module")
def finetuned(world):
  """world/ft/rte_model: the model an RTE run of the tiny model kept."""
  run_finetuning.main(_ft(world, None, out=world / "ft"))
  return world / "ft" / "rte_model"


def _kept(world):
  return world / "ft" / "rte_model"


def _predict(world, tmp_path, data=None, *extra, task="rte", model=None):
  """--do-predict of `data` (bytes; default the RTE slice) with the kept
  RTE model (or `model`)."""
  path = tmp_path / "predict.tsv"
  path.write_bytes(_tsv() if data is None else data)
  return _ft(world, tmp_path, "--do-predict", "--predict-file", path,
             "--init-checkpoint", model or _kept(world), *extra, task=task)


def _labels(*labels):
  def damage(folder):
    path = folder / "finetuned_model.json"
    record = json.loads(path.read_text())
    record["tasks"]["rte"]["labels"] = list(labels)
    path.write_text(json.dumps(record))
  return damage


def _copy_kept(world, tmp_path, damage):
  copy = tmp_path / "kept"
  shutil.copytree(_kept(world), copy)
  damage(copy)
  return copy


FINETUNED = {}  # name -> (argv maker, the error line's pattern)


@case(FINETUNED, r"rte_model holds no sst head \(it has: rte\): a "
                 r"fine-tuned model of another task set")
def predict_with_another_task_set(w, t):
  return _predict(w, t, task="sst")


@case(FINETUNED, r"kept: its rte head predicts labels \(no, yes\), but rte "
                 r"here has \(entailment, not_entailment\)")
def head_labels_differ(w, t):  # fine-tuning from it
  return _ft(w, t, "--init-checkpoint", _copy_kept(w, t, _labels("no", "yes")))


@case(FINETUNED, r"kept: its rte head predicts labels \(no, yes\)")
def predict_head_labels_differ(w, t):
  return _predict(w, t, model=_copy_kept(w, t, _labels("no", "yes")))


@case(FINETUNED, r"predict.tsv: no 'sentence1' column \(header: sentence, "
                 r"label\)")
def predict_wrong_layout(w, t):  # an SST-2 file given to RTE
  return _predict(w, t, b"sentence\tlabel\na fine film\t1\n")


@case(FINETUNED, r"predict.tsv line 5: unknown label 'maybe' \(expected one "
                 r"of entailment, not_entailment\)")
def predict_unknown_label(w, t):
  return _predict(w, t, _tsv((5, b"5\ta\tb\tmaybe")))


@case(FINETUNED, r"predict.tsv line 3: not UTF-8 text")
def predict_latin1(w, t):
  return _predict(w, t, _tsv((3, b"3\tCaf\xe9\tx\tentailment")))


@case(FINETUNED, r"predict_file .*nowhere.tsv not found")
def predict_file_missing(w, t):
  return _ft(w, t, "--do-predict", "--predict-file", t / "nowhere.tsv",
             "--init-checkpoint", _kept(w))


@case(FINETUNED, r"--do-predict needs --predict-file")
def predict_without_a_file(w, t):
  return _ft(w, t, "--do-predict", "--init-checkpoint", _kept(w))


@case(FINETUNED, r"predict_output .*notes.txt already exists: pass "
                 r"--overwrite")
def predict_output_exists(w, t):
  return _predict(w, t, None, "--predict-output", _file(t))


@case(FINETUNED, r"/model is not a fine-tuned model \(no "
                 r"finetuned_model.json\)")
def predict_with_a_pretraining_run(w, t):
  return _predict(w, t, model=_copy_model(w, t, lambda folder: None))


@case(FINETUNED, r"finetuned_model.json is not valid JSON")
def finetuned_json_truncated(w, t):
  return _predict(w, t, model=_copy_kept(w, t, _truncate(
      "finetuned_model.json")))


@case(FINETUNED, r"cannot read .*kept/model.safetensors")
def finetuned_weights_truncated(w, t):
  return _predict(w, t, model=_copy_kept(w, t, _truncate(
      "model.safetensors")))


@case(FINETUNED, r"rte_model already exists: use another --output-dir")
def kept_model_folder_taken(w, t):  # the user's own folder of that name
  out = _taken(t)
  (out / "rte_model").mkdir()
  return _ft(w, t, out=out)


@case(FINETUNED, r"keep_model must be one of best, last, none")
def keep_model_unknown(w, t):
  return _ft(w, t, "--keep-model", "first")


@case(FINETUNED, r"qa_head must be one of electra, xlnet, linear, got 'bert'")
def qa_head_unknown(w, t):
  return _ft(w, t, "--hparams", '{"qa_head": "bert"}')


FINETUNED_EXPORT = {}


@case(FINETUNED_EXPORT, r"a fine-tuned model exports as hf or savedmodel, "
                        r"not keras")
def finetuned_as_keras(w, t):
  return _ex(w, t, "--init-checkpoint", _kept(w), "--format", "keras")


@case(FINETUNED_EXPORT, r"rte_model holds no sst head \(it has: rte\)")
def finetuned_other_task(w, t):
  return _ex(w, t, "--init-checkpoint", _kept(w), "--task-names", "sst")


@case(FINETUNED_EXPORT, r"--task-names applies to a fine-tuned model only")
def task_names_of_a_pretraining_run(w, t):
  return _ex(w, t, "--task-names", "rte")


@pytest.mark.parametrize("name", sorted(FINETUNED))
def test_finetuned_model_refuses(world, finetuned, tmp_path, capsys, name):
  make_argv, match = FINETUNED[name]
  out, _ = refused(run_finetuning.main, make_argv(world, tmp_path), match,
                   capsys, [world, tmp_path])
  assert "step 1/" not in out and "wrote" not in out


@pytest.mark.parametrize("name", sorted(FINETUNED_EXPORT))
def test_finetuned_export_refuses(world, finetuned, tmp_path, capsys, name):
  make_argv, match = FINETUNED_EXPORT[name]
  refused(export_model.main, make_argv(world, tmp_path), match, capsys,
          [world, tmp_path])
  assert not (tmp_path / "export").exists()


# ---------------------------------------------------------------- scoring
def _sc(world, *extra):
  return ["--data-dir", str(world / "data"), "--model-name", "m",
          *[str(x) for x in extra]]


def _text(tmp_path, data=b"the cat sat on the mat\na big dog ran\n",
          name="in.txt"):
  path = tmp_path / name
  path.write_bytes(data)
  return path


def _blimp(tmp_path, data):
  folder = tmp_path / "blimp"
  folder.mkdir()
  (folder / "a.jsonl").write_bytes(data)
  return folder


def _fifo(tmp_path):
  path = tmp_path / "pipe.txt"
  os.mkfifo(path)  # opening it to read would wait for a writer forever
  return path


SCORING = {}


@case(SCORING, r"in.txt line 2: not UTF-8 text \(byte 0xe9\)")
def latin1_input(w, t):
  return _sc(w, "--input-file", _text(t, b"the cat\nle caf\xe9 est ouvert\n"))


@case(SCORING, r"^error: init_checkpoint .*/gone does not exist$")
def init_checkpoint_missing_scoring(w, t):  # issue 54, 8
  return _sc(w, "--input-file", _text(t), "--init-checkpoint", t / "gone")


@case(SCORING, r"in.txt line 1: binary data")
def nul_in_input(w, t):
  return _sc(w, "--input-file", _text(t, b"the cat\x00sat\n"))


@case(SCORING, r"no sentences in .*in.txt")
def empty_input(w, t):
  return _sc(w, "--input-file", _text(t, b""))


@case(SCORING, r"input_file .*pipe.txt is not a regular file")
def input_is_a_fifo(w, t):
  return _sc(w, "--input-file", _fifo(t))


@case(SCORING, r"input_file .* is a folder, not a file")
def input_is_a_folder(w, t):
  return _sc(w, "--input-file", t)


@case(SCORING, r"output_file .*notes.txt already exists: pass --overwrite")
def output_exists(w, t):
  return _sc(w, "--input-file", _text(t), "--output-file", _file(t))


@case(SCORING, r"output_file .* is a folder, not a file")
def output_is_a_folder(w, t):
  return _sc(w, "--input-file", _text(t), "--output-file", t)


@case(SCORING, r"output_file .*in.txt is the input_file")
def output_is_the_input(w, t):
  return _sc(w, "--input-file", _text(t), "--output-file", _text(t),
             "--overwrite")


@case(SCORING, r"loop is a broken symlink or a symlink loop")
def output_in_symlink_loop(w, t):
  return _sc(w, "--input-file", _text(t), "--output-file",
             _loop(t, "out.tsv"))


@case(SCORING, r"output_file: folder .*no does not exist")
def output_folder_missing(w, t):
  return _sc(w, "--input-file", _text(t), "--output-file",
             t / "no" / "out.tsv")


@case(SCORING, r"--results-file applies to --mode blimp or nbest, not "
               r"sentences")
def results_file_in_sentences_mode(w, t):
  return _sc(w, "--input-file", _text(t), "--results-file", t / "r.json")


@case(SCORING, r"--per-token applies to --mode sentences")
def per_token_in_blimp_mode(w, t):
  return _sc(w, "--mode", "blimp", "--blimp-dir", t, "--per-token")


@case(SCORING, r"a.jsonl line 1: not UTF-8 text")
def blimp_latin1(w, t):
  return _sc(w, "--mode", "blimp", "--blimp-dir",
             _blimp(t, b'{"sentence_good": "caf\xe9"}\n'))


@case(SCORING, r"a.jsonl:1: not usable JSON")
def blimp_deeply_nested(w, t):
  return _sc(w, "--mode", "blimp", "--blimp-dir", _blimp(t, b"[" * 100_000))


@case(SCORING, r"dev.json line 1: not UTF-8 text \(byte 0x89\)")
def nbest_binary(w, t):
  return _sc(w, "--mode", "nbest", "--nbest-dev",
             _text(t, b"\x89PNG\r\n\x1a\n\x00\x00", "dev.json"))


@case(SCORING, r"--hparams is JSON but not an object: \"hello\"")
def hparams_a_string(w, t):
  return _sc(w, "--input-file", _text(t), "--hparams", '"hello"')


@case(SCORING, r"checkpoint \(the list of checkpoints\) is damaged")
def checkpoint_list_damaged(w, t):
  return _sc(w, "--input-file", _text(t), "--init-checkpoint", _copy_model(
      w, t, _write("checkpoint", b"\xff\xfe garbage")))


@case(SCORING, r"no sentences in .*in.txt: its 3 line\(s\) are all blank")
def blank_input(w, t):  # issue 41, 8.: was three PLLs of 0.0
  return _sc(w, "--input-file", _text(t, b"  \n\t\n \r\n"))


@case(SCORING, r"hparam 'batch_size' must be > 0, got -3")
def negative_batch_size(w, t):
  return _sc(w, "--input-file", _text(t), "--batch-size=-3")


@case(SCORING, r"model/checkpoint, the list of checkpoints, is missing but "
               r".*/model holds ckpt-1")
def checkpoint_list_missing(w, t):
  def damage(folder):
    (folder / "checkpoint").unlink()
  return _sc(w, "--input-file", _text(t), "--init-checkpoint",
             _copy_model(w, t, damage))


@pytest.mark.parametrize("name", sorted(SCORING))
def test_scoring_refuses(world, tmp_path, capsys, name):
  make_argv, match = SCORING[name]
  refused(run_scoring.main, make_argv(world, tmp_path), match, capsys,
          [world, tmp_path])


def test_scoring_interrupted_write_keeps_the_old_output(world, tmp_path,
                                                        capsys, monkeypatch):
  """Scored, then the disk is full: the earlier output is left whole and
  no partial file is left beside it."""
  old = _file(tmp_path, "scores.tsv")

  def disk_full(src, dst):
    raise OSError(errno.ENOSPC, "No space left on device")

  monkeypatch.setattr(os, "replace", disk_full)
  argv = _sc(world, "--input-file", _text(tmp_path), "--output-file", old,
             "--overwrite", "--top-k", 8)
  refused(run_scoring.main, argv, r"cannot write .*scores.tsv: No space "
          r"left on device", capsys, [world, tmp_path])
  monkeypatch.undo()
  run_scoring.main(argv)
  assert [l.split("\t")[2] for l in old.read_text().splitlines()] == [
      "sentence", "the cat sat on the mat", "a big dog ran"]


def test_scoring_a_huge_line(world, tmp_path, capsys):
  """A 2 MB line without a newline is one sentence, cut to the model's
  length (and said to be), not a failure."""
  huge = _text(tmp_path, b"the cat sat on the mat " * 90_000 + b"\nshort",
               "huge.txt")
  results = run_scoring.main(_sc(world, "--input-file", huge, "--top-k", 8))
  out, err = capsys.readouterr()
  assert [r.truncated for r in results] == [True, False]
  assert len(results[0].token_ids) == 14  # max_seq_length 16 - 2
  assert "note: 1 sentences were truncated" in err
  assert len(out.splitlines()) == 3  # the header, a line per sentence


def _script(name, *argv, stdin=None):
  """The script in a fresh process under a UTF-8 locale."""
  env = dict(os.environ, LC_ALL="C.UTF-8", PYTHONIOENCODING="")
  return subprocess.run([sys.executable, str(REPO / name), *map(str, argv)],
                        input=stdin, capture_output=True, timeout=300,
                        cwd=str(REPO), env=env)


def test_cli_binary_stdin_and_one_line_errors(world, tmp_path):
  """Real processes: binary stdin under a UTF-8 locale is refused at once
  (Python's surrogateescape would have let it through) and the existing
  --output-file is kept; each script's error is one line."""
  old = _file(tmp_path, "scores.tsv")
  before = snapshot(world), snapshot(tmp_path)
  start = time.time()
  result = _script("run_scoring.py", *_sc(world, "--output-file", old,
                                          "--overwrite"),
                   stdin=np.random.RandomState(1).bytes(4000))
  assert time.time() - start < 60
  errs = {"run_scoring.py": result}
  errs["run_finetuning.py"] = _script("run_finetuning.py", *_ft(
      world, tmp_path, "--hparams", "42"))
  errs["export_model.py"] = _script("export_model.py", *_sc(
      world, "--output-dir", old))
  for name, result in errs.items():
    err = result.stderr.decode()
    assert result.returncode == 2, (name, err)
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith("error: "), err
    assert len([l for l in err.splitlines() if l.startswith("error:")]) == 1
  assert re.search(r"^error: stdin line \d+: not UTF-8 text",
                   errs["run_scoring.py"].stderr.decode(), re.M)
  assert "--hparams is JSON but not an object: 42" in errs[
      "run_finetuning.py"].stderr.decode()
  assert "is a file" in errs["export_model.py"].stderr.decode()
  assert (snapshot(world), snapshot(tmp_path)) == before


# ----------------------------------------------------------------- export
def _ex(world, tmp_path, *extra, out=None):
  return _sc(world, "--output-dir", out or tmp_path / "export", *extra)


def _hf_dir(tmp_path):
  folder = tmp_path / "hf"
  folder.mkdir()
  (folder / "config.json").write_text(json.dumps(
      {"model_type": "electra", "architectures": ["ElectraForPreTraining"],
       "vocab_size": 35}))
  (folder / "model.safetensors").write_bytes(b"\xff" * 64)
  return folder


def _config_with(**values):
  def damage(folder):
    path = folder / "pretrain_config.json"
    path.write_text(json.dumps(dict(json.loads(path.read_text()), **values)))
  return damage


EXPORT = {}


@case(EXPORT, r"output_dir .*notes.txt is a file")
def output_is_a_file(w, t):
  return _ex(w, t, out=_file(t))


@case(EXPORT, r"taken already exists and is not empty")
def output_not_empty(w, t):
  return _ex(w, t, out=_taken(t))


@case(EXPORT, r"output_dir .*notes.txt/a/b: .*notes.txt is a file, not a "
      "folder")
def output_parent_is_a_file(w, t):
  return _ex(w, t, out=_file(t) / "a" / "b")


@case(EXPORT, r"loop is a broken symlink or a symlink loop")
def export_output_in_symlink_loop(w, t):
  return _ex(w, t, out=_loop(t, "x"))


@case(EXPORT, r"notes.txt is a file, not a folder")
def output_below_a_file(w, t):
  return _ex(w, t, out=_file(t) / "x")


@case(EXPORT, r"--max-seq-length applies to --format savedmodel only, "
              r"not hf")
def max_seq_length_for_hf(w, t):
  return _ex(w, t, "--max-seq-length", "64")


@case(EXPORT, r"format must be one of")
def unknown_format(w, t):
  return _ex(w, t, "--format", "onnx")


@case(EXPORT, r"pretrain_config.json is not a JSON object")
def config_a_list(w, t):
  return _ex(w, t, "--init-checkpoint", _copy_model(
      w, t, _write("pretrain_config.json", b"[1, 2]")))


@case(EXPORT, r"pretrain_config.json line 1: not UTF-8 text")
def config_binary(w, t):
  return _ex(w, t, "--init-checkpoint", _copy_model(
      w, t, _write("pretrain_config.json", b"\x80\x81\x82")))


@case(EXPORT, r"pretrain_config.json: hparam 'vocab_size' expects int, "
              r"got 'many'")
def config_wrong_type(w, t):
  return _ex(w, t, "--init-checkpoint", _copy_model(
      w, t, _config_with(vocab_size="many")))


@case(EXPORT, r"cannot restore checkpoint .*ckpt-1")
def export_checkpoint_truncated(w, t):
  return _ex(w, t, "--init-checkpoint", _copy_model(
      w, t, _truncate("ckpt-1.data-00000-of-00001")))


@case(EXPORT, r"\(the list of checkpoints\) is damaged")
def export_checkpoint_list_damaged(w, t):
  return _ex(w, t, "--init-checkpoint", _copy_model(
      w, t, _write("checkpoint", np.random.RandomState(3).bytes(64))))


@case(EXPORT, r"pretrain_config.json is not valid JSON")
def config_truncated(w, t):
  return _ex(w, t, "--init-checkpoint", _copy_model(
      w, t, _truncate("pretrain_config.json")))


@case(EXPORT, r"model/ckpt-1: a checkpoint with neither our "
              r"pretrain_config.json beside it nor the original ELECTRA "
              r"release's variable names")
def config_missing(w, t):
  def damage(folder):
    (folder / "pretrain_config.json").unlink()
  return _ex(w, t, "--init-checkpoint", _copy_model(w, t, damage))


@case(EXPORT, r"model/checkpoint names ckpt-7, which is not there, but "
              r".*/model holds ckpt-1")
def export_index_names_a_missing_checkpoint(w, t):
  return _ex(w, t, "--init-checkpoint", _copy_model(
      w, t, _write("checkpoint", b'model_checkpoint_path: "ckpt-7"\n')))


@case(EXPORT, r"output_dir .*model already exists and is not empty")
def export_into_the_model_itself(w, t):
  model = _copy_model(w, t, lambda folder: None)
  return _ex(w, t, "--init-checkpoint", model, out=model)


@case(EXPORT, r"hparam 'max_seq_length' must be >= 0, got -8")
def negative_max_seq_length(w, t):
  return _ex(w, t, "--format", "savedmodel", "--max-seq-length=-8")


@case(EXPORT, r"vocab file .*vocab.txt line 1: not UTF-8 text \(byte 0x")
def vocab_binary(w, t):
  return _ex(w, t, "--vocab-file", _text(
      t, np.random.RandomState(2).bytes(600), "vocab.txt"))


@case(EXPORT, r"model.keras is not a .keras archive")
def keras_archive_garbage(w, t):
  return _ex(w, t, "--init-checkpoint",
             _text(t, b"PK\x03\x04" + b"\x00" * 40, "model.keras"))


@case(EXPORT, r"cannot read .*model.safetensors")
def hf_weights_damaged(w, t):
  return _ex(w, t, "--init-checkpoint", _hf_dir(t))


@case(EXPORT, r"--hparams is JSON but not an object: 42")
def hparams_a_number(w, t):
  return _ex(w, t, "--hparams", "42")


@pytest.mark.parametrize("name", sorted(EXPORT))
def test_export_refuses(world, tmp_path, capsys, name):
  make_argv, match = EXPORT[name]
  argv = make_argv(world, tmp_path)
  refused(export_model.main, argv, match, capsys, [world, tmp_path])
  assert not (tmp_path / "export").exists()


def test_interrupted_export_leaves_the_empty_folder_empty(world, tmp_path,
                                                          capsys,
                                                          monkeypatch):
  """The disk fills half way through writing the second network: the
  empty folder the user made stays empty, and no staging folder is left."""
  from interop import hf
  out = tmp_path / "export"
  out.mkdir()
  real_save, saved = hf.save, []

  def save_then_fail(output_dir, *args, **kwargs):
    if saved:
      raise OSError(errno.ENOSPC, "No space left on device")
    saved.append(output_dir)
    return real_save(output_dir, *args, **kwargs)

  monkeypatch.setattr(hf, "save", save_then_fail)
  refused(export_model.main, _ex(world, tmp_path, out=out),
          r"cannot write .*export: No space left on device", capsys,
          [world, tmp_path])
  assert saved and os.listdir(out) == []
  assert sorted(os.listdir(tmp_path)) == ["export"]


def test_ctrl_c_during_export_leaves_the_empty_folder_empty(world, tmp_path,
                                                           capsys,
                                                           monkeypatch):
  """Ctrl-C while the second network is written: one `error:` line, exit
  130, the user's empty folder still empty and no staging folder left."""
  from interop import hf
  out = tmp_path / "export"
  out.mkdir()
  real_save, saved = hf.save, []

  def save_then_interrupt(output_dir, *args, **kwargs):
    if saved:
      raise KeyboardInterrupt
    saved.append(output_dir)
    return real_save(output_dir, *args, **kwargs)

  monkeypatch.setattr(hf, "save", save_then_interrupt)
  before = snapshot(world)
  with pytest.raises(SystemExit) as info:
    export_model.main(_ex(world, tmp_path, out=out))
  assert info.value.code == 130
  err = capsys.readouterr().err
  assert err.strip().splitlines()[-1] == "error: interrupted", err
  assert "Traceback" not in err
  assert saved and os.listdir(out) == []
  assert sorted(os.listdir(tmp_path)) == ["export"]
  assert snapshot(world) == before


def test_blank_stdin_is_refused_at_once(world):
  """Whitespace-only stdin, in a real process: refused before the model
  loads (it was scored as empty sentences, and the process hung)."""
  result = _script("run_scoring.py", *_sc(world), stdin=b"  \n\t\n \n")
  err = result.stderr.decode()
  assert result.returncode == 2, err
  assert err.strip().splitlines()[-1] == (
      "error: no sentences in stdin: its 3 line(s) are all blank"), err
  assert "Traceback" not in err and result.stdout == b""


# ------------------------------------------------------ typed [SEP] & co.
TYPED = ["the cat [SEP] sat", "a[MASK]b [CLS]", "[PAD] [UNK] dog",
         "[sep] is not special", "[SEP", "[[MASK]]", "", "the quick fox"]


def test_typed_special_tokens_agree_on_every_path(world, tmp_path, capsys):
  """Typed [SEP] / [MASK] / ... are their ids for our tokenizer, the
  SavedModel's serve_text and transformers loading the hf export."""
  import tensorflow as tf
  import tensorflow_text  # noqa: F401 (the SavedModel's ops)
  import transformers
  from util.tokenization import load_tokenizer
  data = world / "data"
  ours = load_tokenizer(str(data / "vocab.txt")).tokenize_batch(TYPED)
  sep, mask = 3, 4
  assert ours[0][2] == sep and ours[1][1] == mask
  assert ours[2][:2] == [0, 1] and ours[1][-1] == 2
  assert sep not in ours[3] and sep not in ours[4]
  for fmt in ("savedmodel", "hf"):
    export_model.main(_sc(world, "--format", fmt, "--output-dir",
                          tmp_path / fmt))
  capsys.readouterr()
  loaded = tf.saved_model.load(str(tmp_path / "savedmodel"))
  served = loaded.signatures["serve_text"](text=tf.constant(TYPED))
  ids = served["input_ids"].numpy()
  lengths = served["input_mask"].numpy().sum(1)
  assert [ids[i, 1:n - 1].tolist() for i, n in enumerate(lengths)] == ours
  theirs = transformers.AutoTokenizer.from_pretrained(
      str(tmp_path / "hf" / "discriminator"))
  assert [theirs(t, add_special_tokens=False)["input_ids"]
          for t in TYPED] == ours


# ------------------------------------------------------------- TFRecords
def test_damaged_tfrecord_is_named_by_file_and_byte(tmp_path):
  """No TensorFlow internals ({{function_node ...}}) in the message: the
  file, the byte offset of the damage and the records before it."""
  import tensorflow as tf
  from pretrain import data
  path = str(tmp_path / "shard.tfrecord")
  with tf.io.TFRecordWriter(path) as writer:
    for _ in range(10):
      writer.write(b"x" * 100)
  whole = (tmp_path / "shard.tfrecord").read_bytes()
  (tmp_path / "shard.tfrecord").write_bytes(whole[:-50])
  assert data.find_corrupt_shards([path]) == [
      f"{path} (truncated record at byte 1044, after 9 good records)"]
  (tmp_path / "shard.tfrecord").write_bytes(
      whole[:200] + b"\x00" * 10 + whole[210:])
  message = data.find_corrupt_shards([path])[0]
  assert message == f"{path} (corrupted record at byte 128, after 1 good " \
                    "record)"
  assert data.scan_shards([path])[0][1] == 1

