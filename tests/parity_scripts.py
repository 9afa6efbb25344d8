"""benchmarks/original_parity/'s scripts (not a package: run as scripts),
loaded as modules by the tests that call into them."""

import importlib.util
import os

HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))), "benchmarks", "original_parity")


def load(name):
  """The module of benchmarks/original_parity/NAME.py."""
  spec = importlib.util.spec_from_file_location(
      name, os.path.join(HERE, name + ".py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module
