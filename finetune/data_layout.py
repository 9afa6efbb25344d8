"""Where each fine-tuning task's files go, and which names are accepted.

RAW_DATA_DIR (--raw-data-dir; default DATA_DIR/finetuning_data) holds a
folder per task, named as the task (`rte/`) or as its release names it
(`RTE/`, `SST-2/`, ...). Pure Python: run_finetuning.py checks the files
here before TensorFlow loads, and the tasks read the paths found here, so
the two cannot disagree. docs/run_finetuning.md lists the same layout.
"""

import os

from util import storage
from util.errors import UserError

GLUE = ("cola", "sst", "mrpc", "sts", "qqp", "mnli", "qnli", "rte", "wnli")
QA = ("squadv1", "squad")
TAGGING = ("chunk", "pos")
CHOICE_RECORDS = ("swag", "copa")  # .jsonl or .csv files
RACE = "race"  # folders of JSON files

# The folder name a task's release gives it, accepted beside the task's.
RELEASE_FOLDERS = {
    "cola": "CoLA", "sst": "SST-2", "mrpc": "MRPC", "sts": "STS-B",
    "qqp": "QQP", "mnli": "MNLI", "qnli": "QNLI", "rte": "RTE",
    "wnli": "WNLI", "race": "RACE", "copa": "COPA"}
# MNLI's dev and test sets come as matched and mismatched halves.
SPLIT_FILES = {"mnli": {"dev": ("dev_matched", "dev_mismatched"),
                        "test": ("test_matched", "test_mismatched")}}
# SQuAD's own file names, accepted beside train.json / dev.json.
SQUAD_VERSIONS = {"squadv1": "v1.1", "squad": "v2.0"}


def has_layout(task):
  """Whether this module knows the task's files (a task added elsewhere
  is checked only when it reads them)."""
  return bool(kind(task))


def kind(task):
  """The task's family in words ("" for a task added elsewhere)."""
  for names, words in ((GLUE, "GLUE"), (QA, "question answering"),
                       (TAGGING, "tagging"),
                       (CHOICE_RECORDS + (RACE,), "multiple choice")):
    if task in names:
      return words
  return ""


def split_files(task, split):
  """The file stems a split is read from (MNLI's dev: both halves)."""
  return SPLIT_FILES.get(task, {}).get(split, (split,))


def _folders(raw_data_dir, task):
  names = [task] + ([RELEASE_FOLDERS[task]] if task in RELEASE_FOLDERS
                    else [])
  return [os.path.join(raw_data_dir, n) for n in names]


def candidates(raw_data_dir, task, stem):
  """Every path `stem` of the task may be at, the preferred first."""
  folders = _folders(raw_data_dir, task)
  if task in GLUE:
    names = [f"{stem}.tsv"]
  elif task in QA:
    names = [f"{stem}.json", f"{stem}-{SQUAD_VERSIONS[task]}.json"]
  elif task in TAGGING:
    names = [f"{stem}.txt"]
    if task == "chunk" and stem == "dev":
      names.append("test.txt")  # CoNLL-2000 as distributed has no dev set
  elif task in CHOICE_RECORDS:
    names = [f"{n}.{ext}" for n in ((stem, "val") if stem == "dev" else
                                    (stem,)) for ext in ("jsonl", "csv")]
  elif task == RACE:  # the RACE release unpacks as RACE/{train,dev,test}/
    names = [stem, os.path.join("RACE", stem)]
  else:
    raise ValueError(f"no file layout known for task '{task}'")
  return [os.path.join(f, n) for f in folders for n in names]


def find(raw_data_dir, task, stem):
  """The first of candidates() that is there, else None."""
  there = storage.isdir if task == RACE else storage.exists
  return next((p for p in candidates(raw_data_dir, task, stem) if there(p)),
              None)


def require(raw_data_dir, task, stem):
  """Where to read `stem`: the one found, else one error naming the
  layout (missing())."""
  if not raw_data_dir:
    raise UserError("raw_data_dir is not set: pass --data-dir or "
                    "--raw-data-dir")
  found = find(raw_data_dir, task, stem)
  if found is None:
    raise missing(raw_data_dir, task, stem)
  return found


def dev_is_test(found):
  """Whether chunking's dev path found is CoNLL-2000's test.txt."""
  return os.path.basename(found) == "test.txt"


def missing(raw_data_dir, task, stem):
  """The UserError for a split file that is not there, naming the layout."""
  first = candidates(raw_data_dir, task, stem)[0]
  folders = "the data folder's " + " or ".join(
      f"{os.path.basename(f)}/" for f in _folders(raw_data_dir, task))
  if task in GLUE:
    what = f"GLUE files go in {folders}"
  elif task in QA:
    version = SQUAD_VERSIONS[task]
    what = (f"SQuAD files go in {folders}: train.json, dev.json or "
            f"train-{version}.json, dev-{version}.json")
  elif task == "chunk":
    what = (f"CoNLL-2000 goes in {folders}: train.txt and dev.txt, or "
            "train.txt and test.txt as distributed")
  elif task == "pos":
    what = f"POS files go in {folders}: train.txt, dev.txt, test.txt"
  elif task in CHOICE_RECORDS:
    what = (f"{task} files go in {folders}: <split>.jsonl or .csv, dev "
            "also as val")
  else:
    what = (f"RACE goes in {folders} as the release unpacks: train/, dev/, "
            "test/ with high/ and middle/ folders of JSON files")
  return UserError(f"{task}: {first} not found ({what}; data folder: "
                   "--raw-data-dir, default DATA_DIR/finetuning_data)")


def needed_splits(config):
  """The splits a fine-tuning run reads (finetune/task_data.py reads
  them all first): train, else dev to build the model; dev to evaluate;
  test for write_test_outputs."""
  splits = {"train" if config.do_train else "dev"}
  splits |= ({"dev"} if config.do_eval else set()) | (
      {"test"} if config.write_test_outputs else set())
  return [s for s in ("train", "dev", "test") if s in splits]


def check_files(config):
  """Every file the run's tasks need is there: one error naming the
  first missing one and where it goes."""
  for task in config.tasks:
    if not has_layout(task):
      continue
    for split in needed_splits(config):
      for stem in split_files(task, split):
        if find(config.raw_data_dir, task, stem) is None:
          raise missing(config.raw_data_dir, task, stem)


def link_conll(conll_dir, raw_data_dir, tasks):
  """RAW_DATA_DIR/<task>/ for each tagging task: links to CoNLL-2000's
  train.txt, and its test.txt as dev.txt (the ELECTRA release scores
  test), so one CoNLL folder serves chunk and pos."""
  for task in tasks:
    folder = os.path.join(raw_data_dir, task)
    storage.makedirs(folder)
    for name, source in (("train.txt", "train.txt"), ("dev.txt", "test.txt")):
      link = os.path.join(folder, name)
      target = os.path.abspath(os.path.join(conll_dir, source))
      if os.path.lexists(link) and os.path.realpath(link) != target:
        os.remove(link)  # ours: a rerun may name another conll_dir
      if not os.path.lexists(link):
        os.symlink(target, link)
