"""The original release's configure_finetuning module: the config now lives
beside the code it configures, in finetune/config.py."""

from finetune.config import *  # noqa: F401,F403
from finetune.config import FinetuningConfig  # noqa: F401
from finetune.config import load_config  # noqa: F401
