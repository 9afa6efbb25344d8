"""run_gpu_slot.py and prepare_gpu_slot.py under hostile flags (issue 54):
each refused before JAX, TensorFlow or a measurement starts, with exit 2,
one `error:` line and nothing written."""

import os
import re

import pytest

from tests.script_checks import refused
from tests.shared_data import BERT_VOCAB
from tests.shared_data import SHARED

GLUE = os.path.join(SHARED, "glue")


@pytest.fixture
def run_gpu_slot(monkeypatch):
  # Its import sets KERAS_BACKEND=jax only where none is set: keep ours.
  monkeypatch.setenv("KERAS_BACKEND",
                     os.environ.get("KERAS_BACKEND", "tensorflow"))
  monkeypatch.delenv("OUT", raising=False)
  import run_gpu_slot as script  # pylint: disable=g-import-not-at-top
  return script


SLOT = {  # name -> (flags after --out OUT --data DATA, the error's pattern)
    "objective_twice": (("--objectives", "electra,electra"),  # issue 54, 5.
                        r"--objectives names electra seed 1 twice"),
    "seeds_overlap": (("--objectives", "electra:2,electra:2-3"),
                      r"names electra seed 2 twice \('electra:2' and "
                      r"'electra:2-3'\)"),
    "alias_and_name": (("--objectives", "mlm,bert:1-2"),
                       r"names bert seed 1 twice"),
    "unknown_objective": (("--objectives", "electra,electraa"),
                          r"unknown objective 'electraa' in --objectives"),
    "seeds_not_a_number": (("--objectives", "electra:x"),
                           r"--objectives item 'electra:x': give NAME"),
    "seeds_reversed": (("--objectives", "electra:3-2"),
                       r"item 'electra:3-2': give NAME.*1 <= A <= B"),
    "zero_seeds": (("--objectives", "electra:0"), r"item 'electra:0'"),
    "batch_zero": (("--batch", "0"), r"--batch must be >= 1, got 0"),
    "batch_not_a_number": (("--batch", "abc"),
                           r"argument --batch: invalid int value: 'abc'"),
    "chunk_zero": (("--chunk", "0"), r"--chunk must be >= 1"),
    "finetune_seeds_negative": (("--finetune-seeds=-1",),
                                r"--finetune-seeds must be >= 0, got -1"),
    "time_limit_nan": (("--time-limit", "nan"),
                       r"--time-limit must be a finite number > 0, got nan"),
    "train_seconds_zero": (("--train-seconds", "0"),
                           r"--train-seconds must be a finite number > 0"),
    "budget_negative": (("--budget-flops=-1e15",),
                        r"--budget-flops must be a finite number >= 0"),
    "hparams_not_json": (("--hparams", "{bad"), r"--hparams is not valid JSON"),
    "unknown_flag": (("--objective", "electra"),
                     r"unknown flag --objective; did you mean --objectives\?"),
    "finetune_data_missing": (("--finetune-data", "/nonexistent/ft"),
                              r"--finetune-data /nonexistent/ft is not a "
                              r"folder"),
    "finetune_data_not_an_export": (("--finetune-data", "DATA"),
                                    r"DATA holds no exported tasks "
                                    r"\(finetune.json missing\)"),
    "pretrained_missing": (("--pretrained", "/nonexistent/w",
                            "--finetune-data", "DATA"),
                           r"--pretrained /nonexistent/w is not a folder"),
}


@pytest.mark.parametrize("name", sorted(SLOT))
def test_run_gpu_slot_refuses(run_gpu_slot, tmp_path, capsys, name):
  flags, match = SLOT[name]
  data = tmp_path / "data"
  data.mkdir()
  flags = [str(data) if f == "DATA" else f for f in flags]
  match = match.replace("DATA", re.escape(str(data)))
  out = tmp_path / "out"
  refused(run_gpu_slot.main, ["--out", str(out), "--data", str(data),
                              *flags], match, capsys, [tmp_path])
  assert not out.exists()


def test_run_gpu_slot_refuses_an_out_that_is_a_file(run_gpu_slot, tmp_path,
                                                    capsys):
  """Issue 65, 10: one line, not FileExistsError, before anything runs."""
  (tmp_path / "out").write_text("mine")
  refused(run_gpu_slot.main, ["--out", str(tmp_path / "out"), "--data",
                              str(tmp_path)],
          r"^error: --out .*/out is a file, not a folder$", capsys,
          [tmp_path])


def test_run_gpu_slot_needs_out(run_gpu_slot, tmp_path, capsys):
  refused(run_gpu_slot.main, ["--data", str(tmp_path)],
          r"--out \(or \$OUT\) is required", capsys, [tmp_path])


PREPARE = {  # name -> (flags, the error's pattern); VOCAB, GLUE, TMP filled
    "nothing_to_do": ((), r"nothing to do: give --wheels, --data-dir"),
    "glue_without_vocab": (("--glue-dir", "GLUE"), r"--glue-dir needs "
                           r"--vocab-file"),
    "glue_dir_missing": (("--glue-dir", "/nonexistent/glue", "--vocab-file",
                          "VOCAB"), r"--glue-dir not found: /nonexistent"),
    "glue_dir_a_file": (("--glue-dir", "VOCAB", "--vocab-file", "VOCAB"),
                        r"--glue-dir .* is a file, not a folder"),
    "vocab_missing": (("--glue-dir", "GLUE", "--vocab-file", "/no/vocab.txt"),
                      r"--vocab-file /no/vocab.txt is not a file"),
    "unknown_task": (("--glue-dir", "GLUE", "--vocab-file", "VOCAB",
                      "--tasks", "rte,bogus"),
                     r"unknown task 'bogus' in --tasks"),
    "no_task": (("--glue-dir", "GLUE", "--vocab-file", "VOCAB", "--tasks",
                 " , "), r"--tasks names no task"),
    "chunk_without_tagging_dir": (("--glue-dir", "GLUE", "--vocab-file",
                                   "VOCAB", "--tasks", "chunk"),
                                  r"chunk needs --tagging-dir"),
    "tagging_dir_without_pos": (("--glue-dir", "GLUE", "--vocab-file",
                                 "VOCAB", "--tasks", "pos", "--tagging-dir",
                                 "TMP"), r"pos needs --tagging-dir .*: no "),
    "finetune_hparams_not_json": (("--glue-dir", "GLUE", "--vocab-file",
                                   "VOCAB", "--finetune-hparams", "{bad"),
                                  r"^error: --finetune-hparams is not valid "
                                  r"JSON"),
    "data_dir_missing": (("--data-dir", "/nonexistent/data"),
                         r"--data-dir not found: /nonexistent/data"),
    "max_train_mb_nan": (("--data-dir", "TMP", "--max-train-mb", "nan"),
                         r"--max-train-mb must be a finite number > 0"),
    "max_seq_length_tiny": (("--data-dir", "TMP", "--max-seq-length", "2"),
                            r"--max-seq-length must be >= 8, got 2"),
    "max_seq_length_past_positions": (("--data-dir", "TMP",
                                       "--max-seq-length", "100000000"),
                                      r"--max-seq-length 100000000 exceeds "
                                      r"the models' 512 positions"),
    "heldout_negative": (("--data-dir", "TMP", "--max-heldout-examples",
                          "-1"), r"--max-heldout-examples must be >= 0"),
    "model_size_unknown": (("--data-dir", "TMP", "--model-size", "huge"),
                           r"--model-size must be one of tiny, small"),
    "out_a_file": (("--data-dir", "TMP", "--out", "VOCAB"),
                   r"--out .* is a file, not a folder"),
    "unknown_flag": (("--glue", "GLUE"), r"unknown flag --glue; did you "
                     r"mean --glue-dir\?"),
}


@pytest.mark.parametrize("name", sorted(PREPARE))
def test_prepare_gpu_slot_refuses(tmp_path, capsys, monkeypatch, name):
  import prepare_gpu_slot  # pylint: disable=g-import-not-at-top
  monkeypatch.chdir(tmp_path)  # it moves to the repository root: undone
  flags, match = PREPARE[name]
  fill = {"GLUE": GLUE, "VOCAB": BERT_VOCAB, "TMP": str(tmp_path)}
  refused(prepare_gpu_slot.main, [fill.get(f, f) for f in flags], match,
          capsys, [tmp_path])
