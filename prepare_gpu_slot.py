"""Prepares what a GPU slot's run carries (docs/gpu_slot.md), on the CPU
machine, in the repository root:

  python prepare_gpu_slot.py --wheels                  # .whl/
  python prepare_gpu_slot.py --data-dir DATA_DIR [--max-train-mb 40]
                                                       # .slot_data/
  python prepare_gpu_slot.py --glue-dir GLUE_DIR --vocab-file VOCAB \
      [--tasks rte,mrpc,sts,cola,sst] [--finetune-hparams JSON]
                                                       # .slot_data/finetune/

--wheels downloads, for the slot's Python 3.12 on x86-64, keras and what
keras needs that the slot's image lacks (namex, optree), at the versions
installed here, into .whl/ (git ignores it); gpu_slot.sh installs them
there. --data-dir exports DATA_DIR's pretraining TFRecords, training and
held-out shards (build_pretraining_dataset.py's), to compact NumPy arrays
in .slot_data/ (pretrain/arrays.py; needs TensorFlow). --glue-dir
featurizes fine-tuning tasks (GLUE's folders, or run_finetuning.py's
finetuning_data/ layout) as run_finetuning.py would, into
.slot_data/finetune/ (finetune/arrays.py), which the slot fine-tunes the
models it pretrains on. Both end by
printing what a run would carry against the slot's 64 MiB.
"""

import sys

# Before any Keras import: pins the backend, quiets TF's C++ chatter.
from util.tf_quiet import tensorflow_script

tensorflow_script("prepare_gpu_slot.py")

from slot import prepare  # noqa: E402
from util.errors import main_guard  # noqa: E402


@main_guard
def main(argv=None):
  """The exports (slot/prepare.py); 0 when a run can carry them."""
  return prepare.prepare(prepare.parse_args(argv,
                                            __doc__.split("\n\n")[0]))


if __name__ == "__main__":
  sys.exit(main())
