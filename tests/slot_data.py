"""A tiny pretraining dataset (TFRecords with held-out shards, from the
sample corpus and its 7.5k vocabulary) and its pretrain/arrays.py export,
for the TensorFlow-free JAX path's tests."""

import os
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEQ = 32
# A micro model: compiles fast under JAX on a CPU.
MICRO = {"model_size": "tiny",
         "model_hparam_overrides": {"hidden_size": 32, "intermediate_size": 64,
                                    "num_attention_heads": 2,
                                    "embedding_size": 16}}


def build_data(root):
  """DATA_DIR with pretrain_tfrecords/ (training and held-out shards)."""
  import build_pretraining_dataset  # pylint: disable=g-import-not-at-top
  os.makedirs(root, exist_ok=True)
  vocab = os.path.join(root, "vocab.txt")
  shutil.copy(os.path.join(ROOT, "sample_data", "vocab_8k.txt"), vocab)
  code = build_pretraining_dataset.main([
      "--corpus-dir", os.path.join(ROOT, "sample_data", "corpus"),
      "--vocab-file", vocab,
      "--output-dir", os.path.join(root, "pretrain_tfrecords"),
      "--max-seq-length", str(SEQ), "--max-docs", "16",
      "--num-out-files", "3", "--heldout-fraction", "0.25"])
  assert code in (0, None)
  return root


def export_arrays(data_dir, out, **kwargs):
  from pretrain import arrays  # pylint: disable=g-import-not-at-top
  from pretrain.config import PretrainingConfig  # pylint: disable=g-import-not-at-top
  config = PretrainingConfig(data_dir=data_dir, model_name="export",
                             max_seq_length=SEQ)
  config.resolve()
  return arrays.export(config, out, **kwargs)


BLOCKER = 'raise ImportError("tensorflow is blocked: the GPU slot has none")\n'


def slot_env(tmp, **extra):
  """The slot's environment here: JAX on the CPU, keras as installed, and
  a `tensorflow` package on the path that refuses to import."""
  blocked = os.path.join(tmp, "blocked")
  os.makedirs(os.path.join(blocked, "tensorflow"), exist_ok=True)
  with open(os.path.join(blocked, "tensorflow", "__init__.py"), "w") as f:
    f.write(BLOCKER)
  # TMPDIR: the slot keeps its weights in TMPDIR/slot_weights.
  return dict(os.environ, PYTHONPATH=f"{blocked}:{ROOT}", JAX_PLATFORMS="cpu",
              SLOT_PYTHON=sys.executable, TMPDIR=tmp, **extra)


# Fine-tuning tasks for the slot: slices of the real RTE and STS-B.
FINETUNE = {"task_names": "rte,sts", "train_examples_limit": 48,
            "eval_examples_limit": 32, "max_seq_length": SEQ,
            "num_train_epochs": 1.0, "train_batch_size": 8,
            "eval_batch_size": 12}  # 32 dev rows: the last batch wraps


def export_tasks(data_dir, out):
  """DATA/finetune/ (finetune/arrays.py) of FINETUNE with the data's vocab;
  returns its metadata."""
  # pylint: disable=g-import-not-at-top
  from finetune import arrays as ft_arrays
  from finetune import task_builder
  from finetune.config import FinetuningConfig
  from tests.shared_data import SHARED
  from util.tokenization import load_tokenizer
  config = FinetuningConfig(raw_data_dir=os.path.join(SHARED, "glue"),
                            **FINETUNE)
  config.resolve("tiny")
  config.vocab_file = os.path.join(data_dir, "vocab.txt")
  tokenizer = load_tokenizer(config.vocab_file, config.do_lower_case)
  tasks = task_builder.get_tasks(config, tokenizer)
  return ft_arrays.export(config, tokenizer, tasks,
                          os.path.join(out, "finetune"), tokenizer.vocab_size)
