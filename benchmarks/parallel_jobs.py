"""Two pretraining jobs side by side vs one at a time (run_comparison.py
--parallel-jobs 2): is the machine's work per hour higher?

  python benchmarks/parallel_jobs.py [--objectives mlm,electra]
      [--size tiny] [--batch 128] [--interval 25] [--intervals 3]
      [--json out.json]

Runs run_pretraining.py as the harness does, on synthetic TFRecords of the
real vocabulary's size: each objective alone with TensorFlow's default
threads, then all of them at once with cores/N threads each (the
harness's setting). A job's speed is the median seq/s of its log intervals
after the first (tracing and compiling); side by side, the jobs are
stopped once each has logged that many, so every counted interval had all
of them running. Work per hour relative to one job at a time:
sum over jobs of (side-by-side seq/s / alone seq/s).
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run as a script: make the repo importable
  sys.path.insert(0, ROOT)

from benchmarks import scratch, write_json  # noqa: E402
from benchmarks.pretrain_throughput import write_synthetic_data  # noqa: E402
from comparison.jobs import THREAD_VARS, threads_per_job  # noqa: E402
from util.machine import cpu_kind  # noqa: E402

SPEED = re.compile(r"\| ([\d.]+) seq/s \|")


def start(objective, args, tfrecords, work_dir, threads):
  env = {k: v for k, v in os.environ.items() if k not in THREAD_VARS}
  if threads:
    env.update({k: str(threads) for k in THREAD_VARS})
  argv = [sys.executable, os.path.join(ROOT, "run_pretraining.py"),
          "--hparams", os.path.join(ROOT, "configs",
                                    f"{objective}_{args.size}.json"),
          "--pretrain-tfrecords", tfrecords,
          "--model-dir", os.path.join(work_dir, f"{objective}-{threads}"),
          "--train-batch-size", str(args.batch),
          "--iterations-per-loop", str(args.interval),
          "--num-train-steps", "1000000",
          "--save-checkpoints-steps", "1000000"]
  return subprocess.Popen(argv, cwd=ROOT, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def measure(objectives, args, tfrecords, work_dir, threads):
  """Each job's interval speeds, all jobs running until each has enough."""
  procs = {o: start(o, args, tfrecords, work_dir, threads)
           for o in objectives}
  speeds = {o: [] for o in objectives}
  try:
    # Reading one job's lines at a time is fine: each logs once per
    # interval, and a pipe holds many lines.
    while any(len(s) < args.intervals + 1 for s in speeds.values()):
      for o, proc in procs.items():
        if len(speeds[o]) >= args.intervals + 1:
          continue
        line = proc.stdout.readline()
        if not line:
          raise SystemExit(f"error: {o} ended before its intervals were "
                           f"logged (exit {proc.wait()})")
        m = SPEED.search(line)
        if m:
          speeds[o].append(float(m.group(1)))
  finally:
    for proc in procs.values():
      proc.kill()
      proc.wait()
  # The first interval holds the tracing and compiling.
  return {o: statistics.median(s[1:args.intervals + 1])
          for o, s in speeds.items()}


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--objectives", default="mlm,electra")
  p.add_argument("--size", default="tiny")
  p.add_argument("--batch", type=int, default=128)
  p.add_argument("--seq-len", type=int, default=128)
  p.add_argument("--vocab-size", type=int, default=30522)
  p.add_argument("--interval", type=int, default=25, help="steps a log line")
  p.add_argument("--intervals", type=int, default=3,
                 help="intervals timed after the first")
  p.add_argument("--json", default="")
  args = p.parse_args(argv)
  objectives = [o.strip() for o in args.objectives.split(",") if o.strip()]
  threads = threads_per_job(len(objectives))
  print(f"machine: {cpu_kind()}", flush=True)
  with scratch("parallel_jobs_") as work_dir:
    data_dir = os.path.join(work_dir, "data")
    os.makedirs(data_dir)
    tfrecords = write_synthetic_data(data_dir, args.seq_len, args.vocab_size)
    alone = {}
    for o in objectives:
      alone.update(measure([o], args, tfrecords, work_dir, 0))
      print(f"{o} alone, default threads: {alone[o]:.1f} seq/s", flush=True)
    together = measure(objectives, args, tfrecords, work_dir, threads)
  print(f"\n| job | alone (seq/s) | side by side, {threads} thread(s) each "
        "(seq/s) | share |\n|---|---|---|---|")
  for o in objectives:
    print(f"| {args.size} {o} | {alone[o]:.1f} | {together[o]:.1f} | "
          f"{together[o] / alone[o]:.2f} |")
  work = sum(together[o] / alone[o] for o in objectives)
  print(f"\nwork per hour side by side: {work:.2f}x one job at a time "
        f"(batch {args.batch}, {cpu_kind()})", flush=True)
  write_json(args.json, {"machine": cpu_kind(), "alone": alone,
                         "side_by_side": together, "threads": threads,
                         "work_ratio": work})


if __name__ == "__main__":
  main()
