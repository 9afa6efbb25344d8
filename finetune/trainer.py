"""The fine-tuning driver: any tasks, one encoder, `num_trials` seeds.

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

BAM (dissertation chapter 3, finetune/bam.py): a teacher run
(write_distill_outputs) writes its kept model's outputs on its train rows
to OUTPUT_DIR/distill/<task>.npz; a student run (distill) reads them (or
predicts them with a teacher's fine-tuned model), trains on the annealed
mix of gold and teacher, and may sample each step's task by |D|^0.75.
"""

import json
import math
import os
import sys
import time
import uuid

import keras
import numpy as np
import tensorflow as tf

from finetune import bam
from finetune import metrics
from finetune import preflight
from finetune import task_builder
from finetune.config import model_size_of
from finetune.featurization import limit
from finetune.featurization import model_inputs
from finetune.model import FinetuningModel
from finetune.model import adopt_heads
from finetune.model import finetuned_model
from finetune.model import head_weights
from finetune.model import load_finetuned
from finetune.model import model_config_for
from finetune.model import pretrained_encoder_weights
from finetune.model import set_encoder_weights
from finetune.model import set_head_weights
from finetune.optimization import create_optimizer
from interop.weights import encoder_slots
from loading import finetuned as finetuned_files
from loading import runs
from loading.sources import find_pretrained
from training import distribution
from training.progress import Progress
from training.progress import format_seconds
from training.step import ReplicaUpdate
from util import outputs
from util import storage
from util.errors import UserError
from util.text_files import read_json


class FinetuningRunner:
  """Loads the pretrained model's config, the tokenizer and the tasks."""

  def __init__(self, config):
    self.config = config
    # A fine-tuned model (loading/finetuned.py) this run predicts with, or
    # starts from: its encoder, and the heads of the tasks it has.
    self.finetuned = preflight.find_finetuned(config)
    if self.finetuned and config.init_from == "generator":
      raise UserError(f"{self.finetuned.path} is a fine-tuned model: it has "
                      "one encoder, so init_from must be discriminator")
    if config.do_predict:  # read and featurize as the model was trained
      config = self.config = config.with_model_settings(
          self.finetuned.finetuning_config,
          f"{self.finetuned.path} (finetuning_config)")
    self.pretrained = find_pretrained(
        self.finetuned.path if self.finetuned else self._pretrained_path())
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
    self.tokenizer = runs.load_tokenizer_for(pretrain_config, config.vocab_file,
                                             config.data_dir)
    self.vocab_file = runs.vocab_path_for(pretrain_config, config.vocab_file,
                                          config.data_dir)
    distribution.set_precision(config.mixed_precision)
    self.strategy = distribution.get_strategy(config)
    self.num_replicas = self.strategy.num_replicas_in_sync
    if config.train_batch_size % self.num_replicas:
      raise UserError(f"train_batch_size {config.train_batch_size} is not "
                      f"divisible by the {self.num_replicas} replicas")
    self.tasks = task_builder.get_tasks(config, self.tokenizer)
    if config.do_predict:
      adopt_heads(self.finetuned, self.tasks)
    elif config.distill or config.write_distill_outputs:
      for task in self.tasks:  # BAM distills these only (section 3.2.2)
        if task.head_kind not in ("classification", "regression"):
          raise UserError(f"{task.name} is a {task.head_kind} task: BAM's "
                          "distill and write_distill_outputs take "
                          "classification and regression (GLUE) tasks only")
    self._record = None  # the run's record of finished trials
    self._check_outputs()
    # Read once, shared by every trial.
    self._encoder_weights = None
    self._reused = None  # {task: saved head weights} (_reused_heads)
    self._data = {}  # (task, split) -> (examples, features)
    self._eval_steps = {}  # task -> (model, its traced eval step)
    self._teachers = None  # {task: teacher outputs per train row} (distill)

  # ------------------------------------------------- fine-tuned models
  def _pretrained_path(self):
    return self.config.init_checkpoint or preflight.run_path(self.config)

  def kept_model_path(self):
    """OUTPUT_DIR/<tasks>_model: where this run keeps its model."""
    return preflight.kept_model_path(self.config)

  def _record_path(self):
    return os.path.join(self.config.output_dir,
                        f"{'_'.join(self.config.tasks)}_trials.json")

  def _reused_heads(self):
    """{task: saved head weights} of the tasks the fine-tuned model this
    run starts from has a head for (same name; its kind and labels must be
    the task's, else one UserError); the other tasks get new heads."""
    if self._reused is None:
      self._reused = {}
      if self.finetuned is not None:
        _, heads = self.finetuned.weights()
        for task in self.tasks:
          info = self.finetuned.tasks.get(task.name)
          if info is not None:
            task.adopt_head(info, self.finetuned.path)
            self._reused[task.name] = heads[task.name]
        new = [t.name for t in self.tasks if t.name not in self._reused]
        print(f"starting from the fine-tuned model {self.finetuned.path}: "
              f"its encoder; heads reused: "
              f"{', '.join(self._reused) or 'none'}; new: "
              f"{', '.join(new) or 'none'}", flush=True)
    return self._reused

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

  def distill_output_path(self, task):
    """OUTPUT_DIR/distill/<task>.npz: a teacher's outputs (BAM)."""
    return os.path.join(self.config.output_dir, "distill", f"{task.name}.npz")

  def predict_output(self):
    """Where --do-predict writes: predict_output, else OUTPUT_DIR/
    <task>_<predict file's name>_predictions<ext>."""
    config, task = self.config, self.tasks[0]
    if config.predict_output:
      return config.predict_output
    stem = os.path.splitext(os.path.basename(
        config.predict_file.rstrip("/")))[0]
    return os.path.join(config.output_dir, f"{task.name}_{stem}_predictions"
                        f"{task.predictions_ext}")

  def _check_outputs(self):
    """Refuses, before any work, to replace an earlier run's files (a run
    of the same command that was interrupted is resumed instead)."""
    config = self.config
    if config.do_predict:
      path = self.predict_output()
      outputs.check_output_dir(os.path.dirname(path) or ".", "predict_output")
      for f in self.tasks[0].output_files(path):
        # (A folder still to be made holds nothing yet.)
        if os.path.lexists(os.path.dirname(os.path.abspath(f))):
          outputs.check_new_file(f, "predict_output", config.overwrite)
      return
    self._record = self._resumed_record()
    if config.overwrite or self._record is not None:
      return
    kept = ([self.kept_model_path()] if config.do_train and
            config.keep_model != "none" else [])
    if config.write_distill_outputs:
      kept += [self.distill_output_path(t) for t in self.tasks]
    existing = [f for f in self.planned_outputs() + kept
                if storage.exists(f)]
    if existing:
      more = f" (and {len(existing) - 1} more)" if len(existing) > 1 else ""
      raise UserError(f"{existing[0]}{more} already exists: pass "
                      "--overwrite to replace, or another --output-dir "
                      "(nothing was written)")

  # ------------------------------------------------------ resuming
  def _resumed_record(self):
    """The record of an earlier run of this command (same tasks and
    hparams but RUN_SETTINGS) to go on from; None for a new run. One
    with other hparams is refused unless --overwrite (start over)."""
    config, path = self.config, self._record_path()
    if config.overwrite or not storage.exists(path):
      return None
    try:
      record = read_json(path)
    except UserError as e:
      raise UserError(f"{e} (the record of an earlier run: pass "
                      "--overwrite to start over)") from None
    if not (isinstance(record, dict) and isinstance(record.get("config"),
                                                    dict) and
            isinstance(record.get("trials"), list)):
      raise UserError(f"{path} is not a record of trials: pass --overwrite "
                      "to start over")
    saved = record["config"]
    changes = [(k, saved[k], v) for k, v in config.run_hparams().items()
               if k in saved and saved[k] != v]
    if changes:
      shown = ", ".join(f"{k} {a!r} -> {b!r}" for k, a, b in changes[:4])
      more = f" (+{len(changes) - 4} more)" if len(changes) > 4 else ""
      raise UserError(f"{path} records a run of these tasks with other "
                      f"hparams: {shown}{more}; run it with its own to go "
                      "on, or pass --overwrite to start over (nothing was "
                      "written)")
    return record

  def _start_record(self):
    """The run's record: resumed (finished trials kept; when the kept
    model on disk is not the one recorded, as after a kill between the
    two writes, from that trial on) or new. Written at once, so that the
    files this run writes are known to be its own."""
    config, record = self.config, self._record
    if record is None:
      record = {"run": uuid.uuid4().hex, "config": config.run_hparams(),
                "trials": [], "kept": None, "results_file": ""}
    kept = record.get("kept")
    if kept and kept["trial"] < len(record["trials"]):
      path = self.kept_model_path()
      on_disk = (finetuned_files.load(path).info if
                 finetuned_files.is_finetuned(path) else {})
      if (on_disk.get("run"), on_disk.get("trial")) != (record["run"],
                                                          kept["trial"]):
        print(f"note: {path} is not trial {kept['trial'] + 1}'s model as "
              "recorded (interrupted while keeping it): from that trial on "
              "again", flush=True)
        record["trials"] = record["trials"][:kept["trial"]]
        record["kept"] = None
    self._record = record
    self._write_record()
    return record

  def _write_record(self):
    storage.makedirs(self.config.output_dir)
    outputs.write_text(self._record_path(), json.dumps(self._record,
                                                       indent=2))

  def _score(self, results):
    """The dev score that picks the best trial: the mean of the tasks'
    headline metrics (NaN counts as the worst); None without dev results."""
    values = [results[t.name].get(t.metric) for t in self.tasks
              if t.name in results]
    values = [v for v in values if v is not None]
    if not values:
      return None
    score = float(np.mean(values))
    return score if np.isfinite(score) else -math.inf

  def _keep(self, model, trial, results):
    """Writes the trial's model to kept_model_path when keep_model asks:
    always (last), when its dev score beats the kept one's (best; the
    last when there is no dev score), never (none)."""
    config = self.config
    if config.keep_model == "none" or not config.do_train:
      return
    score, kept = self._score(results), self._record.get("kept")
    if (config.keep_model == "best" and kept is not None and
        score is not None and kept.get("score") is not None and
        not score > kept["score"]):
      return
    path = self.kept_model_path()
    finetuned_files.save(
        path, finetuning_config=config, pretrain_config=self.origin_config,
        model_config=self.model_config,
        tasks={t.name: t.model_info() for t in self.tasks},
        encoder={s.name: s.value() for s in encoder_slots(model.encoder)},
        heads={t.name: head_weights(model.heads[t.name]) for t in self.tasks},
        vocab_file=self.vocab_file,
        info=dict(trial=trial, seed=config.seed + trial, results=results,
                  kept=config.keep_model, score=score,
                  run=self._record["run"]),
        overwrite=True)  # this run's own (checked before any work)
    self._record["kept"] = {"trial": trial, "score": score}
    why = ("" if score is None else
           f", dev score {score:.4f}" if config.keep_model == "best" else "")
    print(f"kept trial {trial + 1}'s model{why}: {path}", flush=True)

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
      if config.distill:  # BAM: the teacher's outputs beside the labels
        features = dict(features,
                        teacher_outputs=self._teacher_outputs()[task.name])
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
    """Global batches, each split evenly over the strategy's replicas."""
    ds = tf.data.Dataset.from_tensor_slices(features)
    ds = ds.shuffle(len(features["input_ids"]), seed=seed,
                    reshuffle_each_iteration=True).repeat()
    ds = ds.batch(batch_size, drop_remainder=True).prefetch(2)
    if self.num_replicas > 1:
      ds = self.strategy.experimental_distribute_dataset(ds)
    return iter(ds)

  @staticmethod
  def schedule(steps_by_task):
    """Which task each step trains: tasks interleaved evenly, each task's
    steps spread over the run in proportion to its count."""
    order = []
    for name, steps in steps_by_task.items():
      order += [((i + 0.5) / steps, name) for i in range(steps)]
    return [name for _, name in sorted(order)]

  # -------------------------------------------------------------- BAM
  @staticmethod
  def with_teacher_weight(batch, weight):
    """A distill step's batch with the teacher's share of the target,
    1 - lambda, as a [B] feature: a tensor, so that the step's
    tf.function is traced once, not once per value."""
    batch = dict(batch)
    batch["teacher_weight"] = tf.fill(tf.shape(batch["input_ids"])[:1],
                                      tf.cast(weight, tf.float32))
    return batch

  def _teacher_outputs(self):
    """{task: its teacher's outputs on this run's train rows, in order}:
    read from a teacher run's .npz, or predicted with a teacher's
    fine-tuned model (read and featurized as it was trained). Once per
    run; a bad teacher is one UserError."""
    if self._teachers is None:
      teachers = {}
      for task in self.tasks:
        path = self.config.teacher_paths[task.name]
        examples, features = self._examples_and_features(task, "train")
        keys = bam.row_keys(examples, features)
        shape = (() if task.head_kind == "regression" else
                 (len(task.head_labels()),))
        if finetuned_files.is_finetuned(path):
          stored, values = self._teacher_model_outputs(path, task, examples)
          values = bam.match_teacher_outputs(path, task.name, stored, values,
                                             keys, shape)
        elif storage.isdir(path):
          raise UserError(f"{task.name}: teacher {path} is a folder but not "
                          f"a fine-tuned model (no {finetuned_files.MODEL_FILE}"
                          "): give a teacher's distill/<task>.npz or its "
                          "kept model's folder")
        else:
          values = bam.read_teacher_outputs(path, task.name, keys, shape)
        teachers[task.name] = values
        print(f"{task.name}: teacher {path} ({len(keys)} train rows)",
              flush=True)
      self._teachers = teachers
    return self._teachers

  def _teacher_model_outputs(self, path, task, examples):
    """(row keys, outputs) of the fine-tuned model at `path` on `examples`
    as its own run would featurize them for training."""
    _, _, _, tasks, model = load_finetuned(path, task.name)
    key = (task.name, "teacher")
    self._data[key] = (examples, tasks[0].featurize(examples,
                                                    is_training=True))
    try:
      values = self._outputs_on(model, tasks[0], "teacher")
      return bam.row_keys(*self._data[key]), values
    finally:
      del self._data[key]

  def _outputs_on(self, model, task, split):
    """The model's outputs on a split's rows (through predict):
    probabilities [N, C], or predictions [N] of a regression."""
    self._call_once(model, task, split)
    scorer, _ = self.predict(model, task, split)
    return scorer.collected()["predictions" if task.head_kind == "regression"
                              else "probabilities"]

  def _write_distill_outputs(self):
    """write_distill_outputs: the kept model's outputs on each task's
    train rows, OUTPUT_DIR/distill/<task>.npz (a BAM teacher's)."""
    kept = finetuned_files.load(self.kept_model_path())
    model = finetuned_model(kept, self.tasks)
    for task in self.tasks:
      values = self._outputs_on(model, task, "train")
      keys = bam.row_keys(*self._examples_and_features(task, "train"))
      path = self.distill_output_path(task)
      storage.makedirs(os.path.dirname(path))
      bam.write_teacher_outputs(path, task.name, keys, values)
      print(f"wrote {task.name}'s teacher outputs on {len(keys)} train rows "
            f"(trial {kept.info.get('trial', 0) + 1}'s model): {path}",
            flush=True)

  # ------------------------------------------------------------ trials
  def _build(self, seed):
    keras.utils.set_random_seed(seed)
    with self.strategy.scope():  # variables mirrored on every replica
      model = FinetuningModel(self.model_config, self.tasks,
                              name="finetuning")
      for task in self.tasks:  # creates the variables of every head
        self._call_once(model, task,
                        "train" if self.config.do_train else "dev")
    if self._encoder_weights is None:
      self._encoder_weights = pretrained_encoder_weights(self.pretrained,
                                                         self.config)
    set_encoder_weights(model.encoder, self._encoder_weights)
    for name, weights in self._reused_heads().items():
      set_head_weights(model.heads[name], weights, self.finetuned.path)
    return model

  def _call_once(self, model, task, split):
    """Calls the model on one row of a split, so that every variable
    (head, dropout seeds) exists before a tf.function traces it."""
    _, features = self._examples_and_features(task, split)
    model({k: v[:1] for k, v in model_inputs(features).items()},
          task_name=task.name, training=False)

  def train(self, model, seed):
    config = self.config
    data = self._train_data()
    steps = {name: s for name, (_, s) in data.items()}
    if config.task_weight_exponent is None:
      order = self.schedule(steps)
    else:  # BAM: each step's task drawn by |D|^exponent (section 3.3)
      order = bam.sample_schedule(
          sum(steps.values()),
          {name: len(f["input_ids"]) for name, (f, _) in data.items()},
          config.task_weight_exponent, seed)
    total = len(order)
    with self.strategy.scope():  # slot variables beside the model's
      optimizer = create_optimizer(config, model.trainable_variables,
                                   self.model_config.num_hidden_layers, total,
                                   self.model_config.share_layers)
    iterators = {name: self._batches(features, config.train_batch_size, seed)
                 for name, (features, _) in data.items()}
    train_steps = {name: self._train_step(model, optimizer, name)
                   for name in data}
    print(f"fine-tuning {', '.join(data)} for {total} steps "
          f"({config.model_size} model: lr {config.learning_rate:g}, "
          f"layer-wise decay {config.layerwise_lr_decay:g}, batch "
          f"{config.train_batch_size}"
          + (f" over {self.num_replicas} replicas" if self.num_replicas > 1
             else "") + ")"
          + ("; distilling from teachers" + (
              ", annealed" if config.teacher_annealing else "")
             if config.distill else ""), flush=True)
    start = last = time.time()
    losses, last_step = [], 0
    # Every log_every_steps, and also each tenth of the run (a short run
    # is not silent until its last step) and at least every 30 s.
    progress = Progress("step", total)
    weight = None
    for step, name in enumerate(order, 1):
      batch = next(iterators[name])
      if config.distill:  # 1 - lambda (section 3.2.2)
        weight = bam.teacher_weight(step - 1, total, config.teacher_annealing)
        losses.append(float(train_steps[name](
            batch, tf.constant(weight, tf.float32))))
      else:
        losses.append(float(train_steps[name](batch)))
      if not np.isfinite(losses[-1]):
        raise UserError(f"non-finite loss at step {step} ({name}); try a "
                        "lower learning_rate")
      if (step % config.log_every_steps == 0 or step == total or
          progress.due(step)):
        now = time.time()
        n = step - last_step
        rate = n * config.train_batch_size / max(now - last, 1e-9)
        eta = (total - step) * (now - start) / step
        bam_lambda = ("" if weight is None else
                      f" | lambda {1 - weight:.3f}")
        print(f"step {step}/{total} | loss {np.mean(losses[-n:]):.4f}"
              f"{bam_lambda} | {rate:.1f} examples/s | elapsed "
              f"{format_seconds(now - start)}, ETA {format_seconds(eta)}",
              flush=True)
        last, last_step = now, step
    return float(np.mean(losses[-config.log_every_steps:]))

  def _train_step(self, model, optimizer, task_name):
    """The task's compiled step: step(batch[, teacher_weight]) -> loss,
    run on every replica of the strategy (training/step.py's update)."""
    variables = model.variables_for(task_name)
    update = ReplicaUpdate(optimizer, self.num_replicas, self.config.clip_norm)
    replicas = self.num_replicas

    def replica_step(batch, teacher_weight):
      if teacher_weight is not None:
        batch = self.with_teacher_weight(batch, teacher_weight)
      with tf.GradientTape() as tape:
        loss, _ = model(batch, task_name=task_name, training=True)
        loss = tf.reduce_mean(loss)
        scaled = update.scale_loss(loss / replicas)
      update.apply(tape.gradient(scaled, variables), variables)
      return loss

    @tf.function
    def step(batch, teacher_weight=None):
      losses = self.strategy.run(replica_step, args=(batch, teacher_weight))
      return self.strategy.reduce("mean", losses, axis=None)

    return step

  def predict(self, model, task, split):
    """The task's scorer, fed with the model's outputs on `split`."""
    config = self.config
    examples, features = self._examples_and_features(task, split)
    scorer = task.get_scorer(examples, features)
    inputs = model_inputs(features)
    n = len(inputs["input_ids"])
    step = self._eval_step(model, task.name)
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

  def _eval_step(self, model, task_name):
    """The model's traced eval step for a task, made once per model (dev,
    test and predict files reuse it instead of tracing again)."""
    cached = self._eval_steps.get(task_name)
    if cached is None or cached[0] is not model:

      @tf.function(reduce_retracing=True)
      def step(batch):
        loss, outputs = model(batch, task_name=task_name, training=False)
        return dict(outputs, loss=loss)

      cached = self._eval_steps[task_name] = (model, step)
    return cached[1]

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
    self._keep(model, trial, results)
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
    if config.do_predict:
      return self.run_predict()
    self._check_inputs()
    if config.distill and config.do_train:
      self._teacher_outputs()  # a bad teacher: said before any work
    self._reused_heads()  # a head that cannot be reused: said now
    record = self._start_record()
    trials = record["trials"][:config.num_trials]
    done = len(trials)
    if trials:
      print(f"{len(trials)} of {config.num_trials} trial(s) done earlier "
            f"(recorded in {self._record_path()}): "
            + ("going on" if len(trials) < config.num_trials else
               "nothing left to train"), flush=True)
    for trial in range(len(trials), config.num_trials):
      print(
          f"trial {trial + 1}/{config.num_trials} (seed {config.seed + trial})",
          flush=True)
      trials.append(self.run_trial(trial))
      if trials[-1]:
        print(format_table(trials[-1]), flush=True)
      record["trials"] = trials
      self._write_record()
    if config.write_distill_outputs:
      self._write_distill_outputs()
    summary = summarize(trials)
    kept = record.get("kept")
    if summary:
      out = {"tasks": config.tasks, "num_trials": config.num_trials,
             "summary": summary, "trials": trials}
      if kept:
        out["kept_model"] = {"path": self.kept_model_path(),
                             "trial": kept["trial"], "keep": config.keep_model}
      path = record.get("results_file")
      if len(trials) > done or not (path and storage.exists(path)):
        path = self._results_path()
        outputs.write_text(path, json.dumps(out, indent=2))
        record["results_file"] = path
        self._write_record()
      print(f"results: {path}", flush=True)
      print(f"median over {config.num_trials} trial(s):", flush=True)
      print(format_table({t: {k: v["median"] for k, v in m.items()}
                          for t, m in summary.items()}), flush=True)
      print(json.dumps(summary), flush=True)
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
    self._data[(task.name, "predict")] = (
        examples, task.featurize(examples, is_training=False))
    model = finetuned_model(self.finetuned, self.tasks)
    self._call_once(model, task, "predict")
    print(f"predicting {len(examples)} {task.name} example(s) of "
          f"{config.predict_file} with {self.finetuned.path} (trial "
          f"{self.finetuned.info.get('trial', 0) + 1}'s model)", flush=True)
    scorer, loss = self.predict(model, task, "predict")
    path = self.predict_output()
    if os.path.dirname(path):
      storage.makedirs(os.path.dirname(path))
    scorer.write_predictions(path)
    print(f"wrote {task.name} predictions: {path}", flush=True)
    if not labelled:
      return {}
    results = {task.name: dict(scorer.get_results(), loss=loss)}
    print(format_table(results), flush=True)
    print(json.dumps(results), flush=True)
    return results

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
