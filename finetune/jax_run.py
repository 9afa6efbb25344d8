"""run_finetuning.py under KERAS_BACKEND=jax: one task, `num_trials` seeds,
trained by finetune/jax_trainer.py's JaxFinetuner.

What it shares with the TensorFlow runner (finetune/trainer.py): the
config and its checks, the pretrained model (one of our TensorFlow runs or
an .npz weights folder, interop/npz_weights.py), the task's reading and
featurization, the model, head, loss and optimizer, the trial seeds
(seed + trial - 1), the task's own scorer, the dev prediction files, the
record of finished trials (a rerun goes on from the first unfinished
one), the kept model, the results file, the summary and the no-text
baselines. What differs: the order of the train rows (pretrain/arrays.py
batch_rows, not tf.data's shuffle), so a trial's numbers are close to the
TensorFlow runner's, not equal; and no per-step log (steps run jitted in
chunks): a line every ~15 s instead (training/heartbeat.py). What only
the TensorFlow runner does is refused by `check`, in one line, before JAX
loads.

TensorFlow is still needed, imported late: the tokenizer is
tensorflow_text's, and our own runs are TensorFlow checkpoints. Without it
the JAX driver of a GPU slot (run_gpu_slot.py) takes arrays exported on a
machine that has it (prepare_gpu_slot.py, finetune/arrays.py).
"""

import time

import numpy as np

from finetune import data_layout
from finetune import preflight
from finetune.featurization import limit
from training.heartbeat import Heartbeat
from training.step_log import LOG_SECONDS
from util.errors import UserError

TENSORFLOW_BACKEND = "use the TensorFlow backend (unset KERAS_BACKEND)"


def check(config):
  """One UserError for the first option only the TensorFlow runner has."""
  def refuse(what):
    raise UserError(f"{what} is not supported under KERAS_BACKEND=jax: "
                    f"{TENSORFLOW_BACKEND}")
  tasks = config.tasks
  if config.do_predict:
    refuse("--do-predict")
  if not config.do_train:
    refuse("do_train false (evaluation only)")
  if len(tasks) > 1:
    refuse(f"multi-task fine-tuning (--task-names {','.join(tasks)})")
  kind = data_layout.kind(tasks[0])
  if kind not in ("GLUE", "tagging"):  # what JaxFinetuner's arrays hold
    refuse(f"task {tasks[0]} ({kind or 'not a GLUE or tagging task'})")
  if config.distill or config.write_distill_outputs or config.teachers:
    refuse("BAM distillation (distill, write_distill_outputs, teachers)")
  if config.task_weight_exponent is not None:
    refuse("task_weight_exponent")
  if config.write_test_outputs:
    refuse("write_test_outputs")
  if config.strategy != "default":  # JaxFinetuner runs on one device
    refuse(f"strategy {config.strategy}")
  if config.inference_engine == "openvino":
    refuse("inference_engine openvino")
  if preflight.find_finetuned(config) is not None:
    refuse("--init-checkpoint a fine-tuned model (its heads are reused)")


def _import_tensorflow():
  # pylint: disable-next=g-import-not-at-top
  from util.tf_quiet import import_tensorflow
  try:
    return import_tensorflow(with_text=True)
  except ImportError as e:
    raise UserError(
        f"fine-tuning under KERAS_BACKEND=jax still needs TensorFlow and "
        f"tensorflow_text to read and tokenize the task ({e}); without "
        "them, export the task as arrays on a machine that has them "
        "(prepare_gpu_slot.py, finetune/arrays.py export) and fine-tune "
        "those with run_gpu_slot.py") from None


def find_pretrained(config):
  """The model to start from; an .npz weights folder first (the JAX
  pretraining driver's, which may hold a pretrain_config.json too)."""
  # pylint: disable=g-import-not-at-top
  from interop import npz_weights
  from loading import runs
  from loading import sources
  path = config.init_checkpoint or preflight.run_path(config)
  if path and npz_weights.is_npz_weights(path):
    source = sources.open_source(path)
    return runs.Pretrained(source.config, source.path, path, source)
  return sources.find_pretrained(path)


def encoder_weights(pretrained, config):
  """{name: array} of the encoder to start from, as
  model.pretrained_encoder_weights gives it (one of our TensorFlow runs
  read by name: loading/runs.py read_by_name)."""
  from finetune.model import pretrained_encoder_weights  # pylint: disable=g-import-not-at-top
  if pretrained.source is None:
    _import_tensorflow()  # its one clear line when TensorFlow is missing
  return {k: np.asarray(v) for k, v in
          pretrained_encoder_weights(pretrained, config).items()}


class RowsRead:
  """The task, its get_examples giving the rows this run read (for
  finetune/baselines.py), as the TensorFlow runner's RowsAsRead."""

  def __init__(self, task, featurized, config):
    self._task, self._featurized, self._config = task, featurized, config

  def __getattr__(self, name):
    return getattr(self._task, name)

  def get_examples(self, split):
    if split in self._featurized:
      return self._featurized[split][0]
    config = self._config
    return limit(self._task.get_examples(split), config.train_examples_limit
                 if split == "train" else config.eval_examples_limit)


class Setup:
  """What every trial shares: the pretrained model, the encoder's config,
  the task and its train and dev splits, featurized once (on the CPU) and
  as JaxFinetuner's arrays."""

  def __init__(self, config):
    # pylint: disable=g-import-not-at-top
    from finetune import task_builder
    from finetune.config import model_size_of
    from finetune.model import model_config_for
    from loading import runs
    self.pretrained = pretrained = find_pretrained(config)
    pretrain_config = pretrained.config
    config.validate(model_size_of(pretrain_config))  # size-based defaults
    self.model_config = model_config_for(pretrained, config)
    positions = self.model_config.max_position_embeddings
    config.fit_max_seq_length(positions)
    if config.max_seq_length > positions:
      raise UserError(f"max_seq_length {config.max_seq_length} exceeds the "
                      f"model's {positions} positions")
    tokenizer = runs.load_tokenizer_for(pretrain_config, config.vocab_file,
                                        config.data_dir)
    self.vocab_file = runs.vocab_path_for(pretrain_config, config.vocab_file,
                                          config.data_dir)
    self.tasks = task_builder.get_tasks(config, tokenizer)
    self.task = self.tasks[0]
    self.vocab_size = tokenizer.vocab_size
    self.featurized = None  # {split: (examples, features)}; featurize()
    self.data = None  # finetune/arrays.py TaskArrays; featurize()

  def featurize(self, config):
    # pylint: disable-next=g-import-not-at-top
    from finetune import arrays
    task = self.task
    self.featurized = {split: arrays.featurize_split(config, task, split)
                       for split in ("train", "dev")}
    self.data = arrays.in_memory(config, self.tasks,
                                 {task.name: self.featurized},
                                 self.vocab_size)
    return self.data.meta["tasks"][task.name]


def run(config):
  """The trials of config's one task; returns the summary, as
  FinetuningRunner.run does."""
  check(config)
  _import_tensorflow()  # said now, before any work
  # pylint: disable=g-import-not-at-top
  from finetune import baselines
  from finetune.run_outputs import RunOutputs
  from finetune.summary import format_table
  from finetune.summary import has_baseline
  from finetune.summary import summarize
  from finetune.trial_record import TrialRecord

  setup = Setup(config)
  task, tasks = setup.task, setup.tasks
  paths = RunOutputs(config, tasks)
  record = TrialRecord(config, tasks, paths,
                       pretrain_config=setup.pretrained.config,
                       model_config=setup.model_config,
                       vocab_file=setup.vocab_file)
  if not record.resumed:  # an interrupted run goes on instead
    paths.check_new()
  info = setup.featurize(config)
  featurized = setup.featurized
  print(f"{task.name}: {info['train_examples']} train examples, "
        f"{info['train_rows']} rows, {info['train_steps']} steps", flush=True)

  import jax
  from finetune.jax_trainer import JaxFinetuner
  finetuner = JaxFinetuner(config, setup.model_config, task, setup.data)
  record.start()  # the task's lock, held until the process ends
  trials = record.done_trials()
  done = len(trials)
  encoder = (encoder_weights(setup.pretrained, config)
             if done < config.num_trials else None)  # read once, if needed
  for trial in range(len(trials) + 1, config.num_trials + 1):
    seed = config.seed + trial - 1  # as the TensorFlow runner's
    print(f"trial {trial}/{config.num_trials} (seed {seed})", flush=True)
    print(f"fine-tuning {task.name} for {info['train_steps']} steps on JAX "
          f"({jax.devices()[0].platform}; {config.model_size} model: lr "
          f"{config.learning_rate:g}, layer-wise decay "
          f"{config.layerwise_lr_decay:g}, batch {config.train_batch_size})",
          flush=True)
    began = time.time()
    # One call trains the whole trial (jitted chunks): a line every
    # LOG_SECONDS meanwhile, as the TensorFlow runner's step log gives.
    what = (f"trial {trial}: compiling, then {info['train_steps']} steps"
            if trial == done + 1 else
            f"trial {trial}: {info['train_steps']} steps")
    print(f"{what}; a line every {LOG_SECONDS:.0f} s until it ends",
          flush=True)
    with Heartbeat(what):
      outputs, summary = finetuner.trial(encoder, seed, keep_weights=True)
    print(f"step {summary['steps']}/{summary['steps']} | loss "
          f"{summary['final_loss']:.4f} | {time.time() - began:.1f} s",
          flush=True)
    results = {}
    if config.do_eval:
      loss = float(np.mean(outputs.pop("loss")))
      scorer = task.get_scorer(*featurized["dev"])
      scorer.update(outputs)
      results[task.name] = dict(scorer.get_results(), loss=loss)
      scorer.write_predictions(paths.prediction_file(task, "dev", trial))
      print(format_table(results), flush=True)
    record.keep(finetuner.kept, trial, results)
    finetuner.kept = None
    trials.append(results)
    record.data["trials"] = trials
    record.write()
  summary = summarize(trials)
  if summary:
    scores = {}
    if has_baseline(task.name):
      try:
        scores[task.name] = baselines.task_baseline(
            RowsRead(task, featurized, config), task.metric)
      except UserError as e:  # no train set to take it from: left out
        print(f"note: no no-text baseline for {task.name}: {e}", flush=True)
    record.report(trials, summary, done, scores)
  return summary
