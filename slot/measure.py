"""The PyTorch baseline, and the fine-tuning steps compiled at once."""

from concurrent import futures
import json
import os
import subprocess
import sys
import tempfile
import time

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


def compile_all(trainers, chunk, clock):
  """Each trainer's train chunk and eval step, traced here in turn and
  compiled in parallel threads (XLA compiles without the GIL); on any
  failure the steps compile on their first call instead."""
  start = time.time()
  lowered = {(name, kind): step for name, trainer in trainers.items()
             for kind, step in trainer.lower(chunk).items()}
  traced = time.time() - start

  def compile_one(step):
    began = time.time()
    return step.compile(), time.time() - began

  try:
    with futures.ThreadPoolExecutor(len(lowered)) as pool:
      done = dict(zip(lowered, pool.map(compile_one, lowered.values())))
  except Exception as e:  # pylint: disable=broad-except
    clock.log(f"parallel compile failed ({type(e).__name__}: "
              f"{str(e)[:200]}); compiling on first use")
    return {"error": str(e)[:500], "trace_s": traced}
  for name, trainer in trainers.items():
    trainer.install(chunk, {kind: done[(name, kind)][0]
                            for kind in ("train", "eval")})
  seconds = {f"{name}_{kind}": round(t, 1)
             for (name, kind), (_, t) in done.items()}
  wall = time.time() - start
  clock.log(f"traced in {traced:.0f} s, compiled in parallel in "
            f"{wall - traced:.0f} s: {seconds}")
  return {"trace_s": traced, "wall_s": wall, "compile_s": seconds}
