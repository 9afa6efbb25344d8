"""Dev-set evaluation per fine-tuning trial, as run_finetuning.py runs it:
the first trial's (which traces the eval step) and two later trials' (new
models of the same shape; finetune/prediction.py reuses the trace).

  python benchmarks/eval_per_trial.py [--size small] [--eval-examples 277]

SST-2 dev rows, seq 128, batch 32, from a random transformers ELECTRA of
the preset's sizes (benchmarks/finetune_throughput.py's set-up); float32
and bfloat16. Run it at two commits to compare them.
"""

import argparse
import contextlib
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

from util.tf_quiet import tensorflow_script  # noqa: E402

tensorflow_script("benchmarks/eval_per_trial.py")

from benchmarks import finetune_throughput as ft  # noqa: E402
from benchmarks import scratch  # noqa: E402
from util.machine import cpu_kind  # noqa: E402


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--size", default="small")
  p.add_argument("--eval-examples", type=int, default=277)
  p.add_argument("--trials", type=int, default=3)
  a = p.parse_args(argv)
  with scratch("eval_per_trial_") as work_dir:
    args = ft.parse_args(["--size", a.size,
                          "--eval-examples", str(a.eval_examples)])
    time_trials(ft.prepare(args, work_dir), a.trials)


def time_trials(args, trials):
  """Prints each trial's dev evaluation seconds, per precision."""
  for precision in ("float32", "bfloat16"):
    runner = ft.make_runner("glue", precision, args)
    task = runner.tasks[0]
    runner.data.examples_and_features(task, "dev")  # featurized once
    times = []
    for seed in range(trials):
      model = runner._build(seed)  # noqa: SLF001 (as a trial builds it)
      with contextlib.redirect_stdout(open(os.devnull, "w")):
        start = time.perf_counter()
        runner.predictor.predict(model, task, "dev")
        times.append(time.perf_counter() - start)
    print(f"{args.size} {precision}: SST-2 dev ({args.eval_examples} rows) per "
          "trial: " + ", ".join(f"{t:.2f} s" for t in times) +
          f"  [{cpu_kind()}]", flush=True)


if __name__ == "__main__":
  main()
