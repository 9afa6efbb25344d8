"""The fine-tuning loop, one for both backends: any tasks, one encoder,
`num_trials` seeds.

For each trial: build the model, copy the pretrained encoder in, train on
the tasks' train sets (several tasks: batches interleaved in proportion to
each task's steps), evaluate on dev, write predictions; then report the
median, mean and standard deviation of every metric over the trials.

The best (or last) trial's model is kept in OUTPUT_DIR/<tasks>_model/
(loading/finetuned.py), and each finished trial is recorded in
OUTPUT_DIR/<tasks>_trials.json, so that the same command after a kill
goes on from the first unfinished trial. A fine-tuned model can also be
the start (--init-checkpoint: its encoder, and the heads of the tasks it
has) or, with --do-predict, predict any file of a task's layout.

Several processes (JAX, jax.distributed: finetune/jax_backend.py) train
and predict as one; process 0 alone reads the output folder's record and
writes (`is_chief`), its view of the record given to the others
(`_chief_decides`).

A backend's part is its subclass's: finetune/trainer.py (TensorFlow:
tf.function, tf.distribute, tf.data) and finetune/jax_backend.py (jit).
The rest, in finetune/: task_data.py (the splits, read once),
prediction.py, run_outputs.py (what a run writes, and that it replaces
no earlier run's files), trial_record.py (the record, the kept model) and
distillation.py (BAM's teacher outputs, dissertation chapter 3).
"""

import json
import os
import time

import keras
import numpy as np

from finetune import baselines
from finetune import preflight
from finetune import task_arrays
from finetune import task_builder
from finetune.config import model_size_of
from finetune.distillation import Teachers
from finetune.distillation import check_tasks
from finetune.featurization import limit
from finetune.model import FinetuningModel
from finetune.model import adopt_heads
from finetune.model import finetuned_model
from finetune.model import model_config_for
from finetune.model import pretrained_encoder_weights
from finetune.model import reused_heads
from finetune.model import set_encoder_weights
from finetune.model import set_head_weights
from finetune.run_outputs import RunOutputs
from finetune.summary import format_table
from finetune.summary import has_baseline
from finetune.summary import summarize
from finetune.summary import versus_baselines
from finetune.task_data import TaskData
from finetune.trial_record import TrialRecord
from loading import runs
from loading.sources import find_pretrained
from training.precision import set_precision
from util import outputs
from util import storage
from util.errors import UserError


class RowsAsRead:
  """A task whose get_examples gives the rows this run read (TaskData),
  for finetune/baselines.py's predictors."""

  def __init__(self, task, data):
    self._task, self._data = task, data

  def __getattr__(self, name):
    return getattr(self._task, name)

  def get_examples(self, split):
    return self._data.examples(self._task, split)


class FinetuningLoop:
  """Loads the pretrained model's config, the tokenizer and the tasks;
  runs the trials (or --do-predict) with its TaskData, Predictor,
  RunOutputs, TrialRecord and Teachers. A backend subclass gives the
  devices (`_devices`: an object with scope() and num_replicas_in_sync),
  the predictor (`_predictor`) and a trial's training (`train`); with
  several processes, which one writes and how they agree."""

  is_chief = True  # this process writes the run's files

  def __init__(self, config):
    self.config = config
    # A fine-tuned model (loading/finetuned.py) this run predicts with, or
    # starts from: its encoder, and the heads of the tasks it has.
    self.finetuned = preflight.find_finetuned(config)
    if self.finetuned and config.init_from == "generator":
      raise UserError(f"{self.finetuned.path} is a fine-tuned model: it has "
                      "one encoder, so init_from must be discriminator")
    if self.finetuned and (config.do_predict or not config.do_train):
      # Predict or evaluate: read and featurize as the model was trained.
      config = self.config = config.with_model_settings(
          self.finetuned.finetuning_config,
          f"{self.finetuned.path} (finetuning_config)")
    self.pretrained = find_pretrained(
        self.finetuned.path if self.finetuned else
        config.init_checkpoint or preflight.run_path(config))
    pretrain_config = self.pretrained.config
    # The pretraining run's config, as a kept model records it.
    self.origin_config = (self.finetuned.pretrain_config if self.finetuned
                          else pretrain_config)
    # Defaults that depend on the model (learning rate, layer-wise decay)
    # follow the model's size, now that it is known.
    config.validate(model_size_of(self.origin_config))
    self.model_config = model_config_for(self.pretrained, config)
    config.fit_max_seq_length(self.model_config.max_position_embeddings)
    if config.max_seq_length > self.model_config.max_position_embeddings:
      raise UserError(
          f"max_seq_length {config.max_seq_length} exceeds the model's "
          f"{self.model_config.max_position_embeddings} positions")
    # task_arrays: rows featurized already, no tokenizer (nor TensorFlow).
    self.tokenizer = None if config.task_arrays else runs.load_tokenizer_for(
        pretrain_config, config.vocab_file, config.data_dir)
    self.vocab_file = config.vocab_file if config.task_arrays else (
        runs.vocab_path_for(pretrain_config, config.vocab_file,
                            config.data_dir))
    set_precision(config.mixed_precision)
    self.strategy = self._devices(config)
    self.num_replicas = self.strategy.num_replicas_in_sync
    if config.train_batch_size % self.num_replicas:
      raise UserError(f"train_batch_size {config.train_batch_size} is not "
                      f"divisible by the {self.num_replicas} replicas")
    self.tasks = task_builder.get_tasks(config, self.tokenizer)
    if config.task_arrays:
      self.tasks, self.vocab_size = task_arrays.exported_tasks(config,
                                                               self.tasks)
      task_arrays.check_vocab_size(self.vocab_size, pretrain_config,
                                   config.task_arrays)
    else:
      self.vocab_size = self.tokenizer.vocab_size
    self.outputs = RunOutputs(config, self.tasks)
    self.record = None  # the run's record of finished trials
    if config.do_predict:
      adopt_heads(self.finetuned, self.tasks)
      self._chief_decides(self.outputs.check_predict_output)
    elif not config.do_train:
      pass  # evaluate only: no record, and files named by time (run_evaluate)
    else:
      if config.distill or config.write_distill_outputs:
        check_tasks(self.tasks)  # BAM distills these only (section 3.2.2)
      self.record = TrialRecord(
          config, self.tasks, self.outputs,
          pretrain_config=self.origin_config, model_config=self.model_config,
          vocab_file=self.vocab_file, writes=self.is_chief)
      self._chief_decides(self._look)
    # Read once, shared by every trial.
    self.data = TaskData(config, self.tasks, self.strategy)
    self.predictor = self._predictor(config, self.data)
    self.teachers = Teachers(config, self.tasks, self.data, self.outputs,
                             self.predictor, writes=self.is_chief)
    self._encoder_weights = None
    self._reused = None  # {task: saved head weights} (_reused_heads)

  # ----------------------------------------------------------- backend
  def _devices(self, config):
    raise NotImplementedError

  def _predictor(self, config, data):
    raise NotImplementedError

  def _chief_decides(self, decide):
    """decide() (it reads the output folder) as process 0 finds it: its
    result, or its UserError, the same on every process."""
    return decide()

  def _barrier(self, name):
    """Every process here before any goes on (process 0's file whole)."""
    del name

  def train(self, model, seed):
    """Fine-tunes `model` in place on the tasks' train sets with `seed`;
    returns the mean loss of the last logged steps."""
    raise NotImplementedError

  def _training_line(self, names, total, on="", devices=""):
    """The line a trial's training begins with, on either backend."""
    config = self.config
    line = (f"fine-tuning {', '.join(names)} for {total} steps{on} "
            f"({devices}{config.model_size} model: lr "
            f"{config.learning_rate:g}, layer-wise decay "
            f"{config.layerwise_lr_decay:g}, batch {config.train_batch_size})")
    if config.distill:
      line += "; distilling from teachers" + (
          ", annealed" if config.teacher_annealing else "")
    return line

  def _reused_heads(self):
    """{task: saved head weights} of the fine-tuned model this run starts
    from (model.reused_heads), read once; none without one."""
    if self._reused is None:
      self._reused = ({} if self.finetuned is None else
                      reused_heads(self.finetuned, self.tasks))
    return self._reused

  def _write_predictions(self, scorer, path, what=None):
    """Process 0 writes a scorer's predictions (the others predicted
    alongside); `what`: a line saying so."""
    if not self.is_chief:
      return
    if os.path.dirname(path):
      storage.makedirs(os.path.dirname(path))
    scorer.write_predictions(path)
    if what:
      print(f"wrote {what}: {path}", flush=True)

  # ------------------------------------------------------------ trials
  def _look(self):
    """Before any work: the record of an interrupted run of this command
    to go on from, else no earlier run's files that this one would
    replace."""
    self.record.look()
    if not self.record.resumed:
      self.outputs.check_new()

  def _build(self, seed):
    keras.utils.set_random_seed(seed)
    with self.strategy.scope():  # variables mirrored on every replica
      model = FinetuningModel(self.model_config, self.tasks,
                              name="finetuning")
      for task in self.tasks:  # creates the variables of every head
        self.predictor.call_once(model, task,
                                 "train" if self.config.do_train else "dev")
    if self._encoder_weights is None:
      self._encoder_weights = {  # as arrays: assigned on either backend
          k: np.asarray(v) for k, v in pretrained_encoder_weights(
              self.pretrained, self.config).items()}
    set_encoder_weights(model.encoder, self._encoder_weights)
    for name, weights in self._reused_heads().items():
      set_head_weights(model.heads[name], weights, self.finetuned.path)
    return model

  def run_trial(self, trial):
    """Trial `trial` (1-based, as the logs and files count)."""
    config = self.config
    seed = config.seed + trial - 1
    model = self._build(seed)
    results = {}
    if config.do_train:
      began = time.time()
      train_loss = self.train(model, seed)
      # What the trial's training did, beside its dev results.
      self.record.data.setdefault("training", [])[trial - 1:] = [
          {"train_loss": train_loss, "train_seconds": time.time() - began}]
    for task in self.tasks:
      if config.do_eval:
        scorer, loss = self.predictor.predict(model, task, "dev")
        results[task.name] = dict(scorer.get_results(), loss=loss)
        self._write_predictions(
            scorer, self.outputs.prediction_path(task, "dev", trial))
        if config.write_dev_outputs and self.is_chief:
          path = self.outputs.dev_outputs_path(task, trial)
          outputs.write_atomic(path, lambda f, s=scorer: np.savez_compressed(
              f, **s.collected()), binary=True)
      if config.write_test_outputs:
        scorer, _ = self.predictor.predict(model, task, "test")
        self._write_predictions(
            scorer, self.outputs.prediction_path(task, "test", trial),
            f"test predictions for {task.name}")
    self.record.keep(model, trial, results)
    return results

  def run(self):
    config = self.config
    if config.do_predict:
      return self.run_predict()
    self.data.check_inputs()
    if not config.do_train:
      return self.run_evaluate()
    if config.distill and config.do_train:
      self.teachers.outputs()  # a bad teacher: said before any work
    self._reused_heads()  # a head that cannot be reused: said now
    try:
      # Process 0 takes the tasks' locks in the output folder and reads the
      # record: every process starts from the trial it found.
      self.record.data = self._chief_decides(self.record.start)
      return self._run_trials()
    finally:
      self.record.release()

  def _run_trials(self):
    config = self.config
    trials = self.record.done_trials()
    done = len(trials)
    for trial in range(len(trials) + 1, config.num_trials + 1):
      print(f"trial {trial}/{config.num_trials} (seed "
            f"{config.seed + trial - 1})", flush=True)
      trials.append(self.run_trial(trial))
      if trials[-1]:
        print(format_table(trials[-1]), flush=True)
      self.record.data["trials"] = trials
      self.record.write()
    if config.write_distill_outputs:
      self._barrier("kept model written")  # read back by every process
      self.teachers.write_outputs()
    summary = summarize(trials)
    if summary:
      self.record.report(trials, summary, done, self.baselines())
    return summary

  def baselines(self):
    """{task: its no-text baseline's dev score} for the tasks that have
    one, by finetune/baselines.py's predictors on the rows this run
    read (train_examples_limit and eval_examples_limit apply)."""
    out = {}
    for task in self.tasks:
      if not has_baseline(task.name):
        continue
      seen = RowsAsRead(task, self.data)
      try:
        out[task.name] = baselines.task_baseline(seen, task.metric)
      except UserError as e:  # no train set to take it from: left out
        print(f"note: no no-text baseline for {task.name}: {e}",
              flush=True)
    return out

  def run_evaluate(self):
    """--no-do-train: the fine-tuned model (--init-checkpoint, else the
    one a run of these tasks kept; else the pretrained encoder with new
    heads) evaluated once. Nothing of a training run is read or
    replaced: predictions and results go to files named by the time.
    Returns the summary a run of one trial would."""
    config = self.config
    model = self._build(config.seed)
    what = (f"{self.finetuned.path} (trial "
            f"{self.finetuned.info.get('trial', '?')}'s model)"
            if self.finetuned else
            f"{self.pretrained.model_dir} with untrained heads (no "
            f"fine-tuned model at {preflight.kept_model_path(config)})")
    print(f"evaluating {what}", flush=True)
    results = {}
    for task in self.tasks:
      splits = (["dev"] if config.do_eval else []) + (
          ["test"] if config.write_test_outputs else [])
      for split in splits:
        scorer, loss = self.predictor.predict(model, task, split)
        if split == "dev":
          results[task.name] = dict(scorer.get_results(), loss=loss)
        if self.is_chief:  # its path looks in the folder: process 0 alone
          self._write_predictions(scorer,
                                  self.outputs.evaluation_path(task, split),
                                  f"{task.name} {split} predictions")
    summary = summarize([results] if results else [])
    if summary:
      scores = self.baselines()
      path = "process 0's results file"
      if self.is_chief:
        path = self.outputs.results_path()
        outputs.write_text(path, json.dumps(dict(
            tasks=config.tasks, model=self.finetuned.path if self.finetuned
            else self.pretrained.model_dir, summary=summary,
            trials=[results], baselines=scores), indent=2))
      print(f"dev results (also in {path}):", flush=True)
      print(format_table(results), flush=True)
      if scores:
        print(versus_baselines(results, self.tasks, scores), flush=True)
    return summary

  def run_predict(self):
    """--do-predict: the fine-tuned model's predictions for predict_file,
    written as the run's dev predictions are; its metrics when the file
    has every gold label."""
    config, task = self.config, self.tasks[0]
    examples, labelled = task.read_file(config.predict_file)
    examples = limit(examples, config.eval_examples_limit)
    if not examples:
      raise UserError(f"{config.predict_file} has no examples")
    self.data.add(task.name, "predict", examples,
                  task.featurize(examples, is_training=False))
    model = finetuned_model(self.finetuned, self.tasks)
    self.predictor.call_once(model, task, "predict")
    print(f"predicting {len(examples)} {task.name} example(s) of "
          f"{config.predict_file} with {self.finetuned.path} (trial "
          f"{self.finetuned.info.get('trial', '?')}'s model)", flush=True)
    scorer, loss = self.predictor.predict(model, task, "predict")
    self._write_predictions(scorer, self.outputs.predict_output(),
                            f"{task.name} predictions")
    if not labelled:
      return {}
    results = {task.name: dict(scorer.get_results(), loss=loss)}
    print(format_table(results), flush=True)
    return results
