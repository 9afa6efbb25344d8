"""The transformer core and its heads (Keras 3; keras.ops only).

Names load on first use, so `model.config` (sizes and presets, pure Python)
imports without Keras: config modules read it.
"""

import importlib

# The two networks a pretraining model may hold, named as transformers'
# ELECTRA classes are (interop/weights.py): its `networks()` hook keys.
DISCRIMINATOR, GENERATOR = "discriminator", "generator"

_HOMES = {"TransformerConfig": "config", "get_model_config": "config",
          "scale_config": "config", "Embeddings": "encoder",
          "Encoder": "encoder", "DiscriminatorHead": "heads",
          "MaskedLMHead": "heads"}


def __getattr__(name):
  if name not in _HOMES:
    raise AttributeError(f"module 'model' has no attribute '{name}'")
  return getattr(importlib.import_module(f"model.{_HOMES[name]}"), name)
