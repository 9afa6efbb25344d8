"""run_finetuning.py's `task_arrays`: the tasks' rows read from a folder
that finetune/arrays.py exported (prepare_gpu_slot.py --glue-dir), not
from their raw files, so a machine without TensorFlow or the tokenizer
(JAX on a GPU) fine-tunes, evaluates and scores them as a run that read
and featurized them itself.

The export fixed how the rows were featurized: those settings
(FEATURIZATION) are the export's, and one given otherwise is refused.
A task whose scorer reads its featurization's metadata (SQuAD's token
maps, tagging's word pieces: the "_" keys, not exported) is refused, as
are the test split and --do-predict (only train and dev were exported).
"""

import gzip
import importlib
import json
import os

import numpy as np

from util import storage
from util.paths import located
from util.errors import UserError

# The settings the export featurized the rows with.
FEATURIZATION = ("train_examples_limit", "eval_examples_limit",
                 "double_unordered", "do_lower_case",
                 "normalize_regression_labels")


def read_export(path):
  """The metadata of an export --task-arrays can read (its examples
  there too); one line naming the folder where it is not one."""
  # pylint: disable-next=g-import-not-at-top
  from finetune import arrays  # it imports this config's module
  meta_path = os.path.join(path, arrays.META)
  if not storage.exists(meta_path):
    raise UserError(f"{path} holds no exported tasks ({arrays.META} "
                    "missing): export them with prepare_gpu_slot.py "
                    "--glue-dir")
  meta = json.loads(storage.read_text(meta_path))
  if meta.get("format") != arrays.FORMAT:
    raise UserError(f"task_arrays {path}: {meta_path} is not an "
                    f"{arrays.FORMAT} file")
  if not storage.exists(os.path.join(path, arrays.EXAMPLES)):
    raise UserError(f"{path} has no {arrays.EXAMPLES} (exported before "
                    "2026-12-06): export the tasks again with "
                    "prepare_gpu_slot.py --glue-dir")
  return meta


def adopt(config, defaults):
  """Checks a config with `task_arrays` against the export and takes its
  featurization settings (`defaults`: a FinetuningConfig as built, to tell
  a given setting from a default one). Pure Python: before any import."""
  meta = read_export(config.task_arrays)
  exported = meta["tasks"]
  for name in config.tasks:
    if name not in exported:
      raise UserError(f"task_arrays {config.task_arrays} has no {name} "
                      f"(it holds {', '.join(exported)})")
    if exported[name].get("scorer_metadata"):
      raise UserError(
          f"task_arrays: {name}'s scorer reads its featurization's "
          f"{', '.join(exported[name]['scorer_metadata'])}, which the "
          "arrays do not hold: fine-tune it from its raw files")
  if config.do_predict or config.write_test_outputs:
    raise UserError("task_arrays hold the train and dev rows only: "
                    "--do-predict and write_test_outputs read the raw files")
  npz = [p for p in config.teacher_paths.values() if not p.endswith(".npz")]
  if config.distill and npz:
    raise UserError(f"task_arrays: teacher {npz[0]} is a model, which would"
                    " featurize the rows again: give its outputs' .npz")
  saved = meta["config"]
  # The export's vocabulary (its ids): a kept model carries a copy.
  config.vocab_file = config.vocab_file or located(saved["vocab_file"])
  if (config.do_train and config.keep_model != "none" and
      not storage.exists(config.vocab_file)):
    raise UserError(f"vocab file not found: {config.vocab_file} (the "
                    "export's), which a kept model carries: pass "
                    "--vocab-file, or keep_model none")
  for key in FEATURIZATION:
    value = getattr(config, key)
    if value != saved[key] and value != getattr(defaults, key):
      raise UserError(f"{key} {value!r}: task_arrays {config.task_arrays} "
                      f"was featurized with {saved[key]!r}")
    setattr(config, key, saved[key])
  lengths = {exported[t]["max_seq_length"] for t in config.tasks}
  if config.max_seq_length_is_default:
    config.max_seq_length = max(lengths)
  elif lengths != {config.max_seq_length}:
    raise UserError(f"max_seq_length {config.max_seq_length}: task_arrays "
                    f"{config.task_arrays} was featurized with "
                    f"{', '.join(map(str, sorted(lengths)))}")


class ExportedTask:
  """A task whose rows are the export's: get_examples gives the exported
  examples of a split, featurize their exported features, so TaskData,
  the scorers and the baselines read them as they read a task's own."""

  def __init__(self, task, examples, columns):
    self._task, self._examples, self._columns = task, examples, columns

  def __getattr__(self, name):
    return getattr(self._task, name)

  def get_examples(self, split):
    if split not in self._examples:
      raise UserError(f"task_arrays: {self.name} has no {split} rows "
                      "(only train and dev are exported)")
    return self._examples[split]

  def featurize(self, examples, is_training):
    split = "train" if is_training else "dev"
    if len(examples) != len(self._examples[split]):
      raise UserError(f"task_arrays: {self.name} can featurize its "
                      f"exported {split} examples only, not other rows")
    return self._columns[split]


def _features(columns):
  """A split's model inputs as the task's featurize gives them (NumPy;
  ids, mask and segments unpacked, labels widened back)."""
  # pylint: disable-next=g-import-not-at-top
  from finetune import arrays
  import keras  # pylint: disable=g-import-not-at-top
  features = {k: keras.ops.convert_to_numpy(v) for k, v in
              arrays.unpack_features(columns).items()}
  for key, value in features.items():
    if value.dtype.kind in "iu":
      features[key] = value.astype(np.int32)
  return features


def exported_tasks(config, tasks):
  """`tasks` (task_builder's, no tokenizer) as ExportedTasks over
  config.task_arrays; the vocabulary size the export was made with."""
  # pylint: disable-next=g-import-not-at-top
  from finetune import arrays
  data = arrays.load(config.task_arrays)
  with storage.open_file(os.path.join(config.task_arrays, arrays.EXAMPLES),
                         "rb") as f:
    examples = json.loads(gzip.decompress(f.read()))
  out = []
  for task in tasks:
    entry = data.meta["tasks"][task.name]
    module, _, name = entry["example_class"].rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    task.restore_labels(entry["labels"])
    rows = {split: [cls(**e) for e in listed]
            for split, listed in examples[task.name].items()}
    columns = {split: _features(data.splits[task.name][split])
               for split in rows}
    out.append(ExportedTask(task, rows, columns))
  return out, data.meta["vocab_size"]



def check_vocab_size(vocab_size, pretrain_config, path):
  """The export's vocabulary is the pretrained model's (as the tokenizer's
  size is checked when the rows are read here)."""
  if vocab_size != pretrain_config.vocab_size:
    raise UserError(f"task_arrays {path} was made with a {vocab_size}-entry "
                    f"vocabulary but the pretrained model has "
                    f"{pretrain_config.vocab_size}: export the tasks with "
                    "its vocab file")
