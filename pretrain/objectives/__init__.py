"""Pretraining objectives, each a head on the one transformer core.

| objective        | hparams                          | paper                      | file           |
|------------------|----------------------------------|----------------------------|----------------|
| BERT masked LM   | objective=mlm                    | BERT; ELECTRA Table 4      | mlm.py         |
| ELECTRA          | objective=electra                | ELECTRA section 2          | electra.py     |
| ELECTRA 15%      | objective=electra_15             | ELECTRA section 3.5        | electra.py     |
| Replace MLM      | objective=replace_mlm            | ELECTRA section 3.5        | ablations.py   |
| All-Tokens MLM   | objective=all_tokens_mlm         | ELECTRA section 3.5        | ablations.py   |
| Electric         | objective=electric               | Electric sections 2.1-2.5  | electric.py    |
| SCRIPT           | objective=script                 | SCRIPT section 2           | script.py      |
Generators (masked LM, two-tower, uniform, unigram) are in generators.py;
weight sharing and training algorithms are ElectraModel options.
"""

import numpy as np

from model.config import get_model_config
from model.config import scale_config
from pretrain.objectives.ablations import AllTokensMLMModel
from pretrain.objectives.ablations import ReplaceMLMModel
from pretrain.objectives.electra import ElectraModel
from pretrain.objectives.electric import ElectricModel
from pretrain.objectives.generators import unigram_log_probs
from pretrain.objectives.mlm import MaskedLMModel
from pretrain.objectives.script import ScriptModel

ELECTRA_FAMILY = {
    "electra": ElectraModel,
    "electra_15": ElectraModel,
    "replace_mlm": ReplaceMLMModel,
    "all_tokens_mlm": AllTokensMLMModel,
    "electric": ElectricModel,
}


def build_model(hparams, token_counts=None, special_ids=()):
  """The Keras model of `hparams.objective`, variables not yet created.

  token_counts (the dataset's, per vocabulary id) feed a unigram generator.
  """
  disc_config = get_model_config(hparams.model_size, hparams.vocab_size,
                                 hparams.model_hparam_overrides)
  if hparams.objective == "mlm":
    return MaskedLMModel(hparams, disc_config, name="mlm")
  if hparams.objective == "script":
    return ScriptModel(hparams, disc_config, name="script")
  if hparams.objective not in ELECTRA_FAMILY:
    raise ValueError(f"unknown objective {hparams.objective}")
  gen_config = scale_config(disc_config, hparams.generator_multiplier,
                            hparams.generator_ffn_size,
                            hparams.generator_heads,
                            hparams.generator_layers)
  unigram = None
  if hparams.unigram_generator:
    if token_counts is None:
      raise ValueError("a unigram generator needs the dataset's token counts")
    unigram = unigram_log_probs(np.asarray(token_counts), special_ids)
  return ELECTRA_FAMILY[hparams.objective](
      hparams, disc_config, gen_config, unigram, name=hparams.objective)
