"""Model formats: export (SavedModel, .keras, transformers) and import
(transformers, the original TF1 release, .keras) under one naming."""
