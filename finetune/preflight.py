"""What run_finetuning.py checks before TensorFlow loads, which takes
seconds (half a minute from a cold disk): the model to start from is
there, and so is every file the tasks read. Pure Python, no Keras."""

import os

from finetune import data_layout
from loading import finetuned as finetuned_files
from loading.presence import check_model_present
from loading.presence import check_vocab_present
from loading.presence import run_config_at
from model.config import get_model_config
from util import storage
from util.errors import UserError
from util.text_files import read_json

BACKEND_NAMES = {"tensorflow": "TensorFlow", "jax": "JAX"}


def run_path(config):
  """DATA_DIR/models/NAME, the pretraining run by the data-dir convention
  ("" without both)."""
  return (os.path.join(config.data_dir, "models", config.model_name)
          if config.data_dir and config.model_name else "")


def kept_model_path(config):
  """OUTPUT_DIR/<tasks>_model: where a run of these tasks keeps its model."""
  return os.path.join(config.output_dir, f"{'_'.join(config.tasks)}_model")


def find_finetuned(config):
  """The fine-tuned model at --init-checkpoint; with --do-predict (one
  must be found) or --no-do-train (to evaluate it), else the one a run of
  these tasks kept in output_dir."""
  if finetuned_files.is_finetuned(config.init_checkpoint):
    return finetuned_files.load(config.init_checkpoint)
  if config.do_train and not config.do_predict:
    return None
  if not config.do_predict:  # evaluate: the kept model when there is one
    explicit = config.init_checkpoint and (config.init_checkpoint !=
                                           run_path(config))
    kept = kept_model_path(config) if config.output_dir else ""
    if explicit or not finetuned_files.is_finetuned(kept):
      return None
    return finetuned_files.load(kept)
  if config.init_checkpoint and config.init_checkpoint != run_path(config):
    raise UserError(f"{config.init_checkpoint} is not a fine-tuned model "
                    f"(no {finetuned_files.MODEL_FILE}): --do-predict "
                    "needs one run_finetuning.py kept")
  if not config.output_dir:
    raise UserError("--do-predict needs --init-checkpoint (a fine-tuned "
                    "model's folder) or --output-dir")
  kept = kept_model_path(config)
  if not finetuned_files.is_finetuned(kept):
    raise UserError(f"no fine-tuned model at {kept}: fine-tune "
                    f"{', '.join(config.tasks)} first (keep_model best or "
                    "last), or pass --init-checkpoint a fine-tuned "
                    "model's folder")
  return finetuned_files.load(kept)


def check_positions(config, path):
  """A max_seq_length given above the positions of the run at `path`
  (its pretrain_config.json says them), as the trainer would say it."""
  if config.max_seq_length_is_default:  # cut to fit by the trainer
    return
  saved = run_config_at(path)
  if saved is None:
    return
  try:
    positions = get_model_config(saved.model_size, saved.vocab_size,
                                 saved.model_hparam_overrides
                                 ).max_position_embeddings
  except UserError:
    return  # loading says what is wrong with the run
  positions = config.model_hparam_overrides.get("max_position_embeddings",
                                                positions)
  if config.max_seq_length > positions:
    raise UserError(f"max_seq_length {config.max_seq_length} exceeds the "
                    f"model's {positions} positions ({path}: "
                    f"{saved.model_size} model); pass --max-seq-length "
                    f"{positions} or less")


def check_backend(config, backend):
  """The output folder's record of trials (finetune/trial_record.py) was
  written on this backend: a run on the other one is refused at once."""
  if config.overwrite or not config.output_dir or config.do_predict:
    return
  path = os.path.join(config.output_dir,
                      f"{'_'.join(config.tasks)}_trials.json")
  if "://" in path or not storage.exists(path):
    return
  try:
    record = read_json(path)
  except UserError:
    return  # the record's own check says what is wrong with it
  recorded = record.get("backend") if isinstance(record, dict) else None
  if recorded and recorded != backend:
    name = BACKEND_NAMES.get(recorded, recorded)
    how = ("unset KERAS_BACKEND" if recorded == "tensorflow" else
           f"set KERAS_BACKEND={recorded}")
    raise UserError(
        f"{path} records a {name} run's trials, but this run is on "
        f"{BACKEND_NAMES.get(backend, backend)} (KERAS_BACKEND={backend}): "
        f"{how} to go on with them, or use another --output-dir for a new "
        "run")


def check(config, backend="tensorflow"):
  """The model and the data files are there, the output folder's trials
  were run on this backend (config: validated)."""
  check_backend(config, backend)
  if find_finetuned(config) is None:
    path = config.init_checkpoint or run_path(config)
    check_model_present(path)
    if not config.task_arrays:  # its vocabulary: the export's (adopt)
      check_vocab_present(path, config.vocab_file, config.data_dir)
    check_positions(config, path)
  if not config.do_predict and not config.task_arrays:  # validate read it
    data_layout.check_files(config)
