"""Every results folder recomputes from what is committed (issue 51):
results/recompute.json names each folder's command (run from the
repository root, the shared data at ../shared/data as on CI, OUT a fresh
folder), which must be the one results/README.md prints and must give the
committed results.json; every other folder is listed with the reason it
cannot be recomputed, which the README says too."""

import importlib.util
import json
import os
import shlex

import pytest

import collect_gpu_slot
from tests.shared_data import SHARED

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "results")
with open(os.path.join(RESULTS, "recompute.json")) as f:
  LISTED = json.load(f)
def _parity_main(argv):
  path = os.path.join(ROOT, "benchmarks", "original_parity",
                      "collect_parity.py")
  spec = importlib.util.spec_from_file_location("collect_parity", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.main(argv)


SCRIPTS = {"collect_gpu_slot.py": collect_gpu_slot.main,
           "benchmarks/original_parity/collect_parity.py": _parity_main}


def _numbers(path):
  with open(path) as f:  # less the line naming the machine that scored it
    return {k: v for k, v in json.load(f).items() if k != "machine"}


def test_every_folder_is_listed_and_the_readme_says_so():
  folders = {f for f in os.listdir(RESULTS)
             if os.path.isdir(os.path.join(RESULTS, f))}
  assert folders == set(LISTED["recomputable"]) | set(
      LISTED["not_recomputable"])
  with open(os.path.join(RESULTS, "README.md")) as f:
    readme = " ".join(f.read().split())
  for command in LISTED["recomputable"].values():
    assert command in readme
  for folder in LISTED["not_recomputable"]:
    assert f"`results/{folder}/` cannot be recomputed" in readme


@pytest.mark.parametrize("folder", sorted(LISTED["recomputable"]))
def test_the_command_gives_the_committed_numbers(folder, tmp_path,
                                                 monkeypatch):
  monkeypatch.chdir(ROOT)
  argv = shlex.split(LISTED["recomputable"][folder])
  assert argv[0] == "python"
  data = os.path.join(ROOT, "..", "shared", "data")
  argv = [str(tmp_path) if a == "OUT" else
          a.replace("../shared/data", SHARED) if not os.path.isdir(data)
          else a for a in argv[2:]]
  assert SCRIPTS[shlex.split(LISTED["recomputable"][folder])[1]](argv) == 0
  committed = os.path.join(RESULTS, folder, "results.json")
  if os.path.exists(committed):
    assert _numbers(tmp_path / "results.json") == _numbers(committed)
  else:  # a table only (original_parity): the same text
    with open(os.path.join(RESULTS, folder, "results.md")) as f:
      assert (tmp_path / "results.md").read_text() == f.read()


def _absolute_paths(value, where=""):
  if isinstance(value, dict):
    for k, v in value.items():
      yield from _absolute_paths(v, f"{where}/{k}")
  elif isinstance(value, list):
    for i, v in enumerate(value):
      yield from _absolute_paths(v, f"{where}[{i}]")
  elif isinstance(value, str) and os.path.isabs(value):
    yield f"{where}: {value}"


def test_no_record_names_a_path_of_the_machine_that_made_it():
  """A recompute on a fresh clone reads these: paths are relative to the
  repository root (util/paths.py) or a named place ($OUT, $TMPDIR)."""
  found = []
  for folder, _, files in os.walk(RESULTS):
    for name in files:
      if name.endswith(".json"):
        path = os.path.join(folder, name)
        with open(path) as f:
          found += [f"{os.path.relpath(path, ROOT)}{p}"
                    for p in _absolute_paths(json.load(f))]
  assert not found, found
