"""Imports follow the layers (issue 52): product code depends on nothing
in benchmarks/ or tests/, and interop/ on nothing in loading/ above it.
A failure lists each offending file and import."""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("model", "pretrain", "finetune", "scoring", "interop", "loading",
            "comparison", "slot", "training", "dataset", "util")
FORBIDDEN = ("benchmarks", "tests")


def product_files():
  for name in sorted(os.listdir(ROOT)):
    if name.endswith(".py"):
      yield name
  for package in PACKAGES:
    for folder, _, files in os.walk(os.path.join(ROOT, package)):
      for f in sorted(files):
        if f.endswith(".py"):
          yield os.path.relpath(os.path.join(folder, f), ROOT)


def imported_modules(path):
  with open(os.path.join(ROOT, path), encoding="utf-8") as f:
    tree = ast.parse(f.read())
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      yield from (a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      yield node.module


def test_product_code_imports_no_benchmark_or_test():
  found = [f"{path}: {module}" for path in product_files()
           for module in imported_modules(path)
           if module.split(".")[0] in FORBIDDEN]
  assert not found, found


def test_interop_imports_nothing_from_loading():
  """loading/ is the layer above interop/ (the README's layout): it finds
  and restores runs, then hands them to interop's exporters."""
  found = [f"{path}: {module}" for path in product_files()
           if path.startswith("interop" + os.sep)
           for module in imported_modules(path)
           if module.split(".")[0] == "loading"]
  assert not found, found
