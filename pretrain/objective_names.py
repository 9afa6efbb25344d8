"""The objective names a flag may give, known without importing Keras.

A script checks its --objectives before the seconds (on a loaded machine,
minutes) of TensorFlow's import: the registry's names are read from the
`NAMES = (...)` of each class in pretrain/objectives/ (a new file counts,
as it does for the registry), beside the configs/<name>_<size>.json
presets and the aliases.
"""

import ast
import os

from util.errors import UserError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALIASES = {"bert": "mlm"}


def registered():
  """The `objective` values the registry's classes declare."""
  names = set()
  folder = os.path.join(ROOT, "pretrain", "objectives")
  for file in sorted(os.listdir(folder)):
    if not file.endswith(".py"):
      continue
    with open(os.path.join(folder, file), encoding="utf-8") as f:
      tree = ast.parse(f.read())
    for node in ast.walk(tree):
      if (isinstance(node, ast.Assign) and len(node.targets) == 1 and
          getattr(node.targets[0], "id", "") == "NAMES" and
          isinstance(node.value, ast.Tuple)):
        names.update(e.value for e in node.value.elts
                     if isinstance(e, ast.Constant))
  return names


def presets(folder=os.path.join(ROOT, "configs")):
  """The <name> of every configs/<name>_<size>.json."""
  return {f.rsplit("_", 1)[0] for f in os.listdir(folder)
          if f.endswith(".json") and "_" in f}


def known():
  return registered() | presets() | set(ALIASES)


def check(names, flag="--objectives"):
  """Raises UserError naming the first unknown name, with the choices."""
  choices = known()
  for name in names:
    if name not in choices:
      raise UserError(f"unknown objective '{name}' in {flag} (choose from "
                      f"{', '.join(sorted(choices))})")
