"""util/paths.py: a record's paths written so a fresh clone reads them
(relative to the repository root, or a named place), and read back whole
from any working folder."""

import os

from util import paths


def test_paths_become_relative_or_named_and_read_back():
  root = "/work/repo"
  record = {"command": ["run.py", "--out", "/root/out/x", "--n", "3"],
            "data": "/work/shared/data/glue", "here": "/work/repo/runs/a",
            "weights": "/tmp/slot_weights/electra", "url": "gs://b/c",
            "rel": "runs/b", "n": 3}
  out = paths.portable(record, {"$OUT": "/root/out", "$TMPDIR": "/tmp"},
                       root=root)
  assert out == {"command": ["run.py", "--out", "$OUT/x", "--n", "3"],
                 "data": "$DATA/glue", "here": "runs/a",
                 "weights": "$TMPDIR/slot_weights/electra", "url": "gs://b/c",
                 "rel": "runs/b", "n": 3}
  assert paths.located(out["data"], root) == "/work/shared/data/glue"
  assert paths.located(out["here"], root) == "/work/repo/runs/a"
  assert paths.located("gs://b/c", root) == "gs://b/c"
  assert paths.located("", root) == ""


def test_a_place_matches_whole_folder_names_only():
  # /tmpfiles is not under /tmp.
  assert paths.portable("/tmpfiles/a", {"$TMPDIR": "/tmp"}, root="/") == (
      "tmpfiles/a")


def test_located_does_not_depend_on_the_working_folder(tmp_path,
                                                       monkeypatch):
  monkeypatch.chdir(tmp_path)
  assert paths.located("results/x") == os.path.join(paths.ROOT, "results",
                                                    "x")
