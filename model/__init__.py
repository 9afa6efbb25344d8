"""The transformer core and its heads (Keras 3; keras.ops only).

Names load on first use, so `model.config` (sizes and presets, pure Python)
imports without Keras: config modules read it.
"""

import importlib

_HOMES = {"TransformerConfig": "config", "get_model_config": "config",
          "scale_config": "config", "Embeddings": "encoder",
          "Encoder": "encoder", "DiscriminatorHead": "heads",
          "MaskedLMHead": "heads"}


def __getattr__(name):
  if name not in _HOMES:
    raise AttributeError(f"module 'model' has no attribute '{name}'")
  return getattr(importlib.import_module(f"model.{_HOMES[name]}"), name)
