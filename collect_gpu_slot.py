"""Scores what a GPU slot returned (docs/gpu_slot.md) on the CPU and writes
the comparison's results.json, results.md and the slot's records:

  python collect_gpu_slot.py FILES_AT --output-dir results/comparison_gpu_small
      [--finetune-data .slot_data/finetune] [--glue-dir DIR] [--vocab-file V]

FILES_AT is the run's returned folder (slot.json, slot.log,
finetune_outputs.npz); the fine-tuning arrays' finetune.json says which
tasks, limits and vocabulary the dev rows were featurized with, and the
same featurization here feeds each task's own scorer
(comparison/slot_report.py). Weights are not copied (no checkpoints in
results/).
"""

import argparse
import json
import os
import shutil
import sys

from comparison import slot_report
from util import storage
from util.errors import UserError
from util.errors import main_guard

RECORDS = ("slot.json", "slot.log")


@main_guard
def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                              allow_abbrev=False)
  p.add_argument("files_at", help="the slot run's returned folder")
  p.add_argument("--output-dir", required=True)
  p.add_argument("--finetune-data", default=".slot_data/finetune")
  p.add_argument("--glue-dir", default="",
                 help="default: the export's raw_data_dir")
  p.add_argument("--vocab-file", default="",
                 help="default: the export's vocab_file")
  p.add_argument("--pretrain-files", default="",
                 help="the returned folder of the run that pretrained the "
                 "weights, when FILES_AT only fine-tuned them (--pretrained)")
  args = p.parse_args(argv)
  meta_path = os.path.join(args.finetune_data, "finetune.json")
  if not storage.exists(meta_path):
    raise UserError(f"{meta_path} not found: the fine-tuning arrays the "
                    "slot ran on (prepare_gpu_slot.py --glue-dir)")
  meta = json.loads(storage.read_text(meta_path))
  record = None
  if args.pretrain_files:
    path = os.path.join(args.pretrain_files, "slot.json")
    if not storage.exists(path):
      raise UserError(f"{path} not found (--pretrain-files)")
    record = json.loads(storage.read_text(path))
  results = slot_report.collect(args.files_at, meta, args.glue_dir,
                                args.vocab_file, record)
  os.makedirs(args.output_dir, exist_ok=True)
  copies = [(args.files_at, name, name) for name in RECORDS]
  if args.pretrain_files:  # two runs: each one's records, named by phase
    copies = [(folder, name, f"{phase}_{name}") for folder, phase in (
        (args.pretrain_files, "pretrain"), (args.files_at, "finetune"))
              for name in RECORDS]
  for folder, name, target in copies:
    source = os.path.join(folder, name)
    if os.path.exists(source):
      shutil.copyfile(source, os.path.join(args.output_dir, target))
  shutil.copyfile(meta_path, os.path.join(args.output_dir, "finetune.json"))
  with open(os.path.join(args.output_dir, "results.json"), "w") as f:
    json.dump(results, f, indent=2)
  text = slot_report.markdown(results)
  with open(os.path.join(args.output_dir, "results.md"), "w") as f:
    f.write(text)
  print(text)
  return 0


if __name__ == "__main__":
  sys.exit(main())
