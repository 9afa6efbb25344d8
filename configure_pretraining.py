"""The original release's configure_pretraining module: the config now
lives beside the code it configures, in pretrain/config.py."""

from pretrain.config import *  # noqa: F401,F403
from pretrain.config import PretrainingConfig  # noqa: F401
from pretrain.config import load_config  # noqa: F401
