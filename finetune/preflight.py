"""What run_finetuning.py checks before TensorFlow loads, which takes
seconds (half a minute from a cold disk): the model to start from is
there, and so is every file the tasks read. Pure Python, no Keras."""

import os

from finetune import data_layout
from loading import finetuned as finetuned_files
from loading.presence import check_model_present
from loading.presence import check_vocab_present
from util.errors import UserError


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


def check(config):
  """The model and the data files are there (config: validated)."""
  if find_finetuned(config) is None:
    check_model_present(config.init_checkpoint or run_path(config))
    check_vocab_present(config.init_checkpoint or run_path(config),
                        config.vocab_file, config.data_dir)
  if not config.do_predict:
    data_layout.check_files(config)
