"""Compares pretraining objectives at equal FLOPs: pretrain, fine-tune, score.

  python run_comparison.py --output-dir OUT --glue-dir GLUE \
      [--objectives mlm,electra,electric,script] [--model-size tiny] \
      [--budget-flops 1e15] [--seeds 3] [--tasks cola,sst,mrpc,sts,rte] \
      [--corpus-dir CORPUS --vocab-file VOCAB] [--blimp-dir BLIMP]

Every objective gets the number of steps that spends --budget-flops
(pretrain/flops.py, ELECTRA appendix E); its checkpoints at k/N of the run are
evaluated and fine-tuned on each task with each seed. Writes
OUT/results.json, OUT/results.md, OUT/glue_vs_flops.png and
OUT/pretrain_curves.png. Rerun the same command after an interruption: it
skips what is done and pretraining resumes from its last checkpoint.
"""

import shlex
import sys

# Before any Keras import: pins the backend, quiets TF's C++ chatter.
from util.tf_quiet import tensorflow_script

tensorflow_script("run_comparison.py")

from comparison import config as comparison_config  # noqa: E402
from util.errors import main_guard  # noqa: E402


@main_guard
def main(argv=None):
  config = comparison_config.load_config(argv)
  from comparison import runner  # matplotlib/NumPy after the flag checks
  command = " ".join(shlex.quote(a) for a in
                     ["python", "run_comparison.py"] + list(
                         sys.argv[1:] if argv is None else argv))
  results = runner.run(config, command)
  if results:
    from comparison import report
    print(report.markdown(results), flush=True)


if __name__ == "__main__":
  main()
