"""Config for fine-tuning: every hparam of the original release has a home.

Defaults follow the ELECTRA paper's Table 6 / dissertation Table 5.2
(learning rate by model size, layer-wise decay 0.8 small/base and 0.9
large, warmup 10%, 3 epochs but 10 for RTE/STS and 2 for SQuAD, batch 32,
weight decay 0). Override with `--hparams FILE_OR_JSON` (repeatable, later
wins) and `--field-name` flags.
"""

import dataclasses
import json
import os
from typing import Optional

from finetune import data_layout
from finetune import task_arrays
from finetune import task_builder
from inference.choices import ENGINES
from inference.choices import PRECISIONS
from model.config import MODEL_PRESETS
from model.config import get_model_config
from util import storage
from util.config import apply_overrides
from util.config import check_choice
from util.config import SEED_RANGE
from util.config import check_numbers
from util.config import check_data_dir
from util.config import check_tpu_name
from util.config import original_switches
from util.config import parse_config
from util.errors import UserError
from util.outputs import check_output_dir

# Table 6: learning rate 3e-4 Small, 1e-4 Base, 5e-5 Large; layer-wise
# decay 0.8 Small/Base, 0.9 Large. Tiny (ours, not in the paper): 1e-3
# beats 3e-4 by 0.7 GLUE points with the original's optimizer, 3 seeds
# (results/comparison_tiny/lr_probe/v3/; +3 with Keras' AdamW, one up).
LEARNING_RATES = {"tiny": 1e-3, "small": 3e-4, "base": 1e-4, "large": 5e-5}
LAYERWISE_DECAY = {"tiny": 0.8, "small": 0.8, "base": 0.8, "large": 0.9}
EPOCHS = {"rte": 10.0, "sts": 10.0, "squad": 2.0, "squadv1": 2.0}
# The original release's configure_finetuning: one task with "squad" or
# "qa" in its name gets 512 tokens, chunking 256, anything else (and any
# multi-task run) 128.
QA_MAX_SEQ_LENGTH, CHUNK_MAX_SEQ_LENGTH, DEFAULT_MAX_SEQ_LENGTH = 512, 256, 128
DEFAULT_EPOCHS = 3.0
INIT_FROM = ("discriminator", "generator")
KEEP_MODEL = ("best", "last", "none")
QA_HEADS = ("electra", "xlnet", "linear")
# training/optimization.create_optimizer; lamb is for pretraining only.
OPTIMIZERS = ("adam_weight_decay", "adamw")
# Multi-worker fine-tuning is not offered: one host holds the trial record.
STRATEGIES = ("default", "mirrored", "tpu")

# The original release's configure_finetuning.py switches that mean
# something here -> the fields that say it (util/config.original_switches):
# use_tpu as pretraining's; joint_prediction false is BERT's independent
# start/end logits, our linear QA head.
ORIGINAL_SPELLINGS = {
    "use_tpu": lambda on: {"strategy": "tpu"} if on else {},
    "joint_prediction": lambda on: {} if on else {"qa_head": "linear"},
}

# What --do-predict takes from the saved fine-tuned model's config rather
# than the command's: what builds the model and reads and featurizes the
# input, so that it predicts exactly as the run that trained it.
MODEL_SETTINGS = (
    "model_size", "model_hparam_overrides", "do_lower_case",
    "max_seq_length", "hidden_dropout_prob", "mixed_precision", "doc_stride",
    "max_query_length", "n_best_size", "max_answer_length", "beam_size",
    "answerable_classifier", "answerable_uses_start_logits",
    "qa_na_threshold", "qa_head", "tagging_crf", "normalize_regression_labels")

# What a resumed run (finetune/trial_record.py) may change: where things are,
# how often it logs, eval batching, the number of trials (raise it to run
# more) and --overwrite itself. Any other change is refused.
RUN_SETTINGS = frozenset((
    "data_dir", "model_name", "raw_data_dir", "vocab_file", "output_dir",
    "overwrite", "log_every_steps", "eval_batch_size", "num_trials",
    "do_predict", "predict_file", "predict_output",
    "write_distill_outputs", "inference_engine", "inference_precision"))


@dataclasses.dataclass
class FinetuningConfig:
  """All fine-tuning hparams. Paths follow the data-dir convention:
  DATA_DIR/finetuning_data/<task>/, DATA_DIR/models/NAME/ (the pretrained
  model; results go to its finetuning_models/ and results/ folders)."""
  # Where things live.
  data_dir: str = ""
  model_name: str = ""
  # As the original release's hparams, also a list: ["rte", "mrpc"].
  task_names: str = "chunk"  # comma-separated, e.g. "rte,mrpc" (multi-task)
  # Holds a folder per task (rte/ or RTE/, chunk/, squad/, ...):
  # finetune/data_layout.py, docs/run_finetuning.md.
  raw_data_dir: str = ""  # tasks' folders; default DATA_DIR/finetuning_data
  # Or the tasks' rows as arrays (prepare_gpu_slot.py --glue-dir): read
  # without TensorFlow or the tokenizer (finetune/task_arrays.py).
  task_arrays: str = ""
  init_checkpoint: str = ""  # default DATA_DIR/models/NAME (pretraining)
  init_from: str = "discriminator"  # or "generator" (its encoder)
  vocab_file: str = ""  # default: the pretraining run's, else DATA_DIR/vocab.txt
  output_dir: str = ""  # default DATA_DIR/models/NAME/finetuning
  overwrite: bool = False  # replace prediction files of an earlier run
  # The fine-tuned model kept in OUTPUT_DIR/<tasks>_model/: the trial with
  # the best dev score (the tasks' headline metrics, averaged), the last
  # trial, or none.
  keep_model: str = "best"

  # What to run.
  do_train: bool = True
  do_eval: bool = True
  write_test_outputs: bool = False  # GLUE TSVs / SQuAD JSON for test sets
  # Only predict predict_file with a fine-tuned model (--init-checkpoint,
  # else OUTPUT_DIR/<task>_model/): no training.
  do_predict: bool = False
  predict_file: str = ""  # any file in the task's dev or test layout
  # default OUTPUT_DIR/<task>_<predict file's name>_predictions.<ext>
  predict_output: str = ""
  num_trials: int = 1  # seeds; median, mean and std of each metric reported
  # Also each trial's dev outputs (its heads' NumPy outputs, a row per dev
  # row) in OUTPUT_DIR/<task>_dev_outputs_trial<k>.npz, to score elsewhere
  # (the GPU slot's, by collect_gpu_slot.py).
  write_dev_outputs: bool = False
  seed: int = 1234
  debug: bool = False  # a few examples and steps, for trying things out
  train_examples_limit: int = 0  # 0 = all (for quick runs / tests)
  eval_examples_limit: int = 0

  # Model.
  # Picks the learning rate and layer-wise decay defaults; default: the
  # model's own (its architecture's preset, else its run's model_size).
  model_size: str = ""  # default: the model's (tiny, small, base, large)
  model_hparam_overrides: dict = dataclasses.field(default_factory=dict)
  do_lower_case: bool = True
  # Default by task, as the original: default_max_seq_length(); cut to the
  # model's max_position_embeddings where it has fewer (the trainer).
  max_seq_length: Optional[int] = None
  hidden_dropout_prob: Optional[float] = None  # default: the model's (0.1)

  # Optimization (ELECTRA Table 6).
  learning_rate: Optional[float] = None  # default by the model's size
  layerwise_lr_decay: Optional[float] = None  # default by the model's size
  # adam_weight_decay: the original release's Adam (no bias correction);
  # adamw: Keras' (bias-corrected). training/optimization.py.
  optimizer: str = "adam_weight_decay"
  # The original release's configure_finetuning.py; its paper (Table 6,
  # dissertation Table 5.2) says 0: docs/mirroring.md.
  weight_decay_rate: float = 0.01
  warmup_proportion: float = 0.1
  # The original release's warmup: the decayed lr x min(1, step/warmup);
  # false: rise linearly to the peak lr, then decay.
  warmup_scales_decay: bool = True
  num_train_epochs: Optional[float] = None  # default by task
  train_batch_size: int = 32
  eval_batch_size: int = 32
  # Each batch (train, eval, predict) padded to its longest row rounded up
  # to this, not to max_seq_length (finetune/padding.py): the same losses,
  # less padding. 0 (or >= max_seq_length): every batch at max_seq_length.
  pad_to_multiple: int = 16
  # Windows of this many training batches sorted by length and shuffled
  # (finetune/length_groups.py; transformers' group_by_length uses 50): less
  # padding, other rows sharing a batch. 0: the original's batches.
  group_by_length: int = 0
  # What runs evaluation and --do-predict (inference/engine.py): auto
  # (OpenVINO for a split of 1024+ rows, else TensorFlow), openvino or
  # tensorflow (the reference); its precision: auto = bfloat16 where the
  # CPU has AVX512-BF16/AMX, else float32.
  inference_engine: str = "auto"
  inference_precision: str = "auto"
  adam_epsilon: float = 1e-6
  adam_beta1: float = 0.9
  adam_beta2: float = 0.999
  clip_norm: float = 1.0
  double_unordered: bool = True  # MRPC/STS: also train on (b, a) pairs
  # Regression targets (STS-B) divided by the task's top score, as the
  # original release trains (0-1); false: the raw 0-5 score.
  normalize_regression_labels: bool = True
  log_every_steps: int = 100
  mixed_precision: str = "float32"  # or bfloat16
  # TensorFlow: the train step compiled with XLA (jit_compile), one program
  # per batch length: 1.13x a step on a quiet 2-core Xeon at 32 tokens,
  # but ~14 s more than the default's one trace for each length a run
  # meets, so it pays on long runs only (docs/performance.md). One device.
  # Under JAX every step is XLA's already.
  xla: bool = False
  # As pretraining's: default | mirrored (local GPUs, else every logical
  # CPU device) | tpu; train_batch_size is split evenly over the replicas.
  strategy: str = "default"
  num_gpus: int = 0  # mirrored: 0 = all visible GPUs
  tpu_name: str = ""
  tpu_zone: str = ""
  gcp_project: str = ""
  tpu_job_name: str = ""

  # SQuAD (finetune/qa/qa_head.py). qa_head "electra": the release's head
  # (end conditioned on the start, a beam; its answerability loss on 1.1
  # too); "xlnet": XLNet's end head (the default until 2026-12-06);
  # "linear": BERT's independent start/end logits, which export to
  # transformers' ElectraForQuestionAnswering.
  qa_head: str = "electra"
  doc_stride: int = 128
  max_query_length: int = 64
  n_best_size: int = 20
  max_answer_length: int = 30
  beam_size: int = 20  # starts x ends searched at inference
  answerable_classifier: bool = True  # the answerability head
  answerable_uses_start_logits: bool = True
  answerable_weight: float = 0.5
  qa_na_threshold: float = -2.75  # default; 2.0 eval also searches it

  # Tagging (chunk, pos): a linear-chain CRF over the words instead of a
  # per-token softmax (finetune/tagging/crf.py).
  tagging_crf: bool = False

  # BAM, born-again multi-task networks (dissertation chapter 3;
  # finetune/bam.py; names as google-research/bam's). A teacher run writes
  # its kept model's outputs on its train rows; a multi-task student then
  # learns each task from lambda * gold + (1 - lambda) * teacher (3.2.2).
  write_distill_outputs: bool = False  # teacher: OUTPUT_DIR/distill/<task>.npz
  distill: bool = False  # student: learn from `teachers` (3.2.2)
  # {task: a teacher's outputs .npz, or a fine-tuned model's folder}
  teachers: dict = dataclasses.field(default_factory=dict)
  # lambda from 0 to 1 over training; False: 0 throughout (Table 3.4)
  teacher_annealing: bool = True  # teacher annealing (3.2.2)
  # Tasks sampled per step in proportion to |D|^exponent (3.3: BAM 0.75);
  # None: each task's steps interleaved evenly over the run.
  task_weight_exponent: Optional[float] = None

  # Every number's range (util/config.check_numbers; None: any value).
  # max_seq_length: [CLS] a [SEP] b [SEP] with a token of each.
  RANGES = {
      "num_trials": ">= 1", "seed": SEED_RANGE, "train_examples_limit": ">= 0",
      "eval_examples_limit": ">= 0", "max_seq_length": ">= 5",
      "hidden_dropout_prob": "[0, 1)", "learning_rate": "> 0",
      "layerwise_lr_decay": "(0, 1]", "weight_decay_rate": ">= 0",
      "warmup_proportion": "[0, 1)", "num_train_epochs": "> 0",
      "train_batch_size": ">= 1", "eval_batch_size": ">= 1",
      "pad_to_multiple": ">= 0", "group_by_length": ">= 0",
      "adam_epsilon": "> 0", "adam_beta1": "[0, 1)", "adam_beta2": "[0, 1)",
      "clip_norm": ">= 0", "log_every_steps": ">= 1", "doc_stride": ">= 1",
      "max_query_length": ">= 1", "n_best_size": ">= 1",
      "max_answer_length": ">= 1", "beam_size": ">= 1",
      "answerable_weight": ">= 0", "qa_na_threshold": None,
      "task_weight_exponent": ">= 0", "num_gpus": ">= 0"}

  @classmethod
  def original_spellings(cls, overrides):
    """The original release's forms (util/config.apply_overrides calls
    this at the config boundary): its task_names is a list, ["mnli"];
    its ORIGINAL_SPELLINGS switches."""
    overrides = original_switches(overrides, ORIGINAL_SPELLINGS)
    names = overrides.get("task_names")
    if not isinstance(names, (list, tuple)):
      return overrides
    if not all(isinstance(n, str) for n in names):
      raise UserError("hparam 'task_names' expects a list of task names "
                      f"or a comma-separated string, got {names!r}")
    return dict(overrides, task_names=",".join(names))

  def resolve(self, pretrain_size=None):
    """Derived defaults; `pretrain_size` is the size of the model being
    fine-tuned (model_size_of). Until it is known (the command line is
    parsed before the checkpoint is read), model_size, learning_rate and
    layerwise_lr_decay stay unset unless given."""
    self.model_size = self.model_size or pretrain_size or ""
    self.fill_max_seq_length()
    if self.model_size and self.learning_rate is None:
      self.learning_rate = LEARNING_RATES.get(self.model_size, 1e-4)
    if self.model_size and self.layerwise_lr_decay is None:
      self.layerwise_lr_decay = LAYERWISE_DECAY.get(self.model_size, 0.8)
    if self.data_dir:
      self.raw_data_dir = self.raw_data_dir or os.path.join(
          self.data_dir, "finetuning_data")
      if self.model_name:
        model_dir = os.path.join(self.data_dir, "models", self.model_name)
        self.init_checkpoint = self.init_checkpoint or model_dir
        self.output_dir = self.output_dir or os.path.join(model_dir,
                                                          "finetuning")
    if self.debug:
      self.train_examples_limit = self.train_examples_limit or 64
      self.eval_examples_limit = self.eval_examples_limit or 64

  # Whether resolve() filled max_seq_length in (not a field: never saved).
  max_seq_length_is_default = False

  def default_max_seq_length(self, tasks=None):
    """The original's per-task default (see QA_MAX_SEQ_LENGTH)."""
    tasks = self.tasks if tasks is None else tasks
    if len(tasks) == 1:
      name = tasks[0]
      if "squad" in name or "qa" in name:
        return QA_MAX_SEQ_LENGTH
      if name == "chunk":
        return CHUNK_MAX_SEQ_LENGTH
    return DEFAULT_MAX_SEQ_LENGTH

  def fill_max_seq_length(self, tasks=None):
    """Sets an unset max_seq_length to the default for `tasks` (default:
    task_names); resolve() and a Task built on an unresolved config."""
    if self.max_seq_length is None:
      self.max_seq_length = self.default_max_seq_length(tasks)
      self.max_seq_length_is_default = True

  def fit_max_seq_length(self, max_positions):
    """A defaulted max_seq_length cut to the model's positions (the
    original's models all have 512); a given one is left to fail."""
    if self.max_seq_length_is_default and self.max_seq_length > max_positions:
      self.max_seq_length = max_positions

  @property
  def tasks(self):
    return [t.strip().lower() for t in self.task_names.split(",")
            if t.strip()]

  def epochs_for(self, task_name):
    if self.num_train_epochs is not None:
      return self.num_train_epochs
    return EPOCHS.get(task_name, DEFAULT_EPOCHS)

  def validate(self, pretrain_size=None):
    check_numbers(self)
    last = self.seed + self.num_trials - 1  # trial k's seed: seed + k - 1
    if last >= 2 ** 32:
      raise UserError(f"hparam 'seed' {self.seed} with num_trials "
                      f"{self.num_trials}: the last trial's seed {last} is "
                      "past 2**32 - 1, the most a seed can be")
    check_data_dir(self)
    self.resolve(pretrain_size)
    check_numbers(self)
    if self.do_predict:
      self._validate_predict()
    elif not self.data_dir and not ((self.raw_data_dir or self.task_arrays)
                                    and self.output_dir):
      raise UserError("--data-dir is required (or raw_data_dir or "
                      "task_arrays, and output_dir)")
    if self.task_arrays:
      task_arrays.adopt(self, FinetuningConfig())
    if not self.tasks:
      raise UserError("no task given: --task-names rte,mrpc,...")
    task_builder.check_task_names(self.tasks)
    if self.model_size:
      check_choice("model_size", self.model_size, tuple(MODEL_PRESETS))
    check_choice("keep_model", self.keep_model, KEEP_MODEL)
    twice = [t for i, t in enumerate(self.tasks) if t in self.tasks[:i]]
    if twice:
      raise UserError(f"task '{twice[0]}' is named twice in --task-names")
    check_choice("init_from", self.init_from, INIT_FROM)
    check_choice("mixed_precision", self.mixed_precision,
                 ("float32", "bfloat16"))
    check_choice("qa_head", self.qa_head, QA_HEADS)
    check_choice("optimizer", self.optimizer, OPTIMIZERS)
    check_choice("strategy", self.strategy, STRATEGIES)
    if self.xla and self.strategy != "default":
      raise UserError(f"xla compiles the one-device train step: strategy "
                      f"{self.strategy} runs without it (leave xla false)")
    if self.num_gpus and self.strategy != "mirrored":
      raise UserError(f"num_gpus {self.num_gpus} is read by --strategy "
                      f"mirrored only (strategy {self.strategy} trains on one"
                      " device): add --strategy mirrored")
    check_tpu_name(self)
    check_choice("inference_engine", self.inference_engine, ENGINES)
    check_choice("inference_precision", self.inference_precision,
                 PRECISIONS)
    squad = any(t.startswith("squad") for t in self.tasks)
    if squad and self.max_query_length >= self.max_seq_length - 3:
      raise UserError(f"max_query_length {self.max_query_length} leaves no "
                      f"room for the context in max_seq_length "
                      f"{self.max_seq_length}")
    if (not self.do_predict and not self.do_train and not self.do_eval and
        not self.write_test_outputs):
      raise UserError("nothing to do: do_train, do_eval and "
                      "write_test_outputs are all false")
    if not self.do_predict:
      self._validate_bam()
    check_output_dir(self.output_dir, "output_dir")  # before any work

  @property
  def teacher_paths(self):
    """{task: path} of `teachers`, task names as in `tasks`."""
    return {str(k).strip().lower(): v for k, v in self.teachers.items()}

  def _validate_bam(self):
    """BAM's settings (finetune/bam.py), before any work."""
    if self.distill or self.write_distill_outputs:
      for task in self.tasks:  # the trainer checks tasks added elsewhere
        kind = data_layout.kind(task)
        if kind not in ("GLUE", ""):
          raise UserError(f"{task} is a {kind} task: BAM's distill and "
                          "write_distill_outputs take classification and "
                          "regression (GLUE) tasks only")
    teachers = self.teacher_paths
    bad = [k for k, v in teachers.items() if not isinstance(v, str) or
           not v.strip()]
    if bad:
      raise UserError(f"teachers: {bad[0]}'s teacher must be a path (a "
                      "teacher's outputs .npz or a fine-tuned model folder)")
    if self.distill:
      if not teachers:
        raise UserError("distill needs teachers: {\"<task>\": \"TEACHER_"
                        "OUTPUT_DIR/distill/<task>.npz\" or a fine-tuned "
                        "model folder, ...}, one per task")
      other = [k for k in teachers if k not in self.tasks]
      if other:
        raise UserError(f"teachers names {other[0]}, which is not in "
                        f"--task-names ({','.join(self.tasks)})")
      missing = [t for t in self.tasks if t not in teachers]
      if missing:
        raise UserError(f"distill: no teacher for {missing[0]} (every task "
                        "of the student needs one in teachers)")
    if self.write_distill_outputs and (not self.do_train or
                                       self.keep_model == "none"):
      raise UserError("write_distill_outputs writes the outputs of the model "
                      "a run keeps: it needs do_train and keep_model best "
                      "or last")

  def _validate_predict(self):
    if not self.predict_file:
      raise UserError("--do-predict needs --predict-file (a file in the "
                      "task's dev or test layout)")
    if len(self.tasks) != 1:
      raise UserError(f"--do-predict predicts one task's file; "
                      f"--task-names names {len(self.tasks)}")
    if storage.isdir(self.predict_file) and self.tasks != ["race"]:
      raise UserError(f"predict_file {self.predict_file} is a folder, not "
                      "a file")
    if not storage.exists(self.predict_file):
      raise UserError(f"predict_file {self.predict_file} not found")
    if not self.predict_output and not self.output_dir:
      raise UserError("--do-predict needs --predict-output (or "
                      "--output-dir, or --data-dir and --model-name)")

  def with_model_settings(self, saved, source):
    """This config with MODEL_SETTINGS taken from a fine-tuned model's
    saved config (a dict), for --do-predict."""
    values = {k: saved[k] for k in MODEL_SETTINGS if k in saved}
    try:
      return apply_overrides(self, values, source)
    except UserError as e:
      raise UserError(f"{source}: {e}") from None

  def run_hparams(self):
    """{field: value} of what a resumed run must keep (not RUN_SETTINGS),
    as JSON would give them back."""
    return {k: v for k, v in json.loads(json.dumps(
        dataclasses.asdict(self))).items() if k not in RUN_SETTINGS}


# What tells the presets apart (model/config.py's MODEL_PRESETS).
_ARCHITECTURE = ("hidden_size", "num_hidden_layers", "num_attention_heads",
                 "intermediate_size", "embedding_size")


def model_size_of(pretrain_config):
  """The size whose fine-tuning defaults a model takes: the preset its
  architecture is (a transformers or TF1 import says "base" with its own
  sizes as overrides), else the model_size its run was given."""
  encoder = get_model_config(pretrain_config.model_size,
                             pretrain_config.vocab_size,
                             pretrain_config.model_hparam_overrides)
  for size, preset in MODEL_PRESETS.items():
    if all(getattr(encoder, k) == preset[k] for k in _ARCHITECTURE):
      return size
  return pretrain_config.model_size


def load_config(argv=None):
  """Parses run_finetuning.py's command line into a FinetuningConfig."""
  config, _ = parse_config(
      FinetuningConfig, argv,
      description="Fine-tune a pretrained ELECTRA-style model.")
  return config
