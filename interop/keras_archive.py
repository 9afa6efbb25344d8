"""A run's discriminator as a .keras archive (model.standalone.Discriminator).

For downstream Keras users: `import model.standalone` (it registers the
class), then `keras.saving.load_model(path)`, or `load_keras(path)` here.
Only models with a discriminator head (ELECTRA, ELECTRA 15%, Electric) fit;
a masked LM (mlm, SCRIPT) or an ablation's main model exports as a
SavedModel (interop/savedmodel.py) instead.
"""

import keras

from finetune.model import encoder_weights
from finetune.model import set_encoder_weights
from model.standalone import Discriminator
from util import storage
from util.errors import UserError


def export_keras(model, hparams, path):
  """Saves the discriminator of pretraining `model` to `path` (.keras);
  returns the Discriminator written."""
  if not hasattr(model, "discriminator_predictions"):
    raise UserError(
        "the .keras format holds ELECTRA/Electric discriminators only; a "
        f"{hparams.objective} model has none (use --format savedmodel)")
  if not str(path).endswith(".keras"):
    raise UserError(f"a .keras archive's name must end in .keras: {path}")
  disc = Discriminator(model.disc_config, name="discriminator")
  disc.build()
  # encoder_weights resolves GDES tables (shared + delta) into the plain
  # tables of the standalone encoder.
  set_encoder_weights(disc.encoder, [
      keras.ops.convert_to_numpy(w) for w in encoder_weights(
          model.discriminator)])
  for target, source in zip(disc.head.weights,
                            model.discriminator_predictions.weights):
    target.assign(keras.ops.convert_to_numpy(source))
  disc.save(path)
  return disc


def load_keras(path):
  """The Discriminator saved at `path` by export_keras."""
  if not storage.exists(path):
    raise UserError(f"no .keras archive at {path}")
  loaded = keras.saving.load_model(path)
  if not isinstance(loaded, Discriminator):
    raise UserError(f"{path} holds a {type(loaded).__name__}, not an "
                    "exported discriminator")
  return loaded
