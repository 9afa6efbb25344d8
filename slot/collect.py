"""collect_gpu_slot.py's work: one or more slots' returned folders scored
together on the CPU, each one's records and dev outputs copied beside the
report (records/1, records/2, ... in the order given)."""

import json
import os
import tempfile

from comparison import report
from comparison import slot_report
from comparison.config import TAGGING_TASKS
from finetune import data_layout
from slot import records
from util import storage
from util import text_files
from util.config import ArgumentParser
from util.config import parse_args as parse_known
from util.errors import UserError


def parse_args(argv, description=None):
  """argv parsed; `description` is the script's (its --help)."""
  p = ArgumentParser(description=description)
  p.add_argument("files_at", nargs="+",
                 help="a slot run's returned folder, or a folder this script "
                 "wrote (scored again); several: their runs together, a "
                 "later folder's trial replacing an earlier one's of the same "
                 "model, task and seed")
  p.add_argument("--output-dir", required=True)
  p.add_argument("--overwrite", action="store_true",
                 help="replace --output-dir's results though they came "
                 "from records not among FILES_AT")
  p.add_argument("--finetune-data", default="",
                 help="default: FILES_AT's finetune.json when it has one, "
                 "else .slot_data/finetune")
  p.add_argument("--glue-dir", default="",
                 help="the GLUE tasks' folders here (default: where "
                 "finetune.json says they were)")
  p.add_argument("--conll-dir", default="",
                 help="CoNLL-2000's train.txt and test.txt here, for chunk "
                 "and pos (default: where finetune.json says they were)")
  p.add_argument("--vocab-file", default="",
                 help="default: the export's vocab_file")
  return parse_known(p, argv)


def collect(args):
  """results.json, results.md and the plots in --output-dir, with the
  records that score them again; prints the table, returns 0."""
  folders = [f for at in args.files_at for f in records.folders_of(at)]
  records.check_distinct(folders)
  records.check_output(args.output_dir, folders, args.overwrite)
  meta_path = _meta_path(args)
  meta = text_files.read_json(meta_path)
  with tempfile.TemporaryDirectory() as tagging_dir:
    if args.conll_dir:
      _check_conll(args.conll_dir)
      data_layout.link_conll(args.conll_dir, tagging_dir, TAGGING_TASKS)
    results = slot_report.collect(
        folders, meta, args.glue_dir, args.vocab_file,
        tagging_dir if args.conll_dir else "")
  results["records"] = records.manifest(folders)
  out = args.output_dir
  # Everything read before anything is written: the output may be one of
  # the inputs (scored again in place).
  copies = {os.path.join(out, "finetune.json"): storage.read_bytes(meta_path)}
  for k, folder in enumerate(folders, 1):
    for name in records.FILES:
      if storage.exists(os.path.join(folder, name)):
        copies[os.path.join(out, records.RECORDS_DIR, str(k), name)] = (
            storage.read_bytes(os.path.join(folder, name)))
  records.remove_stale(out, len(folders))  # --overwrite: none of the old
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


def _check_conll(conll_dir):
  for name in ("train.txt", "test.txt"):
    if not storage.exists(os.path.join(conll_dir, name)):
      raise UserError(f"--conll-dir {conll_dir} has no {name} (CoNLL-2000 "
                      "as distributed)")


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
