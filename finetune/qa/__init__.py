"""SQuAD 1.1 / 2.0: the span-extraction tasks and their official scoring."""

from finetune.qa.qa_tasks import SQuAD
from finetune.qa.qa_tasks import SQuADv1

__all__ = ["SQuAD", "SQuADv1"]
