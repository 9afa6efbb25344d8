"""collect_gpu_slot.py's work: one or more slots' returned folders scored
together on the CPU, each one's records and dev outputs copied beside the
report (records/1, records/2, ... in the order given)."""

import argparse
import json
import os

from comparison import report
from comparison import slot_report
from finetune import arrays as ft_arrays
from util import storage
from util.errors import UserError

RECORDS = ("slot.json", "slot.log", ft_arrays.OUTPUTS)
RECORDS_DIR = "records"


def parse_args(argv, description=None):
  """argv parsed; `description` is the script's (its --help)."""
  p = argparse.ArgumentParser(description=description, allow_abbrev=False)
  p.add_argument("files_at", nargs="+",
                 help="a slot run's returned folder, or a folder this script "
                 "wrote (scored again); several: their runs together, a "
                 "later folder's trial replacing an earlier one's of the same "
                 "model, task and seed")
  p.add_argument("--output-dir", required=True)
  p.add_argument("--finetune-data", default="",
                 help="default: FILES_AT's finetune.json when it has one, "
                 "else .slot_data/finetune")
  p.add_argument("--glue-dir", default="",
                 help="default: the export's raw_data_dir")
  p.add_argument("--vocab-file", default="",
                 help="default: the export's vocab_file")
  return p.parse_args(argv)


def collect(args):
  """results.json, results.md and the plots in --output-dir, with the
  records that score them again; prints the table, returns 0."""
  folders = [f for at in args.files_at for f in _record_folders(at)]
  meta_path = _meta_path(args)
  meta = json.loads(storage.read_text(meta_path))
  results = slot_report.collect(folders, meta, args.glue_dir,
                                args.vocab_file)
  out = args.output_dir
  # Everything read before anything is written: the output may be one of
  # the inputs (scored again in place).
  copies = {os.path.join(out, "finetune.json"): storage.read_bytes(meta_path)}
  for k, folder in enumerate(folders, 1):
    for name in RECORDS:
      if storage.exists(os.path.join(folder, name)):
        copies[os.path.join(out, RECORDS_DIR, str(k), name)] = (
            storage.read_bytes(os.path.join(folder, name)))
  for path, data in copies.items():
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
      f.write(data)
  with open(os.path.join(out, "results.json"), "w") as f:
    json.dump(results, f, indent=2)
  report.plot(results, os.path.join(out, "glue_vs_flops.png"),
              os.path.join(out, "pretrain_curves.png"))
  text = slot_report.markdown(results)
  with open(os.path.join(out, "results.md"), "w") as f:
    f.write(text)
  print(text)
  return 0


def _record_folders(files_at):
  """A returned folder (its slot.json), or the numbered record folders of
  one this script wrote."""
  written = os.path.join(files_at, RECORDS_DIR)
  if storage.isdir(written):
    return [os.path.join(written, k) for k in sorted(
        (k for k in storage.listdir(written) if k.isdigit()), key=int)]
  if not storage.exists(os.path.join(files_at, "slot.json")):
    raise UserError(f"{files_at} holds no slot.json: not a slot's returned "
                    f"folder nor one collect_gpu_slot.py wrote")
  return [files_at]


def _meta_path(args):
  """The fine-tuning arrays' finetune.json the slots ran on."""
  written = [os.path.join(at, "finetune.json") for at in args.files_at
             if storage.exists(os.path.join(at, "finetune.json"))]
  path = (os.path.join(args.finetune_data, "finetune.json")
          if args.finetune_data else written[0] if written else
          ".slot_data/finetune/finetune.json")
  if not storage.exists(path):
    raise UserError(f"{path} not found: the fine-tuning arrays the slot ran "
                    "on (prepare_gpu_slot.py --glue-dir)")
  return path
