"""A tiny pretrained ELECTRA beside slices of the shared GLUE, SQuAD and
CoNLL-2000 data, in the layout run_finetuning.py reads."""

import json
import os

import run_pretraining
from tests.pretraining_runs import hparams
from tests.shared_data import SHARED

GLUE = {"cola": "CoLA", "sst": "SST-2", "mrpc": "MRPC", "sts": "STS-B",
        "rte": "RTE", "wnli": "WNLI"}
QUICK = {"train_examples_limit": 48, "eval_examples_limit": 32,
         "num_train_epochs": 1.0, "train_batch_size": 16,
         "eval_batch_size": 16, "max_seq_length": 64, "log_every_steps": 2,
         "learning_rate": 1e-3,
         "overwrite": True}  # the tests rerun tasks into one output_dir


def squad_slice(path, out_dir, articles_train=2, questions_dev=40):
  """A train file from the first articles of a dev file, dev from the
  next (there is no SQuAD train set here)."""
  with open(path) as f:
    data = json.load(f)
  os.makedirs(out_dir, exist_ok=True)
  train = dict(data, data=data["data"][:articles_train])
  dev_article = dict(data["data"][articles_train])
  kept, paragraphs = 0, []
  for paragraph in dev_article["paragraphs"]:
    if kept >= questions_dev:
      break
    paragraphs.append(paragraph)
    kept += len(paragraph["qas"])
  dev = dict(data, data=[dict(dev_article, paragraphs=paragraphs)])
  for name, part in (("train", train), ("dev", dev)):
    with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
      json.dump(part, f)


def make_pretrained(data_dir):
  """A tiny pretrained ELECTRA "pre" in data_dir and a finetuning_data/
  folder beside it; returns data_dir."""
  run_pretraining.main(["--data-dir", data_dir, "--model-name", "pre",
                        "--hparams", hparams(num_train_steps=20)])
  raw = os.path.join(data_dir, "finetuning_data")
  os.makedirs(raw, exist_ok=True)
  for name, official in GLUE.items():  # official folder names work too
    link = os.path.join(raw, official)
    if not os.path.exists(link):
      os.symlink(os.path.join(SHARED, "glue", official), link)
  squad_slice(os.path.join(SHARED, "squad", "dev-v1.1.json"),
              os.path.join(raw, "squadv1"))
  squad_slice(os.path.join(SHARED, "squad", "dev-v2.0.rebuilt.json"),
              os.path.join(raw, "squad"))
  chunk_slice(os.path.join(raw, "chunk"))
  return data_dir


def chunk_slice(out_dir, sentences=60):
  """The first sentences of CoNLL-2000's train and test files as the
  chunk task's train and dev."""
  os.makedirs(out_dir, exist_ok=True)
  for name, source in (("train", "train.txt"), ("dev", "test.txt")):
    with open(os.path.join(SHARED, "chunk", source)) as f:
      kept = f.read().split("\n\n")[:sentences]
    with open(os.path.join(out_dir, f"{name}.txt"), "w") as f:
      f.write("\n\n".join(kept) + "\n")
