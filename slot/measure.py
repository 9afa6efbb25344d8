"""The PyTorch baseline: transformers' ELECTRA step, timed beside ours."""

import json
import os
import subprocess
import sys
import tempfile

from slot import ROOT


def hf_baseline(args, clock):
  """benchmarks/hf_electra_step.py in a subprocess (JAX on its CPU)."""
  if not args.hf_steps:
    return {"skipped": "--hf-steps 0"}
  with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "hf.json")
    command = [sys.executable, os.path.join(ROOT, "benchmarks",
                                            "hf_electra_step.py"),
               "--arrays", args.data, "--batch", str(args.batch),
               "--steps", str(args.hf_steps), "--json", out,
               "--hparams", os.path.join(ROOT, "configs",
                                         f"electra_{args.size}.json")]
    for spec in args.hparams:
      command += ["--hparams", spec]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    clock.log("transformers' PyTorch ELECTRA step: " +
              " ".join(command[1:]))
    try:
      done = subprocess.run(command, env=env, timeout=240, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except subprocess.TimeoutExpired:
      return {"error": "timed out after 240 s"}
    print(done.stdout[-3000:], end="", flush=True)
    if done.returncode or not os.path.exists(out):
      lines = done.stdout.strip().splitlines() or ["no output"]
      return {"error": f"exit {done.returncode}: {lines[-1][:300]}"}
    with open(out) as f:
      return json.load(f)
