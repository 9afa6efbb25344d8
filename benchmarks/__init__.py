"""Benchmark scripts (run directly; not collected by pytest)."""

import contextlib
import shutil
import tempfile


def step_parser(doc):
  """An argparse parser with the one-step settings the step benchmarks
  share: --size, --batch, --seq-len, --vocab-size, --precision."""
  import argparse
  p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
  p.add_argument("--size", default="small")
  p.add_argument("--batch", type=int, default=32)
  p.add_argument("--seq-len", type=int, default=128)
  p.add_argument("--vocab-size", type=int, default=30522)
  p.add_argument("--precision", default="bfloat16")
  return p


@contextlib.contextmanager
def scratch(prefix):
  """A temporary folder for one benchmark run, removed after it; the Keras
  dtype policy the run set is reset, so a caller's process keeps none."""
  path = tempfile.mkdtemp(prefix=prefix)
  try:
    yield path
  finally:
    import keras
    keras.mixed_precision.set_dtype_policy("float32")
    shutil.rmtree(path, ignore_errors=True)


def write_json(path, result):
  """`--json PATH`: the benchmark's result as JSON (nothing when no path)."""
  if path:
    import json
    with open(path, "w") as f:
      json.dump(result, f, indent=2)
    print(f"wrote {path}", flush=True)
