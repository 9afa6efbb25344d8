"""Tiny fine-tuned models: run_finetuning.py on a tiny run (tiny_runs.py's
tiny_run), and one with random weights saved as run_finetuning.py keeps
one."""

import json

import numpy as np

import run_finetuning
from configure_finetuning import FinetuningConfig
from configure_pretraining import PretrainingConfig
from finetune import task_builder
from finetune.model import FinetuningModel
from finetune.model import head_weights
from interop.weights import encoder_slots
from loading import finetuned as finetuned_files
from model.config import TransformerConfig
from tests.tiny_runs import MICRO
from tests.tiny_runs import VOCAB_8K
from util.tokenization import load_tokenizer

QUICK = {"train_examples_limit": 32, "num_train_epochs": 1.0,
         "train_batch_size": 16, "eval_batch_size": 16, "max_seq_length": 32,
         "log_every_steps": 2, "learning_rate": 1e-3,
         "layerwise_lr_decay": 1.0}


def finetune_argv(data_dir, tasks, *extra, quick=None, **hparams):
  """run_finetuning.py's flags for the tiny run in data_dir; `quick`: the
  base hparams (default QUICK), `hparams` on top."""
  return ["--data-dir", str(data_dir), "--model-name", "tiny",
          "--task-names", tasks,
          "--hparams", json.dumps(dict(quick or QUICK, **hparams)),
          *[str(x) for x in extra]]


def finetune(data_dir, tasks, *extra, quick=None, **hparams):
  """run_finetuning.py in this process (finetune_argv's flags)."""
  return run_finetuning.main(
      finetune_argv(data_dir, tasks, *extra, quick=quick, **hparams))


def random_finetuned(path, task_names, labels=None, **values):
  """A fine-tuned model of `task_names` with O(1) random weights (no
  training), saved as run_finetuning.py keeps one."""
  tokenizer = load_tokenizer(str(VOCAB_8K))
  values.setdefault("max_seq_length", 24)
  config = FinetuningConfig(task_names=task_names, **values)
  tasks = task_builder.get_tasks(config, tokenizer)
  for task in tasks:
    if labels:
      task.restore_labels(labels)
  model_config = TransformerConfig(vocab_size=tokenizer.vocab_size, **MICRO)
  model = FinetuningModel(model_config, tasks, name="finetuning")
  ids = np.zeros((1, 4), np.int32)
  model.encoder(ids, ids + 1, ids)
  rng = np.random.RandomState(len(task_names))
  for task in tasks:
    model.heads[task.name].build(None)
  for v in model.trainable_variables:
    value = rng.normal(0.0, 0.5, tuple(v.shape))
    v.assign((value + v.path.endswith("gamma")).astype(np.float32))
  pretrain_config = PretrainingConfig(
      model_size="tiny", vocab_size=tokenizer.vocab_size,
      vocab_file=str(VOCAB_8K), model_hparam_overrides=dict(MICRO))
  finetuned_files.save(
      str(path), finetuning_config=config, pretrain_config=pretrain_config,
      model_config=model_config,
      tasks={t.name: t.model_info() for t in tasks},
      encoder={s.name: s.value() for s in encoder_slots(model.encoder)},
      heads={t.name: head_weights(model.heads[t.name]) for t in tasks},
      vocab_file=str(VOCAB_8K), info=dict(trial=0, run="test"))
  return str(path)
