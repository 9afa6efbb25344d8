"""The control fine-tuned from random initialisation (issue 51): --size's
ELECTRA discriminator shape (with --hparams' model overrides), its encoder
as initialised, fine-tuned with the same tasks, seeds and hparams as the
pretrained models. Beside the no-text baseline it tells what pretraining
adds over fine-tuning an encoder from scratch."""

from comparison.plan import preset
from finetune.arrays import RANDOM_INIT
from pretrain.config import PretrainingConfig
from util.config import apply_overrides
from util.config import load_hparams


def control_name(args):
  return f"{RANDOM_INIT}_{args.size}"


def control_pretrain_config(args, vocab_size):
  """The control's PretrainingConfig: --size's ELECTRA preset with
  --hparams' overrides and the export's vocabulary (its dropout is the
  fine-tuning config's, as for any model)."""
  pretrain = apply_overrides(PretrainingConfig(), preset("electra", args.size),
                             source="the electra preset")
  for spec in args.hparams:
    pretrain = apply_overrides(pretrain, load_hparams(spec), source=spec)
  pretrain.vocab_size = vocab_size
  pretrain.resolve()
  return pretrain
