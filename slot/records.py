"""The record folders collect_gpu_slot.py scores, checked before anything
is computed (issue 54): a folder it wrote must hold records/1..N with no
gap and the very files its results.json lists (by SHA-256), and no two
records may be copies of one another, so that no trial is counted twice
and none is silently lost."""

import hashlib
import json
import os

from finetune import arrays as ft_arrays
from util import outputs
from util import storage
from util import text_files
from util.errors import UserError

FILES = ("slot.json", "slot.log", ft_arrays.OUTPUTS)
RECORDS_DIR = "records"
# What collect_gpu_slot.py writes in --output-dir, besides records/.
WRITTEN = ("results.json", "results.md", "glue_vs_flops.png",
           "pretrain_curves.png", "finetune.json")


def digest(data):
  return hashlib.sha256(data).hexdigest()


def manifest(folders):
  """{number: {file: sha256}} of the records as written (1-based)."""
  return {str(k): {name: digest(storage.read_bytes(os.path.join(f, name)))
                   for name in FILES
                   if storage.exists(os.path.join(f, name))}
          for k, f in enumerate(folders, 1)}


def folders_of(files_at):
  """A returned folder (its slot.json), or the numbered record folders of
  one this script wrote, checked against its results.json."""
  written = os.path.join(files_at, RECORDS_DIR)
  if not storage.isdir(written):
    if not storage.exists(os.path.join(files_at, "slot.json")):
      raise UserError(f"{files_at} holds no slot.json: not a slot's "
                      "returned folder nor one collect_gpu_slot.py wrote")
    return [files_at]
  numbers = sorted(int(k) for k in storage.listdir(written) if k.isdigit())
  listed = _listed(files_at)
  expected = max(numbers + [len(listed)], default=0)
  missing = [k for k in range(1, expected + 1) if k not in numbers]
  if missing:
    raise UserError(f"{written}/{missing[0]} is missing (records/ holds "
                    f"{', '.join(map(str, numbers)) or 'none'}): its trials "
                    "would be lost; restore it from git")
  folders = [os.path.join(written, str(k)) for k in numbers]
  for k, folder in enumerate(folders, 1):
    for name, sha in listed.get(str(k), {}).items():
      path = os.path.join(folder, name)
      if not storage.exists(path):
        raise UserError(f"{path} is missing (results.json lists it)")
      if digest(storage.read_bytes(path)) != sha:
        raise UserError(f"{path} is not the file results.json lists "
                        "(truncated or changed): restore it from git")
  return folders


def _listed(files_at):
  """The records a results.json of this script lists ({} before lists)."""
  path = os.path.join(files_at, "results.json")
  if not storage.exists(path):
    return {}
  results = text_files.read_json(path)
  return results.get("records", {}) if isinstance(results, dict) else {}


def check_distinct(folders):
  """Refuses two records whose slot.json or dev outputs are one file
  copied: their trials would count twice."""
  seen = {}
  for folder in folders:
    for name in ("slot.json", ft_arrays.OUTPUTS):
      path = os.path.join(folder, name)
      if not storage.exists(path):
        continue
      sha = digest(storage.read_bytes(path))
      if sha in seen:
        raise UserError(f"{path} is a copy of {seen[sha]}: a record given "
                        "twice would count its trials twice")
      seen[sha] = path


def check_output(out, folders, overwrite=False):
  """Before any scoring: --output-dir is a folder that can be written,
  and its results (a comparison collect_gpu_slot.py wrote) are replaced
  only when every record they came from is among `folders` (scored again,
  or more records added), or with `overwrite`."""
  outputs.check_output_dir(out, "--output-dir")
  if overwrite or not storage.isdir(out):
    return
  if storage.isdir(os.path.join(out, RECORDS_DIR)):
    given = [digests for digests in manifest(folders).values()]
    for folder in folders_of(out):
      if manifest([folder])["1"] not in given:
        raise UserError(
            f"{out} holds the results of other records ({folder} is not "
            "among the folders given): give it among them to add to it, "
            "another --output-dir, or --overwrite to replace it (nothing "
            "was written)")
    return
  taken = [n for n in WRITTEN if storage.exists(os.path.join(out, n))]
  if taken:
    raise UserError(f"{os.path.join(out, taken[0])} already exists and no "
                    f"{RECORDS_DIR}/ says what it came from: pass "
                    "--overwrite to replace it, or another --output-dir "
                    "(nothing was written)")


def remove_stale(out, count):
  """Removes out's records/K past the `count` just written (left by the
  results --overwrite replaces), so none stands beside them unscored."""
  written = os.path.join(out, RECORDS_DIR)
  if storage.isdir(written):
    for k in storage.listdir(written):
      k = k.rstrip("/")
      if k.isdigit() and int(k) > count:
        storage.rmtree(os.path.join(written, k))
