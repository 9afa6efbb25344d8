"""Every results folder recomputes from what is committed (issue 51):
results/recompute.json names each folder's command (run from the
repository root, $DATA the shared data folder, OUT a fresh folder), which must be the one results/README.md prints and must give the
committed results.json; every other folder is listed with the reason it
cannot be recomputed, which the README says too."""

import json
import os
import shlex
import subprocess

import pytest

import collect_gpu_slot
from tests import parity_scripts
from tests.shared_data import SHARED
from util.place_check import outside_places

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "results")
with open(os.path.join(RESULTS, "recompute.json")) as f:
  LISTED = json.load(f)
def _parity_main(argv):
  return parity_scripts.load("collect_parity").main(argv)


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
  argv = [str(tmp_path) if a == "OUT" else a.replace("$DATA", SHARED)
          for a in argv[2:]]
  assert SCRIPTS[shlex.split(LISTED["recomputable"][folder])[1]](argv) == 0
  committed = os.path.join(RESULTS, folder, "results.json")
  if os.path.exists(committed):
    assert _numbers(tmp_path / "results.json") == _numbers(committed)
  else:  # a table only (original_parity): the same text
    with open(os.path.join(RESULTS, folder, "results.md")) as f:
      assert (tmp_path / "results.md").read_text() == f.read()


def _committed_text(*folders):
  """Each committed file under `folders` that is text (JSON, logs,
  scripts, Markdown...), by its path relative to the root."""
  listed = subprocess.run(["git", "ls-files", "-z", *folders], cwd=ROOT,
                          capture_output=True)
  paths = listed.stdout.decode().split("\0") if listed.returncode == 0 else [
      os.path.relpath(os.path.join(d, n), ROOT)  # not a clone: every file
      for folder in folders for d, _, names in os.walk(
          os.path.join(ROOT, folder)) for n in names]
  for path in filter(None, paths):
    with open(os.path.join(ROOT, path), "rb") as f:
      data = f.read()
    if b"\0" not in data:
      yield path, data.decode("utf-8")


def test_the_place_check_knows_a_place_from_prose():
  named = ["/work/shared/data/glue", "/tmp/tmpx29lg_71/hf.json",
           "/opt/torch/.venv/lib/python3.12/x.py", "~/data", "/root",
           "--out=/scratch/a", "ok; ../logs/slot/2", "runs/../../x"]
  for text in named:
    assert outside_places(text), text
  prose = ["1/4 of the budget", "seq/s and/or ms/step", "https://github.com/"
           "google-research/electra/issues/37", "$DATA/glue", "$TMPDIR/fill",
           "<mirror>/electra", "runs/comparison_small/data/x", "...",
           "#!/bin/bash\n", "(`.../ckpt-5000`)", "0.5/1.0", "$(dirname $0)/../.."]
  for text in prose:
    assert not outside_places(text), text
  # A Markdown link is read from its own folder, a command from the root.
  assert not outside_places("[a](../docs/a.md)", "results", markdown=True)
  assert outside_places("[a](../../a.md)", "results", markdown=True)
  assert outside_places("run ../docs/x.sh", "results", markdown=True)


def test_no_record_names_a_place_outside_the_repository():
  """A recompute on a fresh clone reads these: paths are relative to the
  repository root (util/paths.py) or a named place ($OUT, $TMPDIR, $DATA,
  $VENV, $WORK), in every committed text file, JSON or not."""
  found = []
  for path, text in _committed_text("results", "benchmarks/records"):
    found += [f"{path}: {p}" for p in outside_places(
        text, os.path.dirname(path), markdown=path.endswith(".md"))]
  assert not found, found
