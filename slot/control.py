"""The control fine-tuned from random initialisation (issue 51): --size's
ELECTRA discriminator shape (with --hparams' model overrides), its encoder
as initialised, fine-tuned with the same tasks, seeds and hparams as the
pretrained models. Beside the no-text baseline it tells what pretraining
adds over fine-tuning an encoder from scratch."""

import dataclasses

from comparison.plan import preset
from finetune.arrays import RANDOM_INIT
from model.config import get_model_config
from pretrain.config import PretrainingConfig
from util.config import apply_overrides
from util.config import load_hparams


def control_name(args):
  return f"{RANDOM_INIT}_{args.size}"


def control_config(args, config, vocab_size):
  """The control encoder's TransformerConfig, fine-tuning's dropout."""
  pretrain = apply_overrides(PretrainingConfig(), preset("electra", args.size),
                             source="the electra preset")
  for spec in args.hparams:
    pretrain = apply_overrides(pretrain, load_hparams(spec), source=spec)
  encoder = get_model_config(args.size, vocab_size,
                             pretrain.model_hparam_overrides)
  if config.hidden_dropout_prob is not None:
    encoder = dataclasses.replace(
        encoder, hidden_dropout_prob=config.hidden_dropout_prob)
  return encoder
