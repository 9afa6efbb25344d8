"""Scores what a GPU slot returned (docs/gpu_slot.md) on the CPU and writes
the comparison's results.json, results.md, its two plots and the slot's
records:

  python collect_gpu_slot.py FILES_AT --output-dir results/comparison_gpu_small
      [--finetune-data .slot_data/finetune] [--glue-dir DIR] [--vocab-file V]

FILES_AT is the run's returned folder (slot.json, slot.log,
finetune_outputs.npz), or a folder this script wrote: its copies of those
records are scored again (python collect_gpu_slot.py DIR --output-dir DIR
recomputes every number from what is committed). The fine-tuning arrays'
finetune.json says which
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
