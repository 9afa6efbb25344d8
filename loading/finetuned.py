"""A fine-tuned model on disk: the encoder and every task head as one
run_finetuning.py trial left them, with what it takes to rebuild them.

  DIR/finetuned_model.json  "format", "version"; "finetuning_config" (the
                            run's FinetuningConfig), "pretrain_config" (the
                            pretraining run it started from),
                            "model_config" (the encoder's
                            TransformerConfig), "tasks" ({name: {"head":
                            kind, "labels": [...] or null, ...}}: what
                            rebuilds and serves each head), "vocab_file"
                            (the copy's name), "trial", "seed",
                            "results" (its dev metrics), "kept" (best or
                            last), "run" (an id of the run that wrote it)
  DIR/model.safetensors     float32 weights (Keras orientation): the
                            encoder under interop/weights.py's names
                            (electra.*), each head's as
                            heads/<task>/<its path inside the head>
  DIR/vocab.txt             the vocabulary (or the SentencePiece model)

Written whole or not at all (util/outputs.py's write_dir). Read by
fine-tuning (--init-checkpoint, --do-predict), export_model.py and, as an
encoder alone, by loading/sources.py (any --init-checkpoint). Fine-tuning
code (finetune/) builds the Keras model from it; this module reads and
writes files only.
"""

import dataclasses
import json
import os
import re
import shutil

import numpy as np
from safetensors import numpy as safetensors_np

from model.config import TransformerConfig
from pretrain.run_config import config_from_json
from util import outputs
from util import storage
from util.errors import UserError
from util.text_files import read_json

MODEL_FILE = "finetuned_model.json"
WEIGHTS_FILE = "model.safetensors"
FORMAT = "electra-tf2 fine-tuned model"
VERSION = 1
HEADS = "heads/"
ENCODER = "electra."


def is_finetuned(path):
  """Whether `path` is a folder holding a fine-tuned model."""
  return bool(path) and storage.exists(os.path.join(path, MODEL_FILE))


@dataclasses.dataclass
class Finetuned:
  """A fine-tuned model's description; weights are read on demand."""
  path: str
  finetuning_config: dict  # the FinetuningConfig's fields, as saved
  pretrain_config: object  # PretrainingConfig
  model_config: TransformerConfig
  tasks: dict  # {name: {"head": kind, "labels": list or None, ...}}
  vocab_file: str  # the copy in `path`
  info: dict  # trial, seed, results, kept, run

  def weights(self):
    """(encoder {name: array}, {task: {name inside its head: array}})."""
    path = os.path.join(self.path, WEIGHTS_FILE)
    try:
      with storage.open_file(path, "rb") as f:
        tensors = safetensors_np.load(f.read())
    except Exception as e:  # pylint: disable=broad-except
      # safetensors raises its own SafetensorError on a damaged file.
      raise UserError(f"cannot read {path}: {str(e)[:200]}") from None
    encoder = {n: a for n, a in tensors.items() if n.startswith(ENCODER)}
    heads = {name: {} for name in self.tasks}
    for name, array in tensors.items():
      if name.startswith(HEADS):
        task, _, inner = name[len(HEADS):].partition("/")
        if task not in heads:
          raise UserError(f"{path}: weight {name} belongs to no task of "
                          f"{MODEL_FILE}")
        heads[task][inner] = array
    if not encoder:
      raise UserError(f"{path} holds no encoder weights")
    missing = [t for t, w in heads.items() if not w]
    if missing:
      raise UserError(f"{path} holds no weights of the {missing[0]} head")
    return encoder, heads

  def encoder_weights(self):
    return self.weights()[0]


def load(path):
  """The fine-tuned model in folder `path` (one clear error when the
  folder is not one, or is damaged)."""
  where = os.path.join(path, MODEL_FILE)
  record = read_json(where)
  if not isinstance(record, dict) or record.get("format") != FORMAT:
    raise UserError(f"{where} is not a fine-tuned model written by "
                    "run_finetuning.py")
  if record.get("version") != VERSION:
    raise UserError(f"{where}: version {record.get('version')!r} is not "
                    f"one this code reads ({VERSION})")
  for key, kind in (("finetuning_config", dict), ("pretrain_config", dict),
                    ("model_config", dict), ("tasks", dict),
                    ("vocab_file", str)):
    if not isinstance(record.get(key), kind):
      raise UserError(f"{where}: '{key}' is missing or not a "
                      f"{'JSON object' if kind is dict else 'string'}")
  tasks = record["tasks"]
  for name, task in tasks.items():
    labels = task.get("labels") if isinstance(task, dict) else None
    if not isinstance(task, dict) or not isinstance(task.get("head"), str) \
        or not (labels is None or (isinstance(labels, list) and all(
            isinstance(x, str) for x in labels))):
      raise UserError(f"{where}: task '{name}' needs a 'head' string and "
                      "'labels' (a list of strings, or null)")
  if not tasks:
    raise UserError(f"{where} names no task")
  pretrain_config = config_from_json(json.dumps(record["pretrain_config"]),
                                     f"{where} (pretrain_config)")
  known = {f.name for f in dataclasses.fields(TransformerConfig)}
  fields = record["model_config"]
  unknown = sorted(set(fields) - known)
  if unknown:
    raise UserError(f"{where}: unknown model_config field '{unknown[0]}'")
  try:
    model_config = TransformerConfig(**fields)
  except TypeError as e:
    raise UserError(f"{where}: model_config: {e}") from None
  vocab = os.path.join(path, os.path.basename(record["vocab_file"]))
  if not storage.exists(vocab):
    raise UserError(f"{path} has no {os.path.basename(vocab)} (the "
                    "vocabulary the model was fine-tuned with)")
  pretrain_config.vocab_file = vocab
  info = {k: v for k, v in record.items() if k not in (
      "format", "version", "finetuning_config", "pretrain_config",
      "model_config", "tasks", "vocab_file")}
  return Finetuned(path, record["finetuning_config"], pretrain_config,
                   model_config, tasks, vocab, info)


def save_tensors(tensors, path):
  """safetensors' save_file, its failures as the OSError they are (its
  SafetensorError says "... No space left on device (os error 28)"), so
  that outputs.write_dir says them in one line."""
  try:
    safetensors_np.save_file(tensors, path)
  except Exception as e:  # pylint: disable=broad-except
    if isinstance(e, OSError):
      raise
    code = re.search(r"\(os error (\d+)\)", str(e))
    if code:
      raise OSError(int(code.group(1)), os.strerror(int(code.group(1))),
                    path) from None
    raise OSError(str(e)[:200]) from None


def save(path, *, finetuning_config, pretrain_config, model_config, tasks,
         encoder, heads, vocab_file, info, overwrite=False):
  """Writes a fine-tuned model to folder `path`, whole or not at all.

  finetuning_config, pretrain_config, model_config: dataclasses; tasks:
  {name: {"head": kind, "labels": ...}}; encoder: {name: array}
  (interop/weights.py names); heads: {task: {name inside the head:
  array}}; vocab_file: copied in; info: trial, seed, results, ..."""
  tensors = {name: np.ascontiguousarray(a, np.float32)
             for name, a in encoder.items()}
  for task, named in heads.items():
    tensors.update({f"{HEADS}{task}/{name}": np.ascontiguousarray(
        a, np.float32) for name, a in named.items()})
  vocab_name = ("vocab.txt" if vocab_file.endswith(".txt") else
                os.path.basename(vocab_file))
  pretrain_values = dataclasses.asdict(pretrain_config)
  record = dict(
      format=FORMAT, version=VERSION,
      finetuning_config=dataclasses.asdict(finetuning_config),
      pretrain_config=pretrain_values,
      model_config=dataclasses.asdict(model_config), tasks=tasks,
      vocab_file=vocab_name, **info)

  def write(folder):
    save_tensors(tensors, os.path.join(folder, WEIGHTS_FILE))
    with storage.open_file(vocab_file, "rb") as src, open(
        os.path.join(folder, vocab_name), "wb") as dst:
      shutil.copyfileobj(src, dst)
    with open(os.path.join(folder, MODEL_FILE), "w") as f:
      json.dump(record, f, indent=2)

  outputs.write_dir(path, write, overwrite=overwrite)
