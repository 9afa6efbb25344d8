"""Prepares what a GPU slot's run carries (docs/gpu_slot.md), on the CPU
machine, in the repository root:

  python prepare_gpu_slot.py --wheels                  # .whl/
  python prepare_gpu_slot.py --data-dir DATA_DIR [--max-train-mb 40]
                                                       # .slot_data/
  python prepare_gpu_slot.py --glue-dir GLUE_DIR --vocab-file VOCAB \
      [--tasks rte,mrpc,sts,cola,sst] [--finetune-hparams JSON]
                                                       # .slot_data/finetune/

--wheels downloads, for the slot's Python 3.12 on x86-64, keras and what
keras needs that the slot's image lacks (namex, optree), at the versions
installed here, into .whl/ (git ignores it); gpu_slot.sh installs them
there. --data-dir exports DATA_DIR's pretraining TFRecords, training and
held-out shards (build_pretraining_dataset.py's), to compact NumPy arrays
in .slot_data/ (pretrain/arrays.py; needs TensorFlow). --glue-dir
featurizes fine-tuning tasks (GLUE's folders, or run_finetuning.py's
finetuning_data/ layout) as run_finetuning.py would, into
.slot_data/finetune/ (finetune/arrays.py), which the slot fine-tunes the
models it pretrains on. Both end by
printing what a run would carry against the slot's 64 MiB.
"""

import argparse
import dataclasses
import os
import subprocess
import sys

# Before any Keras import: pins the backend, quiets TF's C++ chatter.
from util.tf_quiet import tensorflow_script

tensorflow_script("prepare_gpu_slot.py")

from util.errors import main_guard  # noqa: E402

ROOT = os.path.dirname(os.path.abspath(__file__))
WHEELS_DIR = ".whl"
DATA_DIR = ".slot_data"
CARRY_LIMIT = 64 * 2 ** 20
# Not in the slot's image (KINDS.md's package list): keras and its needs.
WHEELS = ("keras", "namex", "optree")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")


def installed_version(name):
  from importlib import metadata
  try:
    return metadata.version(name)
  except metadata.PackageNotFoundError:
    return None


def download_wheels(folder, python_version="3.12"):
  """pip download, as the device README says, of WHEELS at the versions
  installed here (the ones the CPU tests ran)."""
  os.makedirs(folder, exist_ok=True)
  specs = []
  for name in WHEELS:
    version = installed_version(name)
    specs.append(f"{name}=={version}" if version else name)
  have = os.listdir(folder)
  missing = [s for s in specs if not any(
      w.lower().startswith(s.replace("==", "-").lower() + "-") for w in have)]
  if not missing:
    print(f"{folder}/ already holds {', '.join(specs)}")
    return
  command = [sys.executable, "-m", "pip", "download", "--no-deps",
             "--only-binary=:all:", "--python-version", python_version,
             "--implementation", "cp", "-d", folder]
  for platform in PLATFORMS:
    command += ["--platform", platform]
  print(" ".join(command + missing), flush=True)
  subprocess.run(command + missing, check=True)


def carried_bytes(paths):
  """What a run carries: the tracked and untracked-not-ignored files, plus
  the carried folders."""
  listed = subprocess.run(
      ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
      cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
  total = sum(os.path.getsize(os.path.join(ROOT, p.decode()))
              for p in listed if p and os.path.isfile(
                  os.path.join(ROOT, p.decode())))
  for path in paths:
    for base, _, files in os.walk(os.path.join(ROOT, path)):
      total += sum(os.path.getsize(os.path.join(base, f)) for f in files)
  return total


def export_data(args):
  from util.tf_quiet import import_tensorflow
  import_tensorflow()
  from pretrain import arrays
  from pretrain.config import PretrainingConfig
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
  from comparison.config import TAGGING_TASKS
  from finetune import arrays as ft_arrays
  from finetune import task_builder
  from finetune.config import FinetuningConfig
  from util.config import apply_overrides
  from util.config import load_hparams
  from util.errors import UserError
  from util.tokenization import load_tokenizer
  given = load_hparams(args.finetune_hparams) if args.finetune_hparams else {}
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
    if name in TAGGING_TASKS:
      if not args.tagging_dir:
        raise UserError(f"{name} needs --tagging-dir (a folder with "
                        f"{name}/train.txt and dev.txt)")
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


@main_guard
def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                              allow_abbrev=False)
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
  args = p.parse_args(argv)
  if not args.wheels and not (args.data_dir or args.pretrain_tfrecords or
                              args.glue_dir):
    p.error("nothing to do: give --wheels, --data-dir and/or --glue-dir")
  if args.glue_dir and not args.vocab_file:
    p.error("--glue-dir needs --vocab-file (the pretraining vocabulary)")
  os.chdir(ROOT)
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


if __name__ == "__main__":
  sys.exit(main())
