"""The transformer core and its heads (Keras 3; keras.ops only)."""

from model.config import TransformerConfig  # noqa: F401
from model.config import get_model_config  # noqa: F401
from model.config import scale_config  # noqa: F401
from model.encoder import Embeddings  # noqa: F401
from model.encoder import Encoder  # noqa: F401
from model.heads import DiscriminatorHead  # noqa: F401
from model.heads import MaskedLMHead  # noqa: F401
