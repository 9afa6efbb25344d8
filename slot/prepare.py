"""prepare_gpu_slot.py's work on the CPU: the wheels, and the pretraining
and fine-tuning data exported as the arrays the slot reads."""

import dataclasses
import math
import os

from comparison.config import TAGGING_TASKS
from finetune import data_layout
from finetune.config import FinetuningConfig
from pretrain.config import MAX_POSITIONS
from pretrain.config import PretrainingConfig
from slot import ROOT
from slot.carry import CARRY_LIMIT
from slot.carry import WHEELS_DIR
from slot.carry import carried_bytes
from slot.carry import download_wheels
from util.config import apply_overrides
from util.config import check_choice
from util.config import check_folder
from util.config import load_hparams
from util.config import ArgumentParser
from util.config import parse_args as parse_known
from util.errors import UserError
from util import storage
from util.tf_quiet import import_tensorflow

DATA_DIR = ".slot_data"
MODEL_SIZES = ("tiny", "small", "base", "large")  # configs/*_<size>.json


def parse_args(argv, description=None):
  """argv parsed; `description` is the script's (its --help)."""
  p = ArgumentParser(description=description)
  p.add_argument("--wheels", action="store_true",
                 help=f"download the slot's wheels into {WHEELS_DIR}/")
  p.add_argument("--data-dir", default="",
                 help="a data dir with pretrain_tfrecords/ to export")
  p.add_argument("--pretrain-tfrecords", default="",
                 help="the shards' glob, if not DATA_DIR/pretrain_tfrecords")
  p.add_argument("--max-seq-length", type=int, default=128)
  p.add_argument("--out", default=DATA_DIR)
  p.add_argument("--max-train-mb", type=float, default=40.0,
                 help="uint16 ids before compression (40: ~20M positions)")
  p.add_argument("--max-heldout-examples", type=int, default=4096)
  p.add_argument("--glue-dir", default="",
                 help="fine-tuning tasks' data (GLUE folder names work)")
  p.add_argument("--tasks", default="rte,mrpc,sts,cola,sst")
  p.add_argument("--tagging-dir", default="",
                 help="chunk/ and pos/ folders (train.txt, dev.txt), as "
                 "run_comparison.py's OUTPUT_DIR/tagging_data")
  p.add_argument("--vocab-file", default="",
                 help="the pretraining vocabulary (for --glue-dir)")
  p.add_argument("--model-size", default="small",
                 help="fine-tuning defaults of this size (Table 6)")
  p.add_argument("--finetune-hparams", default="",
                 help="JSON (file or string): FinetuningConfig fields")
  args = parse_known(p, argv)
  if not args.wheels and not (args.data_dir or args.pretrain_tfrecords or
                              args.glue_dir):
    p.error("nothing to do: give --wheels, --data-dir and/or --glue-dir")
  if args.glue_dir and not args.vocab_file:
    p.error("--glue-dir needs --vocab-file (the pretraining vocabulary)")
  os.chdir(ROOT)  # the flags' relative paths are the repository root's
  check(args)
  return args


def check(args):
  """What the flags name, before TensorFlow loads and anything is read."""
  for name, low in (("max_seq_length", 8), ("max_heldout_examples", 0)):
    if getattr(args, name) < low:
      raise UserError(f"--{name.replace('_', '-')} must be >= {low}, got "
                      f"{getattr(args, name)}")
  if args.max_seq_length > MAX_POSITIONS:  # the slot's presets' positions
    raise UserError(f"--max-seq-length {args.max_seq_length} exceeds the "
                    f"models' {MAX_POSITIONS} positions")
  if not math.isfinite(args.max_train_mb) or args.max_train_mb <= 0:
    raise UserError(f"--max-train-mb must be a finite number > 0, got "
                    f"{args.max_train_mb}")
  check_choice("--model-size", args.model_size, MODEL_SIZES)
  if storage.exists(args.out) and not storage.isdir(args.out):
    raise UserError(f"--out {args.out} is a file, not a folder")
  if args.data_dir:
    check_folder(args.data_dir, "--data-dir")
  if not args.glue_dir:
    return
  check_folder(args.glue_dir, "--glue-dir")
  if not storage.exists(args.vocab_file) or storage.isdir(args.vocab_file):
    raise UserError(f"--vocab-file {args.vocab_file} is not a file")
  if args.finetune_hparams:
    load_hparams(args.finetune_hparams, "--finetune-hparams")
  tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
  if not tasks:
    raise UserError("--tasks names no task")
  for task in tasks:
    if task not in data_layout.GLUE + TAGGING_TASKS:
      raise UserError(f"unknown task '{task}' in --tasks (choose from "
                      f"{', '.join(data_layout.GLUE + TAGGING_TASKS)})")
    if task in TAGGING_TASKS:
      where = os.path.join(args.tagging_dir, task, "train.txt")
      if not args.tagging_dir or not storage.exists(where):
        missing = f": no {where}" if args.tagging_dir else ""
        raise UserError(f"{task} needs --tagging-dir (a folder with {task}/"
                        f"train.txt and dev.txt){missing}")


def prepare(args):
  """Each export asked for; 0 when a run can carry the result, else 1."""
  if args.wheels:
    download_wheels(WHEELS_DIR)
  if args.data_dir or args.pretrain_tfrecords:
    export_data(args)
  if args.glue_dir:
    export_tasks(args)
  size = carried_bytes([d for d in (WHEELS_DIR, args.out)
                        if os.path.isdir(d)])
  print(f"a run carrying {WHEELS_DIR} and {args.out} sends "
        f"{size / 2 ** 20:.1f} MiB of the slot's 64 MiB" +
        ("" if size <= CARRY_LIMIT else ": TOO MUCH, export less"))
  return 0 if size <= CARRY_LIMIT else 1


def export_data(args):
  import_tensorflow()
  from pretrain import arrays  # the export reads TFRecords
  config = PretrainingConfig(data_dir=args.data_dir, model_name="export",
                             max_seq_length=args.max_seq_length,
                             pretrain_tfrecords=args.pretrain_tfrecords)
  config.resolve()
  meta = arrays.export(config, args.out, max_train_mb=args.max_train_mb,
                       max_heldout_examples=args.max_heldout_examples)
  print(f"{args.out}/: {meta['train_examples']:,} training examples "
        f"({meta['train_tokens']:,} tokens), {meta['heldout_examples']:,} "
        f"held-out ({meta['eval_source']}); files {meta['file_bytes']}")


def export_tasks(args):
  """GLUE_DIR's tasks featurized with VOCAB into OUT/finetune/."""
  # The tasks, arrays and tokenizer import TensorFlow.
  from finetune import arrays as ft_arrays
  from finetune import task_builder
  from util.tokenization import load_tokenizer
  given = (load_hparams(args.finetune_hparams, "--finetune-hparams")
           if args.finetune_hparams else {})
  config = apply_overrides(
      FinetuningConfig(task_names=args.tasks,
                       raw_data_dir=os.path.abspath(args.glue_dir)),
      given, "--finetune-hparams")
  config.resolve(args.model_size)
  tokenizer = load_tokenizer(args.vocab_file, config.do_lower_case)
  config.vocab_file = os.path.abspath(args.vocab_file)
  tasks = []
  for name in config.tasks:  # each with its own folder and default length
    own = dataclasses.replace(config, task_names=name)
    if name in TAGGING_TASKS:  # check() saw its folder
      own.raw_data_dir = os.path.abspath(args.tagging_dir)
    own.max_seq_length = given.get("max_seq_length")  # None: the task's
    own.resolve(args.model_size)
    tasks += task_builder.get_tasks(own, tokenizer)
  out = os.path.join(args.out, "finetune")
  meta = ft_arrays.export(config, tokenizer, tasks, out,
                          tokenizer.vocab_size)
  for name, entry in meta["tasks"].items():
    print(f"{out}/: {name}: {entry['train_rows']:,} train rows "
          f"({entry['epochs']:g} epochs, {entry['train_steps']} steps), "
          f"{entry['dev_rows']:,} dev rows")
