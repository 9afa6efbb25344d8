"""How the scripts end and how a fresh Python process runs, checked the
same way by the hostile-input, fine-tuning and export tests."""

import os
import re
import stat
import subprocess
import sys

import pytest

import run_finetuning

# Run with -S: our repo is pip-installed in editable mode, and its .pth
# finder would make `model` importable anywhere; site-packages are added
# back by hand, without their .pth files. It imports TensorFlow, then
# waits on stdin for the names of the exports.
WITHOUT_OUR_CODE = """
import json, sys
sys.path += json.loads(sys.argv[1])
for ours in ("model", "finetune"):
  try:
    __import__(ours)
    sys.exit("our code is importable: " + ours)
  except ModuleNotFoundError:
    pass
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: registers the tokenizer ops
"""


def snapshot(root):
  """{path: what it is}: bytes of regular files, targets of links, and
  the kind of anything else; nothing is followed or opened but files."""
  out = {}
  for folder, dirs, files in os.walk(root):
    for name in dirs + files:
      path = os.path.join(folder, name)
      mode = os.lstat(path).st_mode
      if stat.S_ISLNK(mode):
        out[path] = ("link", os.readlink(path))
      elif stat.S_ISREG(mode):
        with open(path, "rb") as f:
          out[path] = ("file", f.read())
      elif not stat.S_ISDIR(mode):
        out[path] = ("special", stat.S_IFMT(mode))
  return out


def refused(main, argv, match, capsys, roots):
  """Runs main(argv) in-process: exit 2, one `error:` line matching
  `match`, no traceback, every file under `roots` untouched."""
  before = [snapshot(r) for r in roots]
  with pytest.raises(SystemExit) as info:
    main(argv)
  out, err = capsys.readouterr()
  assert info.value.code == 2, (out, err)
  assert "Traceback" not in err, err
  errors = [l for l in err.splitlines() if l.startswith("error:")]
  assert len(errors) == 1 and err.strip().splitlines()[-1] == errors[0], err
  assert re.search(match, errors[0]), errors[0]
  for root, old in zip(roots, before):
    new = snapshot(root)
    changed = [p for p in old if new.get(p) != old[p]]
    assert not changed, changed
    # And nothing half-written was left behind.
    assert not [p for p in new if ".incomplete" in p], new.keys()
  return out, errors[0]


def error_line(main, argv, capsys):
  """A script's main(argv) ends in exactly one `error:` line, exit 2: the
  line."""
  with pytest.raises(SystemExit) as info:
    main(argv)
  assert info.value.code == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and err[0].startswith("error: "), err
  return err[0]


def expect_error(capsys, argv, match):
  """run_finetuning.py's one error line holds `match`."""
  line = error_line(run_finetuning.main, argv, capsys)
  assert match in line, line


def _python(script, *args, cwd, isolated=False):
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  flags = ["-S"] if isolated else []
  return subprocess.Popen([sys.executable, *flags, "-c", script, *args],
                          cwd=cwd, env=env, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)


def _wait(process, stdin=None):
  output, _ = process.communicate(stdin, timeout=300)
  assert process.returncode == 0, output[-3000:]
  return output
