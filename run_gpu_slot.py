"""One GPU slot's work (docs/gpu_slot.md): measure, then pretrain ELECTRA
and BERT at equal FLOPs, without TensorFlow.

  KERAS_BACKEND=jax python run_gpu_slot.py --data .slot_data --out $OUT
      [--size small] [--batch 128] [--train-seconds 360] [--time-limit 480]

Run through gpu_slot.sh, which installs the carried wheels first. In order:
  1. the device, and JAX's bf16 matmul peak (an 8192^3 product on a GPU);
  2. transformers' PyTorch ELECTRA step on the same device and batches
     (benchmarks/hf_electra_step.py, in a subprocess, before JAX holds
     the GPU);
  3. for each objective (ELECTRA, BERT: configs/<objective>_<size>.json,
     temperature 1.0), run_pretraining.py's JAX steps timed by a short run
     of the script from the initial weights: seq/s and MFU;
  4. steps per objective for equal training FLOPs (ELECTRA appendix E
     convention, pretrain/flops.py) so that both runs end within the
     training time left, warmup a fraction of them; both trained by
     run_pretraining.py, each evaluated on the held-out examples;
  5. $OUT/<objective>_<size>/ (.npz weight shards + weights.json, which
     run_finetuning.py / run_pretraining.py / export_model.py
     --init-checkpoint read on the CPU) and $OUT/slot.json (the figures);
  6. when DATA/finetune/ holds fine-tuning arrays (prepare_gpu_slot.py
     --glue-dir), each model just written fine-tuned on each task with
     --finetune-seeds seeds (finetune/jax_trainer.py), seed by seed while
     time is left; the dev outputs go to $OUT/finetune_outputs.npz, which
     collect_gpu_slot.py scores on the CPU with each task's own scorer.
--pretrained DIR (repeatable) skips 2-5 and fine-tunes those weights.
The work is slot/'s (slot/__init__.py lists it); nothing here imports
TensorFlow (slot.json says so).
"""

import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
ROOT = os.path.dirname(os.path.abspath(__file__))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

from slot import flags  # noqa: E402
from util.errors import main_guard  # noqa: E402


@main_guard
def main(argv=None):
  """Runs the slot (slot/run.py); slot.json is rewritten after each phase,
  so a failure keeps what was measured (and its error)."""
  args = flags.parse_args(argv, __doc__.split("\n\n")[0])
  from slot import run  # keras, JAX and the model code: after the flags
  return run.main(args)


if __name__ == "__main__":
  main()
