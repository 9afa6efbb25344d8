"""A fine-tuning run's data: each task's splits, read and featurized once
per run, and the train batches made of them."""

import math

from finetune import data_layout
from finetune import length_groups
from finetune import padding
from finetune import task_order
from finetune.featurization import limit
from finetune.featurization import model_inputs
from util.errors import UserError


class TaskData:
  """The tasks' splits, read once and shared by every trial (and a BAM
  teacher's predictions); the train steps each task gets."""

  def __init__(self, config, tasks, strategy):
    self.config = config
    self.tasks = tasks
    self.strategy = strategy
    self._data = {}  # (task, split) -> (examples, features)

  def examples_and_features(self, task, split):
    """A split's examples and features, made once per run (not per trial)."""
    key = (task.name, split)
    if key not in self._data:
      config = self.config
      n = (config.train_examples_limit if split == "train" else
           config.eval_examples_limit)
      examples = limit(task.get_examples(split), n)
      if not examples:
        raise UserError(f"{task.name}: no {split} examples")
      self._data[key] = (examples, task.featurize(
          examples, is_training=split == "train"))
    return self._data[key]

  def examples(self, task, split):
    """A split's examples as this run reads them (limits applied), read
    again only when no trial needed them (no featurizing)."""
    if (task.name, split) in self._data:
      return self._data[(task.name, split)][0]
    config = self.config
    return limit(task.get_examples(split), config.train_examples_limit if
                 split == "train" else config.eval_examples_limit)

  def add(self, task_name, split, examples, features):
    """Rows that are not one of the task's splits (a predict file, a
    teacher's featurization), read as a split is."""
    self._data[(task_name, split)] = (examples, features)

  def discard(self, task_name, split):
    del self._data[(task_name, split)]

  def check_inputs(self):
    """Reads and featurizes every split this run needs (once), so that
    missing or bad data is said before `trial 1/N` and any training."""
    for task in self.tasks:
      for split in data_layout.needed_splits(self.config):
        self.examples_and_features(task, split)

  def train_data(self, teacher_outputs=None):
    """{task: (model inputs of its train rows, its steps)}, with the
    teacher's outputs beside the labels when given (BAM)."""
    config = self.config
    data = {}
    for task in self.tasks:
      examples, features = self.examples_and_features(task, "train")
      features = model_inputs(features)
      if teacher_outputs is not None:
        features = dict(features, teacher_outputs=teacher_outputs[task.name])
      n = len(features["input_ids"])
      if not n:
        raise UserError(f"{task.name}: no training examples")
      steps = max(1, math.ceil(n * config.epochs_for(task.name) /
                               config.train_batch_size))
      data[task.name] = (features, steps)
      print(f"{task.name}: {len(examples)} train examples, {n} rows, "
            f"{steps} steps", flush=True)
    return data

  def train_order(self, data, seed):
    """Which task each step trains (data: train_data's;
    finetune/task_order.py)."""
    return task_order.train_order(
        self.config, {name: s for name, (_, s) in data.items()},
        {name: len(f["input_ids"]) for name, (f, _) in data.items()}, seed)

  def batches(self, features, batch_size, seed, min_length=1):
    """An iterator over train_dataset's batches (on the strategy's
    replicas)."""
    ds = self.train_dataset(features, batch_size, seed, min_length)
    if self.strategy.num_replicas_in_sync > 1:
      ds = self.strategy.experimental_distribute_dataset(ds)
    return iter(ds)

  def train_dataset(self, features, batch_size, seed, min_length=1):
    """Global batches, each split evenly over the strategy's replicas, each
    cut to its longest row (finetune/padding.py) after batching: the rows
    and their order are the shuffle's. tf.data's autotuning is off: the
    pipeline has nothing to tune, and freeing its iterator waited for the
    autotune thread's sleep to end (up to 60 s seen after training, gdb:
    Model::OptimizeLoop in a timed wait; docs/performance.md)."""
    # TensorFlow only here: the JAX path imports this module without it.
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    ds = tf.data.Dataset.from_tensor_slices(features)
    ds = ds.shuffle(len(features["input_ids"]), seed=seed,
                    reshuffle_each_iteration=True).repeat()
    ds = ds.batch(batch_size, drop_remainder=True)
    if self.config.group_by_length:  # finetune/length_groups.py
      ds = ds.batch(self.config.group_by_length).enumerate().map(
          length_groups.tf_grouper(self.config.group_by_length, seed)
      ).unbatch()
    multiple = padding.multiple_for(self.config,
                                    features["input_ids"].shape[-1])
    if multiple:
      ds = ds.map(padding.tf_trimmer(multiple, min_length))
    options = tf.data.Options()
    options.autotune.enabled = False
    return ds.prefetch(2).with_options(options)

