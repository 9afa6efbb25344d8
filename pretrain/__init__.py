"""Pretraining: data packing, objectives, losses and sampling for ELECTRA."""
