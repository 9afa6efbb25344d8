"""A CRF tagging head and a multiple-choice head, tiny, built the same way
under either Keras backend (tests/test_finetune_heads_jax.py)."""

from configure_finetuning import FinetuningConfig
from finetune.multiple_choice.choice_tasks import RACE
from finetune.tagging.tagging_tasks import POSTagging
from model.config import get_model_config

TAGS = ["DT", "NN", "VBZ", "."]
HIDDEN = 16


def build_heads():
  """{task name: (task, head)}: POS with a CRF, RACE; variables created."""
  config = get_model_config("tiny", 50, {"hidden_size": HIDDEN})
  pos = POSTagging(FinetuningConfig(tagging_crf=True), None)
  pos._labels = list(TAGS)  # no files: the tag set given
  race = RACE(FinetuningConfig(), None)
  heads = {task.name: (task, task.build_head(config)) for task in (pos, race)}
  heads["pos"][1].build((None, None, HIDDEN))
  heads["race"][1].build((None, HIDDEN))
  return heads
