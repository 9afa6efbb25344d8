"""The fine-tuning driver: any tasks, one encoder, `num_trials` seeds.

For each trial: build the model, copy the pretrained encoder in, train on
the tasks' train sets (several tasks: batches interleaved in proportion to
each task's steps), evaluate on dev, write predictions; then report the
median, mean and standard deviation of every metric over the trials.
"""

import json
import math
import os
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from finetune import scorer as metrics
from finetune import task_builder
from finetune.model import FinetuningModel
from finetune.model import model_config_for
from finetune.model import pretrained_encoder_weights
from finetune.model import set_encoder_weights
from finetune.optimization import create_optimizer
from loading import runs
from loading.sources import find_pretrained
from training import distribution
from training.progress import Progress
from training.progress import format_seconds
from util import outputs
from util import storage
from util.errors import UserError


def model_inputs(features):
  """The arrays fed to the model (keys with "_" hold Python metadata)."""
  return {k: v for k, v in features.items() if not k.startswith("_")}


def limit(examples, n):
  return examples[:n] if n else examples


class FinetuningRunner:
  """Loads the pretrained model's config, the tokenizer and the tasks."""

  def __init__(self, config):
    self.config = config
    self.pretrained = find_pretrained(config.init_checkpoint or (
        os.path.join(config.data_dir, "models", config.model_name)
        if config.data_dir and config.model_name else ""))
    pretrain_config = self.pretrained.config
    config.validate(pretrain_config.model_size)
    self.model_config = model_config_for(self.pretrained, config)
    if config.max_seq_length > self.model_config.max_position_embeddings:
      raise UserError(
          f"max_seq_length {config.max_seq_length} exceeds the model's "
          f"{self.model_config.max_position_embeddings} positions")
    self.tokenizer = runs.load_tokenizer_for(pretrain_config, config.vocab_file,
                                             config.data_dir)
    distribution.set_precision(config.mixed_precision)
    self.tasks = task_builder.get_tasks(config, self.tokenizer)
    self._check_outputs()
    # Read once, shared by every trial.
    self._encoder_weights = None
    self._data = {}  # (task, split) -> (examples, features)

  # ---------------------------------------------------------- outputs
  def _prediction_path(self, task, split, trial):
    return os.path.join(self.config.output_dir,
                        f"{task.name}_{split}_predictions_trial{trial}"
                        f"{task.predictions_ext}")

  def planned_outputs(self):
    """Every prediction file this run will write."""
    config = self.config
    splits = (["dev"] if config.do_eval else []) + (
        ["test"] if config.write_test_outputs else [])
    return [f for trial in range(config.num_trials) for task in self.tasks
            for split in splits
            for f in task.output_files(self._prediction_path(task, split,
                                                             trial))]

  def _check_outputs(self):
    """Refuses, before any work, to replace an earlier run's files."""
    if self.config.overwrite:
      return
    existing = [f for f in self.planned_outputs() if storage.exists(f)]
    if existing:
      more = f" (and {len(existing) - 1} more)" if len(existing) > 1 else ""
      raise UserError(f"{existing[0]}{more} already exists: pass "
                      "--overwrite to replace, or another --output-dir "
                      "(nothing was written)")

  # ------------------------------------------------------------- data
  def _examples_and_features(self, task, split):
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

  def _train_data(self):
    config = self.config
    data = {}
    for task in self.tasks:
      examples, features = self._examples_and_features(task, "train")
      features = model_inputs(features)
      n = len(features["input_ids"])
      if not n:
        raise UserError(f"{task.name}: no training examples")
      steps = max(1, math.ceil(n * config.epochs_for(task.name) /
                               config.train_batch_size))
      data[task.name] = (features, steps)
      print(f"{task.name}: {len(examples)} train examples, {n} rows, "
            f"{steps} steps", flush=True)
    return data

  def _batches(self, features, batch_size, seed):
    ds = tf.data.Dataset.from_tensor_slices(features)
    ds = ds.shuffle(len(features["input_ids"]), seed=seed,
                    reshuffle_each_iteration=True).repeat()
    return iter(ds.batch(batch_size, drop_remainder=True).prefetch(2))

  @staticmethod
  def schedule(steps_by_task):
    """Which task each step trains: tasks interleaved evenly, each task's
    steps spread over the run in proportion to its count."""
    order = []
    for name, steps in steps_by_task.items():
      order += [((i + 0.5) / steps, name) for i in range(steps)]
    return [name for _, name in sorted(order)]

  # ------------------------------------------------------------ trials
  def _build(self, seed):
    keras.utils.set_random_seed(seed)
    model = FinetuningModel(self.model_config, self.tasks,
                            name="finetuning")
    for task in self.tasks:  # creates the variables of every head
      split = "train" if self.config.do_train else "dev"
      _, features = self._examples_and_features(task, split)
      model({k: v[:1] for k, v in model_inputs(features).items()},
            task_name=task.name, training=False)
    if self._encoder_weights is None:
      self._encoder_weights = pretrained_encoder_weights(self.pretrained,
                                                         self.config)
    set_encoder_weights(model.encoder, self._encoder_weights)
    return model

  def train(self, model, seed):
    config = self.config
    data = self._train_data()
    steps = {name: s for name, (_, s) in data.items()}
    order = self.schedule(steps)
    total = len(order)
    optimizer = create_optimizer(config, model.trainable_variables,
                                 self.model_config.num_hidden_layers, total,
                                 self.model_config.share_layers)
    iterators = {name: self._batches(features, config.train_batch_size, seed)
                 for name, (features, _) in data.items()}
    train_steps = {name: self._train_step(model, optimizer, name)
                   for name in data}
    print(f"fine-tuning {', '.join(data)} for {total} steps "
          f"(lr {config.learning_rate:g}, layer-wise decay "
          f"{config.layerwise_lr_decay:g}, batch {config.train_batch_size})",
          flush=True)
    start = last = time.time()
    losses, last_step = [], 0
    # Every log_every_steps, and also each tenth of the run (a short run
    # is not silent until its last step) and at least every 30 s.
    progress = Progress("step", total)
    for step, name in enumerate(order, 1):
      losses.append(float(train_steps[name](next(iterators[name]))))
      if not np.isfinite(losses[-1]):
        raise UserError(f"non-finite loss at step {step} ({name}); try a "
                        "lower learning_rate")
      if (step % config.log_every_steps == 0 or step == total or
          progress.due(step)):
        now = time.time()
        n = step - last_step
        rate = n * config.train_batch_size / max(now - last, 1e-9)
        eta = (total - step) * (now - start) / step
        print(f"step {step}/{total} | loss {np.mean(losses[-n:]):.4f} | "
              f"{rate:.1f} examples/s | elapsed "
              f"{format_seconds(now - start)}, ETA {format_seconds(eta)}",
              flush=True)
        last, last_step = now, step
    return float(np.mean(losses[-config.log_every_steps:]))

  def _train_step(self, model, optimizer, task_name):
    variables = model.variables_for(task_name)
    clip = self.config.clip_norm

    @tf.function
    def step(batch):
      with tf.GradientTape() as tape:
        loss, _ = model(batch, task_name=task_name, training=True)
        loss = tf.reduce_mean(loss)
      grads = tape.gradient(loss, variables)
      grads = [tf.convert_to_tensor(g) for g in grads]  # dense (see trainer)
      if clip > 0:
        grads, _ = tf.clip_by_global_norm(grads, clip)
      optimizer.apply(grads, variables)
      return loss

    return step

  def predict(self, model, task, split):
    """The task's scorer, fed with the model's outputs on `split`."""
    config = self.config
    examples, features = self._examples_and_features(task, split)
    scorer = task.get_scorer(examples, features)
    inputs = model_inputs(features)
    n = len(inputs["input_ids"])

    @tf.function(reduce_retracing=True)
    def step(batch):
      loss, outputs = model(batch, task_name=task.name, training=False)
      return dict(outputs, loss=loss)

    losses = []
    progress = Progress(f"{split} {task.name}", n, "examples", sys.stdout)
    for begin in range(0, n, config.eval_batch_size):
      batch = {k: v[begin:begin + config.eval_batch_size]
               for k, v in inputs.items()}
      out = {k: v.numpy() for k, v in step(batch).items()}
      losses.append(out.pop("loss"))
      scorer.update(out)
      progress.update(min(begin + config.eval_batch_size, n))
    progress.finish(done=n, always=False)
    return scorer, (float(np.mean(np.concatenate(losses))) if losses
                    else float("nan"))

  def run_trial(self, trial):
    config = self.config
    seed = config.seed + trial
    model = self._build(seed)
    results = {}
    if config.do_train:
      self.train(model, seed)
    for task in self.tasks:
      if config.do_eval:
        scorer, loss = self.predict(model, task, "dev")
        results[task.name] = dict(scorer.get_results(), loss=loss)
        scorer.write_predictions(self._output(
            self._prediction_path(task, "dev", trial)))
      if config.write_test_outputs:
        scorer, _ = self.predict(model, task, "test")
        path = self._output(self._prediction_path(task, "test", trial))
        scorer.write_predictions(path)
        print(f"wrote test predictions for {task.name}: {path}",
              flush=True)
    return results

  def _output(self, path):
    storage.makedirs(self.config.output_dir)
    return path

  def _check_inputs(self):
    """Reads and featurizes every split this run needs (once), so that
    missing or bad data is said before `trial 1/N` and any training."""
    config = self.config
    splits = {"train" if config.do_train else "dev"}  # _build's split
    splits |= ({"dev"} if config.do_eval else set()) | (
        {"test"} if config.write_test_outputs else set())
    for task in self.tasks:
      for split in ("train", "dev", "test"):
        if split in splits:
          self._examples_and_features(task, split)

  def run(self):
    config = self.config
    self._check_inputs()
    trials = []
    for trial in range(config.num_trials):
      print(
          f"trial {trial + 1}/{config.num_trials} (seed {config.seed + trial})",
          flush=True)
      trials.append(self.run_trial(trial))
      if trials[-1]:
        print(format_table(trials[-1]), flush=True)
    summary = summarize(trials)
    if summary:
      out = {"tasks": config.tasks, "num_trials": config.num_trials,
             "summary": summary, "trials": trials}
      path = self._results_path()
      outputs.write_text(path, json.dumps(out, indent=2))
      print(f"median over {config.num_trials} trial(s):", flush=True)
      print(format_table({t: {k: v["median"] for k, v in m.items()}
                          for t, m in summary.items()}), flush=True)
      print(json.dumps(summary), flush=True)
    return summary

  def _results_path(self):
    """A new results file: the time stamp, numbered if it is taken."""
    config = self.config
    stem = os.path.join(config.output_dir, f"results_{'_'.join(config.tasks)}_"
                        f"{time.strftime('%Y%m%d-%H%M%S')}")
    path, n = stem + ".json", 1
    while storage.exists(self._output(path)):
      n += 1
      path = f"{stem}_{n}.json"
    return path


def summarize(trials):
  """{task: {metric: {median, mean, std, values}}} over trials, plus the
  GLUE score when several GLUE tasks ran."""
  summary = {}
  for task in (trials[0] if trials else {}):
    summary[task] = {}
    for key in trials[0][task]:
      values = [t[task][key] for t in trials]
      summary[task][key] = {"median": float(np.median(values)),
                            "mean": float(np.mean(values)),
                            "std": float(np.std(values)),
                            "values": values}
  # The GLUE score of the GLUE tasks that ran (all eight: the papers').
  glue = [metrics.glue_average(t, require_all=False) for t in trials]
  if trials and all(g is not None for g in glue) and len(
      [t for t in trials[0] if t in metrics.GLUE_TASKS]) > 1:
    summary["glue"] = {"average": {
        "median": float(np.median(glue)), "mean": float(np.mean(glue)),
        "std": float(np.std(glue)), "values": glue}}
  return summary


def format_table(results):
  lines = []
  for task, values in results.items():
    for key, value in values.items():
      lines.append(f"  {task:<8} {key:<20} {value:8.3f}")
  return "\n".join(lines)
