"""run_gpu_slot.py's flags."""

import math
import os

from pretrain import objective_names
from util.config import ArgumentParser
from util.config import load_hparams
from util.config import parse_args as parse_known
from util.errors import UserError
from util.outputs import check_output_dir

# Flags that count something: at least 1 (0 would plan nothing, or divide).
COUNTS = ("batch", "chunk", "measure_calls", "checkpoints", "eval_steps",
          "finetune_first_seed", "finetune_chunk", "seeds_per_step")
SECONDS = ("train_seconds", "time_limit")


def parse_args(argv, description=None):
  """argv parsed; `description` is the script's (its --help)."""
  p = ArgumentParser(description=description)
  p.add_argument("--data", default=".slot_data",
                 help="pretrain/arrays.py folder (prepare_gpu_slot.py)")
  p.add_argument("--out", default=os.environ.get("OUT", ""))
  p.add_argument("--size", default="small", help="configs/<obj>_<size>.json")
  p.add_argument("--objectives", default="electra,mlm",
                 help="NAME[:K],...: K pretraining seeds of NAME (any "
                 "objective, its preset as run_comparison.py picks it); "
                 "NAME:A-B: its seeds A to B; '' with --random-init-control: "
                 "the control alone")
  p.add_argument("--budget-flops", type=float, default=0,
                 help="train FLOPs per run (appendix E); 0: equal FLOPs "
                 "sized from the measured speeds and --train-seconds")
  p.add_argument("--seeds-per-step", type=int, default=1,
                 help="up to this many pretraining seeds of one objective "
                 "trained in one vmapped step (run_pretraining.py --seeds)")
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
  p.add_argument("--random-init-control", action="store_true",
                 help="also fine-tune --size's ELECTRA encoder as "
                 "initialised, not pretrained (the control row)")
  p.add_argument("--started-at", type=float, default=0,
                 help="epoch seconds the command began (gpu_slot.sh)")
  args = parse_known(p, argv)
  if not args.out:
    p.error("--out (or $OUT) is required")
  if not args.finetune_data and os.path.isdir(os.path.join(args.data,
                                                           "finetune")):
    args.finetune_data = os.path.join(args.data, "finetune")
  if (args.pretrained or args.random_init_control) and not args.finetune_data:
    p.error("--pretrained and --random-init-control need fine-tuning "
            "arrays (--finetune-data)")
  check(args)
  return args


def check(args):
  """Everything a flag can get wrong, before JAX and the measurements
  start (a slot's minutes are few)."""
  check_output_dir(args.out, "--out")  # a file, or read-only: said now
  for name in COUNTS:
    if getattr(args, name) < 1:
      raise UserError(f"--{name.replace('_', '-')} must be >= 1, got "
                      f"{getattr(args, name)}")
  if args.finetune_seeds < 0:  # 0: pretrain only
    raise UserError(f"--finetune-seeds must be >= 0, got "
                    f"{args.finetune_seeds}")
  for name in SECONDS + ("budget_flops", "reserve_seconds"):
    value = getattr(args, name)
    if not math.isfinite(value) or value < 0 or (
        name in SECONDS and value == 0):
      raise UserError(f"--{name.replace('_', '-')} must be a finite "
                      f"number {'> 0' if name in SECONDS else '>= 0'}, got "
                      f"{value}")
  for spec in args.hparams:
    load_hparams(spec)  # a bad file or JSON is named now
  # (--data: gpu_slot.sh and arrays.load name what is missing there.)
  folders = [("--pretrained", p) for p in args.pretrained] + (
      [("--finetune-data", args.finetune_data)] if args.finetune_data else
      [])
  for flag, folder in folders:
    if not os.path.isdir(folder):
      raise UserError(f"{flag} {folder} is not a folder")
  if args.finetune_data and args.finetune_seeds:
    # run_finetuning.py --task-arrays reads it: said before pretraining.
    # pylint: disable-next=g-import-not-at-top
    from finetune import task_arrays
    task_arrays.read_export(args.finetune_data)
  if not fine_tune_only(args):
    objective_seeds(args.objectives)


def fine_tune_only(args):
  """--pretrained weights, or --objectives '' with the control alone."""
  return bool(args.pretrained) or (args.random_init_control and
                                   not args.objectives.strip())


def objective_seeds(spec):
  """[(name, first seed, last seed)] of --objectives NAME[:K|:A-B],...;
  an unknown name, a bad range or a run named twice is refused."""
  out, seen = [], {}
  for item in spec.split(","):
    name, _, seeds = item.strip().partition(":")
    first, _, last = (seeds or "1").partition("-")
    try:
      first, last = (int(first), int(last)) if last else (1, int(first))
    except ValueError:
      first = last = 0
    if not name or first < 1 or last < first:
      raise UserError(f"--objectives item '{item.strip()}': give NAME, "
                      "NAME:K (seeds 1..K) or NAME:A-B (1 <= A <= B)")
    objective_names.check([name])
    paper = objective_names.ALIASES.get(name, name)
    for k in range(first, last + 1):
      if (paper, k) in seen:  # one folder, trained and counted twice
        raise UserError(f"--objectives names {name} seed {k} twice "
                        f"('{seen[paper, k]}' and '{item.strip()}')")
      seen[paper, k] = item.strip()
    out.append((name, first, last))
  return out
