"""Scores what GPU slots returned (docs/gpu_slot.md) on the CPU and writes
the comparison's results.json, results.md, its two plots and the slots'
records:

  python collect_gpu_slot.py FILES_AT [FILES_AT ...] --output-dir results/comparison_gpu_small
      [--finetune-data .slot_data/finetune] [--glue-dir DIR] [--vocab-file V]

Each FILES_AT is a call's returned folder (slot.json, slot.log,
finetune_outputs.npz), or a folder this script wrote: its records/1, 2,
... are scored again (python collect_gpu_slot.py DIR --output-dir DIR
recomputes every number from what is committed). Several are scored
together, a later folder's trial replacing an earlier one's of the same
model, task and seed. The fine-tuning arrays' finetune.json says which
tasks, limits and vocabulary the dev rows were featurized with, and the
same featurization here feeds each task's own scorer
(comparison/slot_report.py; the copies are slot/collect.py's). Weights
are not copied (no checkpoints in results/); the dev outputs are (a few
MB).
"""

import sys

from slot import collect
from util.errors import main_guard


@main_guard
def main(argv=None):
  return collect.collect(collect.parse_args(argv,
                                            __doc__.split("\n\n")[0]))


if __name__ == "__main__":
  sys.exit(main())
