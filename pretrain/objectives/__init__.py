"""Pretraining objectives, each a head on the one transformer core.

| objective      | hparams                      | where                          |
|----------------|------------------------------|--------------------------------|
| ELECTRA        | objective="electra"          | pretrain/objectives/electra.py |
| BERT masked LM | objective="mlm" (or electra_objective=false) | pretrain/objectives/mlm.py |
"""

from model.config import get_model_config
from model.config import scale_config
from pretrain.objectives.electra import ElectraModel
from pretrain.objectives.mlm import MaskedLMModel


def build_model(hparams):
  """The Keras model of `hparams.objective`, variables not yet created."""
  disc_config = get_model_config(hparams.model_size, hparams.vocab_size,
                                 hparams.model_hparam_overrides)
  if hparams.objective == "electra":
    gen_config = scale_config(disc_config, hparams.generator_hidden_size,
                              hparams.generator_ffn_size,
                              hparams.generator_heads,
                              hparams.generator_layers)
    return ElectraModel(hparams, disc_config, gen_config, name="electra")
  if hparams.objective == "mlm":
    return MaskedLMModel(hparams, disc_config, name="mlm")
  raise ValueError(f"unknown objective {hparams.objective}")
