"""Benchmark scripts (run directly; not collected by pytest)."""

import contextlib
import os
import shutil
import sys
import tempfile

# PyTorch's OpenMP wait policy, read once when torch loads libgomp.
# "default": unset, libgomp's own (spin briefly at a barrier, then sleep):
# transformers' best on a quiet machine (Small's 872 SST-2 dev rows, bf16,
# AMD EPYC: 0.83 s, against 1.04 s ACTIVE and 1.27 s PASSIVE). PASSIVE:
# its best on a loaded machine (more runnable threads than cores), where
# spinning threads make its steps several times slower.
OMP_WAIT_POLICIES = ("default", "passive", "active")


def set_omp_wait_policy(policy):
  """Sets OMP_WAIT_POLICY for torch, before it loads; returns what torch
  will run with (the environment's, if the user set one)."""
  if policy not in OMP_WAIT_POLICIES:
    raise SystemExit(f"--omp-wait-policy must be one of {OMP_WAIT_POLICIES}")
  if "torch" in sys.modules:
    raise SystemExit("set the OpenMP wait policy before torch is imported")
  if "OMP_WAIT_POLICY" not in os.environ and policy != "default":
    os.environ["OMP_WAIT_POLICY"] = policy.upper()
  return os.environ.get("OMP_WAIT_POLICY", "default")


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
