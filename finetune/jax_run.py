"""run_finetuning.py under KERAS_BACKEND=jax: the fine-tuning loop
(finetune/loop.py) on its JAX backend (finetune/jax_backend.py).

What only the TensorFlow backend does is refused by `check`, in one line,
before JAX loads (docs/distributed.md lists each with its reason).

TensorFlow is still needed to read the tasks' raw files (the tokenizer is
tensorflow_text's) and our TensorFlow checkpoints. Without it, `task_arrays`
reads the tasks as arrays exported on a machine that has it
(prepare_gpu_slot.py --glue-dir; finetune/task_arrays.py), and the model
from an .npz weights folder (the JAX pretraining's).
"""

from finetune import data_layout
from util.errors import UserError

TENSORFLOW_BACKEND = "use the TensorFlow backend (unset KERAS_BACKEND)"


def check(config):
  """One UserError for the first option only the TensorFlow backend has."""
  def refuse(what):
    raise UserError(f"{what} is not supported under KERAS_BACKEND=jax: "
                    f"{TENSORFLOW_BACKEND}")
  for task in config.tasks:
    if not data_layout.kind(task):  # added elsewhere: its rows' layout
      refuse(f"task {task} (not one of GLUE, SQuAD, tagging or multiple "
             "choice)")
  if config.strategy != "default":
    raise UserError(f"strategy {config.strategy} is TensorFlow's: under "
                    "KERAS_BACKEND=jax every device (of every process "
                    "joined) trains, data parallel, with strategy default "
                    "(docs/distributed.md)")
  if config.inference_engine == "openvino":  # it converts TensorFlow graphs
    refuse("inference_engine openvino")


def _import_tensorflow():
  # pylint: disable-next=g-import-not-at-top
  from util.tf_quiet import import_tensorflow
  try:
    return import_tensorflow(with_text=True)
  except ImportError as e:
    raise UserError(
        f"fine-tuning under KERAS_BACKEND=jax still needs TensorFlow and "
        f"tensorflow_text to read and tokenize the task ({e}); without "
        "them, export the task as arrays on a machine that has them "
        "(prepare_gpu_slot.py --glue-dir) and pass that folder as "
        "--task-arrays") from None


def run(config):
  """The run, as FinetuningRunner.run gives it (the summary)."""
  check(config)
  if not config.task_arrays:  # rows featurized already: no tokenizer
    _import_tensorflow()  # said now, before any work
  # pylint: disable-next=g-import-not-at-top
  from finetune.jax_backend import JaxFinetuningRunner
  return JaxFinetuningRunner(config).run()
