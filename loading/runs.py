"""One of our pretraining runs, finished or running, as other scripts
load it: its config (pretrain_config.json, pretrain/run_config.py), latest
checkpoint, tokenizer and restored model. A model in another format
(transformers, the TF1 release, .keras) is found by
loading/sources.py's find_pretrained, which also finds our runs (here), and
restores here alike."""

import dataclasses
import os

import numpy as np

from interop.weights import import_weights
from loading.presence import vocab_path_for  # noqa: F401 (callers' name)
from pretrain.objectives import build_model
from pretrain.run_config import CONFIG_FILE
from pretrain.run_config import config_from_json
from util import storage
from util.errors import UserError
from util.text_files import read_text
from util.tokenization import load_tokenizer


@dataclasses.dataclass
class Pretrained:
  """A run's config and checkpoint."""
  config: object  # PretrainingConfig
  checkpoint: str  # checkpoint path prefix
  model_dir: str
  source: object = None  # a loading/sources.py Source when not one of ours


def find_run(path):
  """One of our runs: a pretraining model_dir (or a checkpoint prefix
  inside one); loading/sources.py's find_pretrained takes any format."""
  if not storage.isdir(path) and not storage.exists(path + ".index"):
    raise UserError(f"no checkpoint found at {path} (train one with "
                    "run_pretraining.py, or pass --init-checkpoint)")
  model_dir = path if storage.isdir(path) else os.path.dirname(path)
  checkpoint = latest_checkpoint(path) if storage.isdir(path) else path
  if not checkpoint:
    raise UserError(f"no checkpoint found in {path} (train one with "
                    "run_pretraining.py)")
  config_path = os.path.join(model_dir, CONFIG_FILE)
  if not storage.exists(config_path):
    raise UserError(f"{config_path} not found: the checkpoint's model "
                    "config is unknown")
  return Pretrained(config_from_json(read_text(config_path), config_path),
                    checkpoint, model_dir)


def latest_checkpoint(model_dir):
  """The newest checkpoint that model_dir's `checkpoint` file leads to (None
  when there is none); one clear error when that file is damaged or leads
  to none of the checkpoints there (training/checkpointing.py)."""
  from training import checkpointing  # TensorFlow: late (see restore_model)
  return checkpointing.latest_checkpoint(model_dir)


def is_our_run(path):
  """A model_dir of ours, or a checkpoint prefix in one (or a path that
  does not exist, which find_run reports)."""
  if storage.isdir(path):
    return (storage.exists(os.path.join(path, CONFIG_FILE)) or
            not storage.listdir(path))
  if storage.exists(path + ".index"):
    return storage.exists(os.path.join(os.path.dirname(path), CONFIG_FILE))
  return not path.endswith(".keras")


def load_tokenizer_for(pretrain_config, vocab_file="", data_dir=""):
  """The run's tokenizer (vocab_path_for); its size must be the model's."""
  path = vocab_path_for(pretrain_config, vocab_file, data_dir)
  tokenizer = load_tokenizer(path, pretrain_config.do_lower_case)
  if tokenizer.vocab_size != pretrain_config.vocab_size:
    raise UserError(
        f"vocab file {path} has {tokenizer.vocab_size} entries "
        f"but the pretrained model has {pretrain_config.vocab_size}; "
        "pass the pretraining vocab with --vocab-file")
  return tokenizer


def restore_model(pretrained, token_counts=None, special_ids=(), need=()):
  """The run's whole pretraining model, its variables restored. From
  another format, only the networks it holds are restored; `need` names
  the roles (discriminator, generator) the caller cannot do without."""
  pretrain_config = pretrained.config
  if pretrain_config.unigram_generator and token_counts is None:
    # Its table is no weight; any table builds the model (a caller that
    # samples from the generator passes the dataset's counts).
    token_counts = np.ones(pretrain_config.vocab_size)
  model = build_model(pretrain_config, token_counts, special_ids)
  model.build_variables()
  if pretrained.source is None:
    # TensorFlow only for our TF checkpoints: the JAX slot imports this
    # module to read .npz weights (finetune/jax_trainer.py).
    import keras
    if keras.backend.backend() == "jax":
      read_by_name(model, pretrained.checkpoint)
      return model
    from training.checkpointing import make_checkpoint
    from training.checkpointing import read_checkpoint
    read_checkpoint(make_checkpoint(model), pretrained.checkpoint)
    return model
  import_weights(model, pretrained.source.weights(),
                 source=pretrained.checkpoint, require=need)
  return model


def read_by_name(model, checkpoint):
  """Our TensorFlow run's weights into a model whose variables a
  tf.train.Checkpoint cannot hold (JAX-backed): by the names
  training/checkpointing.py saves them under; TensorFlow only reads."""
  from util.tf_quiet import import_tensorflow
  try:
    tf = import_tensorflow()
  except ImportError:
    raise UserError(f"{checkpoint} is a TensorFlow checkpoint: reading it "
                    "needs TensorFlow installed (or its run's .npz weights, "
                    "interop/npz_weights.py)") from None
  from training.checkpointing import stored_name
  from training.checkpointing import variable_keys
  try:
    reader = tf.train.load_checkpoint(checkpoint)
  except (tf.errors.OpError, ValueError) as e:
    first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
    raise UserError(f"cannot restore checkpoint {checkpoint}: {first}"
                    ) from None
  stored = reader.get_variable_to_shape_map()
  for key, variable in variable_keys(model.variables).items():
    name = stored_name("model", key)
    if name in stored:
      variable.assign(reader.get_tensor(name))
    elif variable.trainable:
      raise UserError(f"cannot restore checkpoint {checkpoint}: it has no "
                      f"{variable.path}")
