"""The task registry: name -> Task class. Adding a task is a class with
examples, featurize, head, loss and scorer, plus one line here."""

import importlib

from util.errors import UserError

# "module:Class", imported on use: the names are known (and a wrong one
# refused) before Keras and TensorFlow load.
_CLASSIFICATION = "finetune.classification.classification_tasks:"
TASKS = {
    "cola": _CLASSIFICATION + "CoLA", "sst": _CLASSIFICATION + "SST",
    "mrpc": _CLASSIFICATION + "MRPC", "sts": _CLASSIFICATION + "STS",
    "qqp": _CLASSIFICATION + "QQP", "mnli": _CLASSIFICATION + "MNLI",
    "qnli": _CLASSIFICATION + "QNLI", "rte": _CLASSIFICATION + "RTE",
    "wnli": _CLASSIFICATION + "WNLI",
    "squadv1": "finetune.qa.qa_tasks:SQuADv1",
    "squad": "finetune.qa.qa_tasks:SQuAD",
    "chunk": "finetune.tagging.tagging_tasks:Chunking",
    "pos": "finetune.tagging.tagging_tasks:POSTagging",
    "race": "finetune.multiple_choice.choice_tasks:RACE",
    "swag": "finetune.multiple_choice.choice_tasks:SWAG",
    "copa": "finetune.multiple_choice.choice_tasks:COPA",
}


def _task_class(name):
  module, cls = TASKS[name].split(":")
  return getattr(importlib.import_module(module), cls)


def task_names():
  return sorted(TASKS)


def check_task_names(names):
  """One error for the first name that is no task (no import needed)."""
  unknown = [name for name in names if name not in TASKS]
  if unknown:
    raise UserError(f"unknown task '{unknown[0]}' (choose from "
                    f"{', '.join(task_names())})")


def get_tasks(config, tokenizer):
  check_task_names(config.tasks)
  return [_task_class(name)(config, tokenizer) for name in config.tasks]
