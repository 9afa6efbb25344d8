"""Fine-tuning tasks as NumPy arrays: what the TensorFlow-free JAX
fine-tuning (finetune/jax_trainer.py) trains and predicts on, on a machine
without TensorFlow or the tasks' raw files (a GPU slot, docs/gpu_slot.md).

`export` (on the CPU, where the tokenizer runs) featurizes each task's
train and dev examples exactly as run_finetuning.py does (the task's own
`featurize`: double_unordered pairs, train_examples_limit) into
  finetune.json  the FinetuningConfig, per task its head labels, rows and
                 train steps
  finetune.npz   "<task>/<split>/<column>": input_ids, num_tokens,
                 segment_a as pretrain/arrays.py packs them (multiple
                 choice: per option, [rows, C, ...]), the rest of
                 the task's model inputs (labels; example_index, which
                 SQuAD's head echoes for its scorer) as they are
`load` reads it back with NumPy only. The slot returns each trial's dev
outputs; `score` (on the CPU again) featurizes the dev examples once more
and feeds those outputs to the task's own scorer, so the metrics are the
ones run_finetuning.py prints.
"""

import dataclasses
import gzip
import importlib
import io
import json
import math
import os

import numpy as np

from finetune import featurization
from finetune.config import FinetuningConfig
from pretrain import arrays as pretrain_arrays
from util import storage
from util.paths import located
from util.paths import portable
from util.config import apply_overrides
from util.errors import UserError

META = "finetune.json"
DATA = "finetune.npz"
EXAMPLES = "finetune_examples.json.gz"  # each split's examples, for scorers
OUTPUTS = "finetune_outputs.npz"  # a slot's dev outputs (run_gpu_slot.py)
# The model name of the control fine-tuned from random initialisation.
RANDOM_INIT = "random_init"
FORMAT = "electra-finetuning-arrays"
PACKED = ("input_ids", "input_mask", "segment_ids")


def _narrow(array):
  """A label array in the smallest dtype that holds it exactly."""
  array = np.asarray(array)
  if array.dtype.kind in "iu" and array.size:
    for dtype in (np.int8, np.int16):
      if array.min() >= np.iinfo(dtype).min and array.max() <= np.iinfo(
          dtype).max:
        return array.astype(dtype)
  return array


def pack_features(features, vocab_size, where):
  """Compact columns of a split's features (see the module docstring)."""
  # example_index kept: SQuAD's head echoes it for its scorer's check.
  inputs = featurization.model_inputs(features)
  # Multiple choice's rows are [C, T]: packed as C rows each, shaped back.
  lead = np.shape(inputs["input_ids"])[:-1]
  flat = (np.reshape(inputs[k], (-1, np.shape(inputs[k])[-1]))
          for k in PACKED)
  columns = {k: v.reshape(lead + v.shape[1:]) for k, v in
             pretrain_arrays.pack(*flat, vocab_size, where=where).items()}
  for key, value in inputs.items():
    if key not in PACKED:
      columns[key] = _narrow(value)
  return columns


def unpack_features(columns):
  """keras.ops features (int32 ids, mask, segments; labels as stored) of
  packed columns; inside a jitted step on the slot."""
  features = pretrain_arrays.unpack(
      {k: columns[k] for k in pretrain_arrays.COLUMNS})
  for key, value in columns.items():
    if key not in pretrain_arrays.COLUMNS:
      features[key] = value
  return features


def featurize_split(config, task, split):
  """(examples, features) of a task's train or dev split, limits applied,
  as run_finetuning.py reads and featurizes them."""
  n = (config.train_examples_limit if split == "train" else
       config.eval_examples_limit)
  examples = featurization.limit(task.get_examples(split), n)
  if not examples:
    raise UserError(f"{task.name}: no {split} examples")
  return examples, task.featurize(examples, is_training=split == "train")


def _pack(config, tasks, featurized, vocab_size):
  """(metadata, {"<task>/<split>/<column>": array}) of `featurized`
  ({task name: {split: (examples, features)}})."""
  meta = {"format": FORMAT, "config": dataclasses.asdict(config),
          "vocab_size": vocab_size, "tasks": {}}
  arrays = {}
  for task in tasks:
    entry = {}
    for split in ("train", "dev"):
      if split not in featurized[task.name]:  # the JAX loop's: train only
        continue
      examples, features = featurized[task.name][split]
      for key, value in pack_features(features, vocab_size,
                                      f"{task.name} {split}").items():
        arrays[f"{task.name}/{split}/{key}"] = value
      entry[f"{split}_examples"] = len(examples)
      entry[f"{split}_rows"] = int(len(features["input_ids"]))
    entry["epochs"] = config.epochs_for(task.name)
    entry["train_steps"] = max(1, math.ceil(
        entry["train_rows"] * entry["epochs"] / config.train_batch_size))
    entry["head"] = task.head_kind
    # What run_finetuning.py's task_arrays needs to score (ExportedTask):
    # the examples' class, and the featurization's metadata ("_" keys,
    # not exported) its scorer would read.
    example = featurized[task.name]["train"][0][0]
    entry["example_class"] = (f"{type(example).__module__}."
                              f"{type(example).__qualname__}")
    entry["scorer_metadata"] = sorted(
        k for k in featurized[task.name]["train"][1] if k.startswith("_"))
    entry["labels"] = task.head_labels()
    # Each task's own reading of the data (a tagging task's folder, its
    # default length), for scoring its outputs back on the CPU.
    entry["raw_data_dir"] = task.config.raw_data_dir
    entry["max_seq_length"] = task.config.max_seq_length
    meta["tasks"][task.name] = entry
  return meta, arrays


def _splits(meta, arrays):
  splits = {name: {} for name in meta["tasks"]}
  for key, value in arrays.items():
    task, split, column = key.split("/")
    splits[task].setdefault(split, {})[column] = value
  return splits


def export(config, tokenizer, tasks, out_dir, vocab_size):
  """Featurizes `tasks` (finetune/task_builder.py's; each may carry its own
  copy of `config` with its own raw_data_dir) into out_dir; returns the
  metadata written."""
  del tokenizer  # the tasks carry it
  featurized = {task.name: {split: featurize_split(config, task, split)
                            for split in ("train", "dev")} for task in tasks}
  meta, arrays = _pack(config, tasks, featurized, vocab_size)
  storage.makedirs(out_dir)
  buffer = io.BytesIO()
  np.savez_compressed(buffer, **arrays)
  with storage.open_file(os.path.join(out_dir, DATA), "wb") as f:
    f.write(buffer.getvalue())
  examples = {task: {split: [dataclasses.asdict(e) for e in pair[0]]
                     for split, pair in splits.items()}
              for task, splits in featurized.items()}
  with storage.open_file(os.path.join(out_dir, EXAMPLES), "wb") as f:
    f.write(gzip.compress(json.dumps(examples).encode(), mtime=0))
  storage.write_text_atomic(os.path.join(out_dir, META),
                     json.dumps(portable(meta), indent=2))
  return meta


def in_memory(config, tasks, featurized, vocab_size):
  """The TaskArrays `export` then `load` would give, without the files:
  run_finetuning.py's JAX path (finetune/jax_run.py), which featurized
  the splits itself (`featurized`: {task: {split: (examples, features)}})."""
  meta, arrays = _pack(config, tasks, featurized, vocab_size)
  return TaskArrays(meta, config, _splits(meta, arrays))


@dataclasses.dataclass
class TaskArrays:
  """A loaded folder: metadata, the config, {task: {split: columns}}."""
  meta: dict
  config: FinetuningConfig
  splits: dict
  path: str = ""

  @property
  def task_names(self):
    return list(self.meta["tasks"])

  def rows(self, task, split):
    return len(self.splits[task][split]["input_ids"])


def load_config(meta, where="finetune.json"):
  """The FinetuningConfig an export recorded (its paths, recorded relative
  to the repository root, made whole again)."""
  config = apply_overrides(FinetuningConfig(), meta["config"], where)
  config.vocab_file = located(config.vocab_file)
  config.raw_data_dir = located(config.raw_data_dir)
  return config


def load(path):
  """The TaskArrays in folder `path` (written by `export`)."""
  meta_path = os.path.join(path, META)
  if not storage.exists(meta_path):
    raise UserError(f"no fine-tuning arrays at {path} ({META} missing): "
                    "export them with prepare_gpu_slot.py --glue-dir DIR")
  meta = json.loads(storage.read_text(meta_path))
  if meta.get("format") != FORMAT:
    raise UserError(f"{meta_path} is not an {FORMAT} file")
  config = load_config(meta, meta_path)
  with storage.open_file(os.path.join(path, DATA), "rb") as f:
    with np.load(f, allow_pickle=False) as data:
      arrays = {key: data[key] for key in data.files}
  return TaskArrays(meta, config, _splits(meta, arrays), path)


def task_config(config, meta, name):
  """The config task `name` was exported with (its folder and length)."""
  entry = meta["tasks"][name]
  return dataclasses.replace(
      config, task_names=name,
      raw_data_dir=located(entry.get("raw_data_dir", config.raw_data_dir)),
      max_seq_length=entry.get("max_seq_length", config.max_seq_length))


def score(task, examples, features, outputs):
  """The task's metrics of a trial's dev `outputs` ({key: [rows, ...]}),
  through its own scorer, as run_finetuning.py scores."""
  scorer = task.get_scorer(examples, features)
  scorer.update(outputs)
  return scorer.get_results()
