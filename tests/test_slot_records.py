"""collect_gpu_slot.py's records (issues 51 and 54): a results folder is
scored again from what it holds, with the data named by flags (its
finetune.json names another machine's paths), to the same numbers; damaged,
copied or missing records are refused in one line before anything is
computed or written."""

import json
import os
import shutil

import numpy as np
import pytest

import collect_gpu_slot
from tests.script_checks import refused
from tests.shared_data import BERT_VOCAB
from tests.shared_data import SHARED

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A stand-in for results/comparison_tiny_gpu (tests/data/make_slot_fixture.py):
# RTE only, three runs in two records.
FIXTURE = os.path.join(ROOT, "tests", "data", "slot_results")
DATA = ["--glue-dir", os.path.join(SHARED, "glue"), "--vocab-file",
        BERT_VOCAB]


def numbers(path):
  """results.json less the line naming the machine that scored it."""
  with open(path) as f:
    results = json.load(f)
  return {k: v for k, v in results.items() if k != "machine"}


def test_a_folder_scores_again_to_its_numbers(tmp_path):
  out = str(tmp_path / "again")
  assert collect_gpu_slot.main([FIXTURE, "--output-dir", out, *DATA]) == 0
  assert numbers(os.path.join(out, "results.json")) == numbers(
      os.path.join(FIXTURE, "results.json"))
  # And the folder it wrote scores again in place to the same.
  assert collect_gpu_slot.main([out, "--output-dir", out, *DATA]) == 0
  assert numbers(os.path.join(out, "results.json")) == numbers(
      os.path.join(FIXTURE, "results.json"))


@pytest.fixture
def folder(tmp_path):
  copy = tmp_path / "results"
  shutil.copytree(FIXTURE, copy)
  return copy


def _truncate(path):
  data = path.read_bytes()
  path.write_bytes(data[:len(data) // 2])


def _returned(folder, k):
  """records/K as a slot's returned folder (no results.json to check)."""
  out = folder.parent / f"call{k}"
  shutil.copytree(folder / "records" / str(k), out)
  return out


# name -> (damage(folder) -> the inputs to give, the error's pattern)
CASES = {
    # issue 54, 1 and 2: in a folder this script wrote, and as returned
    "npz_truncated": (lambda f: _truncate(f / "records/2/finetune_outputs.npz"),
                      r"records/2/finetune_outputs.npz is not the file "
                      r"results.json lists \(truncated or changed\)"),
    "slot_json_truncated": (lambda f: _truncate(f / "records/1/slot.json"),
                            r"records/1/slot.json is not the file "
                            r"results.json lists"),
    "returned_npz_truncated": (
        lambda f: [_truncate(_returned(f, 2) / "finetune_outputs.npz"),
                   _returned(f, 1), ["call1", "call2"]][-1],
        r"call2/finetune_outputs.npz is truncated or not an .npz file "
        r"\(BadZipFile"),
    "returned_slot_json_truncated": (
        lambda f: [_truncate(_returned(f, 1) / "slot.json"),
                   ["call1"]][-1],
        r"call1/slot.json is not valid JSON"),
    # issue 54, 3: a record copied
    "record_copied": (lambda f: shutil.copytree(f / "records/2",
                                                f / "records/3"),
                      r"records/3/slot.json is a copy of .*records/2/"
                      r"slot.json: a record given twice would count its "
                      r"trials twice"),
    "folder_given_twice": (lambda f: [_returned(f, 1), ["call1", "call1"]][-1],
                           r"call1/slot.json is a copy of .*call1/slot.json"),
    # issue 54, 4: a record deleted, first or last
    "first_record_deleted": (lambda f: shutil.rmtree(f / "records/1"),
                             r"records/1 is missing \(records/ holds 2\): "
                             r"its trials would be lost"),
    "last_record_deleted": (lambda f: shutil.rmtree(f / "records/2"),
                            r"records/2 is missing \(records/ holds 1\)"),
    "listed_file_deleted": (
        lambda f: os.remove(f / "records/2/finetune_outputs.npz"),
        r"records/2/finetune_outputs.npz is missing \(results.json lists "
        r"it\)"),
    "results_json_truncated": (lambda f: _truncate(f / "results.json"),
                               r"results.json is not valid JSON"),
    # issue 51, 1: the data the slot machine read is not here
    "data_not_named": (lambda f: "no glue",
                       r"rte: its data folder /the/slot/machine/glue \(as "
                       r"finetune.json records it\) is not here: name it "
                       r"with --glue-dir"),
    "vocab_not_named": (lambda f: "no vocab",
                        r"vocabulary /the/slot/machine/vocab.txt .*name it "
                        r"with --vocab-file"),
    "conll_dir_without_test": (lambda f: "conll",
                               r"--conll-dir .* has no train.txt \(CoNLL-2000"),
    "not_a_results_folder": (lambda f: ["empty"],
                             r"empty holds no slot.json: not a slot's "
                             r"returned folder"),
    "finetune_json_missing": (lambda f: os.remove(f / "finetune.json"),
                              r"finetune.json not found: the fine-tuning "
                              r"arrays the slot ran on"),
    "outputs_of_another_dev_set": (
        lambda f: [_rows(_returned(f, 2)), _returned(f, 1),
                   ["call1", "call2"]][-1],
        r"replace_mlm_tiny.seed3 rte seed 1234: 5 outputs for 277 dev rows"),
}


def _rows(folder):
  path = folder / "finetune_outputs.npz"
  with np.load(path) as data:
    cut = {k: data[k][:5] for k in data.files}
  np.savez(path, **cut)


@pytest.mark.parametrize("name", sorted(CASES))
def test_collect_refuses(folder, tmp_path, capsys, name, monkeypatch):
  damage, match = CASES[name]
  (tmp_path / "empty").mkdir()
  what = damage(folder)
  inputs = ([str(tmp_path / i) for i in what] if isinstance(what, list)
            else [str(folder)])
  data = list(DATA)
  if what == "no glue":
    data = DATA[2:]
  elif what == "no vocab":
    data = DATA[:2]
  elif what == "conll":
    data += ["--conll-dir", str(tmp_path / "empty")]
  if name == "finetune_json_missing":
    monkeypatch.chdir(tmp_path)  # no .slot_data/finetune here either
  if any("call" in i for i in inputs) and name != "folder_given_twice":
    data += ["--finetune-data", str(FIXTURE)]
  out = tmp_path / "out"
  refused(collect_gpu_slot.main, [*inputs, "--output-dir", str(out), *data],
          match, capsys, [tmp_path])
  assert not out.exists()


# Issue 65, 9 and 10: the output folder is checked before any scoring.
def test_collect_keeps_a_comparison_of_other_records(folder, tmp_path,
                                                     capsys):
  """Pointed at a comparison whose records/2 is not among the inputs, it
  replaces nothing (its results, plots and records byte-identical)."""
  call = _returned(folder, 1)
  refused(collect_gpu_slot.main, [str(call), "--output-dir", str(folder),
                                  "--finetune-data", str(FIXTURE), *DATA],
          r"^error: .*results holds the results of other records \(.*"
          r"records/2 is not among the folders given\): .*--overwrite to "
          r"replace it \(nothing was written\)$", capsys, [tmp_path])


def test_collect_keeps_results_it_cannot_trace(tmp_path, capsys):
  out = tmp_path / "out"
  out.mkdir()
  (out / "results.md").write_text("mine")
  refused(collect_gpu_slot.main, [FIXTURE, "--output-dir", str(out), *DATA],
          r"results.md already exists and no records/ says what it came "
          r"from: pass --overwrite", capsys, [tmp_path])


def test_collect_refuses_an_output_dir_that_is_a_file(tmp_path, capsys):
  (tmp_path / "out").write_text("mine")
  refused(collect_gpu_slot.main, [FIXTURE, "--output-dir",
                                  str(tmp_path / "out"), *DATA],
          r"^error: --output-dir .*/out is a file, not a folder$", capsys,
          [tmp_path])


def test_collect_refuses_a_read_only_output_dir(tmp_path, capsys,
                                                monkeypatch):
  """Read-only as the scripts ask (os.access: root writes anywhere)."""
  out = tmp_path / "out"
  out.mkdir()
  real_access = os.access
  monkeypatch.setattr(os, "access", lambda path, mode: (
      False if os.path.abspath(path).startswith(str(out)) and mode & os.W_OK
      else real_access(path, mode)))
  refused(collect_gpu_slot.main, [FIXTURE, "--output-dir", str(out), *DATA],
          r"^error: cannot write to --output-dir .*/out: permission denied$",
          capsys, [tmp_path])
  assert not os.listdir(out)


def test_collect_overwrite_leaves_no_stale_record(folder):
  """--overwrite replaces the comparison whole: records/2, which the new
  results do not count, is not left beside them."""
  call = _returned(folder, 1)
  assert collect_gpu_slot.main([str(call), "--output-dir", str(folder),
                                "--finetune-data", str(FIXTURE), *DATA,
                                "--overwrite"]) == 0
  assert sorted(os.listdir(folder / "records")) == ["1"]
  assert list(numbers(folder / "results.json")["records"]) == ["1"]
