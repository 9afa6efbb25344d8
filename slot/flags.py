"""run_gpu_slot.py's flags."""

import argparse
import os


def parse_args(argv, description=None):
  """argv parsed; `description` is the script's (its --help)."""
  p = argparse.ArgumentParser(description=description, allow_abbrev=False)
  p.add_argument("--data", default=".slot_data",
                 help="pretrain/arrays.py folder (prepare_gpu_slot.py)")
  p.add_argument("--out", default=os.environ.get("OUT", ""))
  p.add_argument("--size", default="small", help="configs/<obj>_<size>.json")
  p.add_argument("--objectives", default="electra,mlm",
                 help="NAME[:K],...: K pretraining seeds of NAME (any "
                 "objective, its preset as run_comparison.py picks it); "
                 "NAME:A-B: its seeds A to B")
  p.add_argument("--budget-flops", type=float, default=0,
                 help="train FLOPs per run (appendix E); 0: equal FLOPs "
                 "sized from the measured speeds and --train-seconds")
  p.add_argument("--checkpoints", type=int, default=1,
                 help="held-out evals at k/N of each run (the curves)")
  p.add_argument("--weights-out", default="auto",
                 help="yes: the weights come back in $OUT; no: kept on the "
                 "slot only (for fine-tuning); auto: yes for <= 2 runs")
  p.add_argument("--batch", type=int, default=128)
  p.add_argument("--hparams", action="append", default=[],
                 help="JSON (file or string) applied to every objective")
  p.add_argument("--precision", default="auto")
  p.add_argument("--chunk", type=int, default=100,
                 help="steps per jitted call; step counts are multiples")
  p.add_argument("--measure-calls", type=int, default=3)
  p.add_argument("--train-seconds", type=float, default=360,
                 help="both objectives' training together, at most")
  p.add_argument("--time-limit", type=float, default=480,
                 help="the whole command's seconds (a slot's may be 600)")
  p.add_argument("--reserve-seconds", type=float, default=30,
                 help="kept after training for eval and weights")
  p.add_argument("--warmup-fraction", type=float, default=0.1)
  p.add_argument("--eval-steps", type=int, default=32)
  p.add_argument("--weights-dtype", default="float16")
  p.add_argument("--hf-steps", type=int, default=20,
                 help="timed PyTorch steps (x3); 0 skips the baseline")
  p.add_argument("--matmul-size", type=int, default=0,
                 help="0: 8192 on a GPU, 1024 on a CPU")
  p.add_argument("--finetune-data", default="",
                 help="finetune/arrays.py folder (default DATA/finetune "
                 "when it exists)")
  p.add_argument("--finetune-seeds", type=int, default=3)
  p.add_argument("--finetune-first-seed", type=int, default=1,
                 help="start at this fine-tuning seed (1-based): a later "
                 "call goes on where an earlier one stopped")
  p.add_argument("--finetune-tasks", default="",
                 help="TASK,...: only these of the arrays' tasks (a later "
                 "call fills in the trials a time limit skipped)")
  p.add_argument("--finetune-chunk", type=int, default=50,
                 help="fine-tuning steps per jitted call")
  p.add_argument("--pretrained", action="append", default=[],
                 help="npz weights folder to fine-tune (skips pretraining)")
  p.add_argument("--started-at", type=float, default=0,
                 help="epoch seconds the command began (gpu_slot.sh)")
  args = p.parse_args(argv)
  if not args.out:
    p.error("--out (or $OUT) is required")
  if not args.finetune_data and os.path.isdir(os.path.join(args.data,
                                                           "finetune")):
    args.finetune_data = os.path.join(args.data, "finetune")
  if args.pretrained and not args.finetune_data:
    p.error("--pretrained needs fine-tuning arrays (--finetune-data)")
  return args
