"""Fine-tunes a pretrained discriminator on GLUE, SQuAD or chunking.

  python run_finetuning.py --data-dir DATA_DIR --model-name NAME \
      --task-names rte,mrpc [--hparams '{"num_trials": 10}']

Starts from DATA_DIR/models/NAME/ (a run_pretraining.py model), reads
DATA_DIR/finetuning_data/<task>/ (--raw-data-dir for another folder; GLUE's
own names such as RTE/ work too: docs/run_finetuning.md), and writes
results and predictions to DATA_DIR/models/NAME/finetuning/, with the best
trial's model in <tasks>_model/ there. Rerun after an interruption, it
goes on from the first unfinished trial.

  python run_finetuning.py --data-dir DATA_DIR --model-name NAME \
      --task-names sst --do-predict --predict-file some.tsv

predicts a file of the task's layout with that kept model (or
--init-checkpoint a fine-tuned model's folder), without training.

Under KERAS_BACKEND=jax it fine-tunes with JAX (finetune/jax_run.py),
writing the same files; --task-arrays reads tasks exported as arrays
(prepare_gpu_slot.py --glue-dir), without TensorFlow; options only
TensorFlow has are refused.
"""

# Before any Keras import: pins the backend, quiets TF's C++ chatter.
from util.tf_quiet import import_tensorflow
from util.tf_quiet import tensorflow_script

BACKEND = tensorflow_script("run_finetuning.py", jax=True)

from finetune import config as configure_finetuning  # noqa: E402
from finetune import preflight  # noqa: E402
from util.errors import main_guard  # noqa: E402


@main_guard
def main(argv=None):
  config = configure_finetuning.load_config(argv)
  if BACKEND == "jax":  # docs/run_finetuning.md, "Under JAX"
    from finetune import jax_run
    jax_run.check(config)  # what only TensorFlow runs: said first
  # Model, data and output files: before TensorFlow (or JAX) loads.
  preflight.check(config, BACKEND)
  if BACKEND == "jax":
    return jax_run.run(config)
  import_tensorflow(with_text=True)
  from finetune.trainer import FinetuningRunner  # TF import after arg checks
  return FinetuningRunner(config).run()


if __name__ == "__main__":
  main()
