"""The task registry: name -> Task class. Adding a task is a class with
examples, featurize, head, loss and scorer, plus one line here."""

from util.errors import UserError


def _registry():
  from finetune.classification import classification_tasks as glue
  from finetune.multiple_choice import choice_tasks
  from finetune.qa import qa_tasks
  from finetune.tagging import tagging_tasks
  tasks = {t.name: t for t in glue.GLUE_TASKS}
  tasks.update({"squadv1": qa_tasks.SQuADv1, "squad": qa_tasks.SQuAD,
                "chunk": tagging_tasks.Chunking,
                "pos": tagging_tasks.POSTagging,
                "race": choice_tasks.RACE, "swag": choice_tasks.SWAG,
                "copa": choice_tasks.COPA})
  return tasks


def task_names():
  return sorted(_registry())


def get_tasks(config, tokenizer):
  registry = _registry()
  unknown = [name for name in config.tasks if name not in registry]
  if unknown:
    raise UserError(f"unknown task '{unknown[0]}' (choose from "
                    f"{', '.join(sorted(registry))})")
  return [registry[name](config, tokenizer) for name in config.tasks]
