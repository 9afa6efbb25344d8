"""collect_gpu_slot.py's work: a slot's returned folder scored on the CPU,
its records and dev outputs copied beside the report."""

import argparse
import json
import os
import shutil

from comparison import report
from comparison import slot_report
from finetune import arrays as ft_arrays
from util import storage
from util.errors import UserError

RECORDS = ("slot.json", "slot.log")


def parse_args(argv, description=None):
  """argv parsed; `description` is the script's (its --help)."""
  p = argparse.ArgumentParser(description=description, allow_abbrev=False)
  p.add_argument("files_at", help="the slot run's returned folder, or a "
                 "folder this script wrote (scored again)")
  p.add_argument("--output-dir", required=True)
  p.add_argument("--finetune-data", default="",
                 help="default: FILES_AT's finetune.json when it has one, "
                 "else .slot_data/finetune")
  p.add_argument("--glue-dir", default="",
                 help="default: the export's raw_data_dir")
  p.add_argument("--vocab-file", default="",
                 help="default: the export's vocab_file")
  p.add_argument("--pretrain-files", default="",
                 help="the returned folder of the run that pretrained the "
                 "weights, when FILES_AT only fine-tuned them (--pretrained)")
  return p.parse_args(argv)


def collect(args):
  """results.json, results.md and the plots in --output-dir, with the
  records that score them again; prints the table, returns 0."""
  slot_name, pretrain_path, meta_path = _inputs(args)
  meta = json.loads(storage.read_text(meta_path))
  record = (json.loads(storage.read_text(pretrain_path)) if pretrain_path
            else None)
  results = slot_report.collect(args.files_at, meta, args.glue_dir,
                                args.vocab_file, record, slot_name)
  out = args.output_dir
  os.makedirs(out, exist_ok=True)
  # The records and the dev outputs, so that the table can be scored again.
  copies = [(os.path.join(args.files_at, n), n) for n in RECORDS + (
      ft_arrays.OUTPUTS,)]
  if pretrain_path:  # two runs: each one's records, named by phase
    folders = {"pretrain": os.path.dirname(pretrain_path),
               "finetune": args.files_at}
    copies = [(os.path.join(args.files_at, ft_arrays.OUTPUTS),
               ft_arrays.OUTPUTS)] + [
        (os.path.join(folders[phase], name if slot_name == "slot.json"
                      else f"{phase}_{name}"), f"{phase}_{name}")
        for phase in folders for name in RECORDS]
  for source, name in copies + [(meta_path, "finetune.json")]:
    _copy(source, os.path.join(out, name))
  with open(os.path.join(out, "results.json"), "w") as f:
    json.dump(results, f, indent=2)
  report.plot(results, os.path.join(out, "glue_vs_flops.png"),
              os.path.join(out, "pretrain_curves.png"))
  text = slot_report.markdown(results)
  with open(os.path.join(out, "results.md"), "w") as f:
    f.write(text)
  print(text)
  return 0


def _inputs(args):
  """(fine-tuning record name, pretraining record path or "", fine-tuning
  meta path): FILES_AT is a slot's returned folder, or one `collect`
  wrote (it holds finetune.json, and records named by phase when two runs
  made it), scored again from its committed records."""
  def at(name):
    return os.path.join(args.files_at, name)
  two_runs = storage.exists(at("finetune_slot.json"))
  pretrain = (at("pretrain_slot.json") if two_runs else
              os.path.join(args.pretrain_files, "slot.json")
              if args.pretrain_files else "")
  meta = (os.path.join(args.finetune_data, "finetune.json")
          if args.finetune_data else at("finetune.json")
          if storage.exists(at("finetune.json")) else
          ".slot_data/finetune/finetune.json")
  for path, why in ((pretrain, "the pretraining run's record"),
                    (meta, "the fine-tuning arrays the slot ran on "
                     "(prepare_gpu_slot.py --glue-dir)")):
    if path and not storage.exists(path):
      raise UserError(f"{path} not found: {why}")
  return ("finetune_slot.json" if two_runs else "slot.json"), pretrain, meta


def _copy(source, target):
  if os.path.exists(source) and not (
      os.path.exists(target) and os.path.samefile(source, target)):
    shutil.copyfile(source, target)
