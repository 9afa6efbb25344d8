"""A run's discriminator as a .keras archive (model.standalone.Discriminator).

For downstream Keras users: `import model.standalone` (it registers the
class), then `keras.saving.load_model(path)`, or `load_keras(path)` here.
Only models with a discriminator head (ELECTRA, ELECTRA 15%, Electric) fit;
a masked LM (mlm, SCRIPT) or an ablation's main model exports as a
SavedModel (interop/savedmodel.py) instead.
"""

import zipfile

import keras

from interop.weights import DISCRIMINATOR
from interop.weights import export_weights
from interop.weights import import_weights
from model.standalone import Discriminator
from util import storage
from util.errors import UserError


def export_keras(model, pretrain_config, path):
  """Saves the discriminator of pretraining `model` to `path` (.keras);
  returns the Discriminator written."""
  encoder, head = model.networks().get(DISCRIMINATOR, (None, None))
  if head is None:
    raise UserError(
        "the .keras format holds ELECTRA/Electric discriminators only; a "
        f"{pretrain_config.objective} model has none (use --format savedmodel)")
  if not str(path).endswith(".keras"):
    raise UserError(f"a .keras archive's name must end in .keras: {path}")
  disc = Discriminator(encoder.config, name="discriminator")
  disc.build()
  # By name; GDES tables resolve to shared + delta, the standalone's plain
  # tables.
  import_weights(disc, {DISCRIMINATOR: export_weights(model, DISCRIMINATOR)},
                 source="the pretraining model")
  disc.save(path)
  return disc


def load_keras(path):
  """The Discriminator saved at `path` by export_keras."""
  if not storage.exists(path):
    raise UserError(f"no .keras archive at {path}")
  if "://" not in path and not zipfile.is_zipfile(path):
    raise UserError(f"{path} is not a .keras archive (not a zip file)")
  try:
    loaded = keras.saving.load_model(path)
  except (ValueError, OSError, KeyError, TypeError, zipfile.BadZipFile) as e:
    first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
    raise UserError(f"cannot load the .keras archive {path}: {first}") \
        from None
  if not isinstance(loaded, Discriminator):
    raise UserError(f"{path} holds a {type(loaded).__name__}, not an "
                    "exported discriminator")
  return loaded
