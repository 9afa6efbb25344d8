"""Config for pretraining: every hparam of the original release has a home.

Defaults are ELECTRA-Small (ELECTRA paper Table 6 / dissertation Table 5.1);
presets live in configs/<objective>_<size>.json. Override with
`--hparams FILE_OR_JSON` (repeatable, later wins) and `--field-name` flags.
"""

import dataclasses
import os
from typing import Optional

from model.config import GENERATOR_MULTIPLIER
from model.config import TransformerConfig
from model.config import get_model_config
from pretrain import load_objectives
from util.config import check_choice
from util.config import SEED_RANGE
from util.config import check_numbers
from util.config import original_switches
from util.config import parse_config
from util.errors import UserError

WEIGHT_SHARING = ("embeddings", "none", "all", "gdes")
MASK_SCHEMES = ("electra", "bert")
REPEATED = ("average", "first")  # model/positions.py scatter_positions
# training/optimization.create_optimizer
OPTIMIZERS = ("adam_weight_decay", "adamw", "lamb")
PRECISIONS = ("auto", "float32", "bfloat16", "float16")
STRATEGIES = ("default", "mirrored", "multi_worker", "tpu")
INPUT_SHARDING = ("files", "batches")
MAX_POSITIONS = TransformerConfig.max_position_embeddings  # learned: 512


# The original release's switches (its configure_pretraining.py) -> the
# fields that say the same here; in the order applied, so that
# untied_generator=false wins over untied_generator_embeddings as it did.
ORIGINAL_SPELLINGS = {
    "electra_objective": lambda on: {} if on else {"objective": "mlm"},
    "electric_objective": lambda on: {"objective": "electric"} if on else {},
    "untied_generator_embeddings":
        lambda on: {"weight_sharing": "none"} if on else {},
    "untied_generator": lambda on: {} if on else {"weight_sharing": "all"},
    "use_tpu": lambda on: {"strategy": "tpu"} if on else {},
}


@dataclasses.dataclass
class PretrainingConfig:
  """All pretraining hparams. Paths default to the data-dir convention:
  DATA_DIR/pretrain_tfrecords/, DATA_DIR/vocab.txt, DATA_DIR/models/NAME/."""
  # Where things live.
  data_dir: str = ""
  model_name: str = ""
  pretrain_tfrecords: str = ""  # glob(s), comma-separated; default from dir
  # Eval data; default: the dataset's held-out shards (metadata.json), or
  # the training shards for a dataset built without a held-out split.
  eval_tfrecords: str = ""
  vocab_file: str = ""
  model_dir: str = ""
  init_checkpoint: str = ""  # a checkpoint to start from (weights only)
  eval_checkpoint: str = ""  # do_eval: this checkpoint, not model_dir's latest
  # Its old config is kept beside the new one (pretrain_config.step-N.json).
  accept_hparam_changes: bool = False  # resume a run with changed hparams

  # What to run.
  do_train: bool = True
  do_eval: bool = False
  debug: bool = False  # tiny model and few steps, for trying things out
  seed: int = 1234
  # Pretraining seeds K trained together in one compiled step (JAX only,
  # pretrain/multi_seed.py), e.g. "1,2": seed K is the run of seed + K - 1
  # in model_dir.seedK (model_dir itself for K = 1), as run_comparison.py
  # names its seeds' runs.
  seeds: str = ""

  # Objective (ELECTRA paper section 2; Table 6): a name registered in
  # pretrain/objectives/ (electra, mlm, electric, script, electra_15,
  # replace_mlm, all_tokens_mlm). The original release's spellings are
  # accepted in hparams and mapped once (ORIGINAL_SPELLINGS, below).
  objective: str = "electra"
  # The objective's own hparams, if its class declares any (its HPARAMS
  # dataclass); defaults filled in once resolved, an unknown key named.
  objective_hparams: dict = dataclasses.field(default_factory=dict)
  gen_weight: float = 1.0  # generator (MLM) loss weight
  disc_weight: float = 50.0  # discriminator loss weight; SCRIPT's alpha
  mask_prob: float = 0.15
  mask_scheme: str = ""  # "electra": [MASK] or keep; "bert": 80/10/10
  mask_replace_prob: float = 0.85  # electra scheme: share of picks -> [MASK]
  max_predictions_per_seq: Optional[int] = None  # (mask_prob+.005)*seq_len
  # A position masking picks twice gets the original's floordiv(sum, count)
  # of the generator's samples ("average"), or the first slot's ("first").
  repeated_positions: str = "average"
  temperature: float = 1.0  # generator (SCRIPT: Gumbel) sampling temperature
  disallow_correct: bool = False  # never sample the original token
  uniform_generator: bool = False  # samples uniform over the vocabulary
  unigram_generator: bool = False  # samples by the dataset's token counts
  two_tower_generator: bool = False  # Electric's cloze generator (ELECTRA-TT)
  # Generator/discriminator weights: embeddings (shared, default), none,
  # all (one encoder; same-size generator), gdes (DeBERTa-V3: discriminator
  # embeddings = stop_gradient(shared) + a zero-initialised delta).
  weight_sharing: str = ""
  # joint (default), two_stage (generator, then discriminator initialised
  # from it) or adversarial (generator by REINFORCE; ELECTRA appendix F):
  # pretrain/objectives/algorithms.py.
  training_algorithm: str = "joint"
  two_stage_generator_steps: int = 0  # stage one's steps; 0 = half the run

  # Model sizes (Table 5.1).
  model_size: str = "small"
  model_hparam_overrides: dict = dataclasses.field(default_factory=dict)
  embedding_size: Optional[int] = None
  vocab_size: Optional[int] = None  # default: from the dataset's metadata
  do_lower_case: bool = True
  # Multipliers of the discriminator's sizes; the hidden one defaults to
  # Table 5.1's generator size for model_size (1/4 small/large, 1/3 base).
  generator_hidden_size: Optional[float] = None
  generator_ffn_size: Optional[float] = None  # default: = hidden multiplier
  generator_heads: Optional[float] = None  # default: = hidden multiplier
  generator_layers: float = 1.0
  cross_layer_sharing: bool = False  # ALBERT-style: one layer's weights, N x

  # Optimization (Table 6). adam_weight_decay: the original release's Adam
  # (no bias correction); adamw: Keras' (bias-corrected); lamb.
  optimizer: str = "adam_weight_decay"
  learning_rate: float = 5e-4
  lr_decay_power: float = 1.0  # 1.0 = linear decay to 0
  weight_decay_rate: float = 0.01
  num_warmup_steps: int = 10000
  # The original release's warmup: the decayed lr x min(1, step/warmup);
  # false: rise linearly to the peak lr, then decay.
  warmup_scales_decay: bool = True
  num_train_steps: int = 1000000
  adam_beta1: float = 0.9
  adam_beta2: float = 0.999
  adam_epsilon: float = 1e-6
  clip_norm: float = 1.0  # global-norm clipping; 0 = off
  skip_nonfinite_steps: bool = False  # skip (and count) NaN/inf steps
  train_batch_size: int = 128  # global, across replicas
  eval_batch_size: int = 128
  max_seq_length: int = 128

  # Loop, checkpoints, logs.
  # Steps per host call and log interval; fewer while a call would run for
  # over ~15 s early in a run (training/step_log.py).
  iterations_per_loop: int = 200
  log_every_steps: int = 0  # 0 = once per loop
  save_checkpoints_steps: int = 1000
  keep_checkpoint_max: int = 5  # of the step-scheduled checkpoints
  # Also save every this many seconds (0 = only by steps): a resume point for
  # runs that a session end or a kill stops, superseded by the next save.
  save_checkpoints_secs: int = 0
  num_eval_steps: int = 100
  # The training data's order, as the original's get_input_fn reads it:
  # shards interleaved this many at a time, records shuffled in a buffer of
  # this many (before 2026-12-02 ours: 16 and 10000; docs/mirroring.md).
  input_cycle_length: int = 4
  shuffle_buffer_size: int = 100
  input_sharding: str = "files"  # workers split "files", or slice "batches"
  skip_corrupt_records: bool = False  # read damaged shards up to the damage

  # Hardware.
  mixed_precision: str = "auto"  # auto: bfloat16 on TPU/GPU(sm80+), else fp32
  xla: bool = False
  strategy: str = "default"
  tpu_job_name: str = ""
  tpu_name: str = ""
  tpu_zone: str = ""
  gcp_project: str = ""
  num_gpus: int = 0  # mirrored: 0 = all visible devices
  keep_worker_checkpoints: bool = False  # non-chief workers keep their last
  intra_op_threads: int = 0  # 0 = TensorFlow's default
  inter_op_threads: int = 0

  # Every number's range (util/config.check_numbers; None: any value).
  RANGES = {
      "seed": SEED_RANGE, "gen_weight": ">= 0", "disc_weight": ">= 0",
      "mask_prob": "(0, 1)", "mask_replace_prob": "[0, 1]",
      "max_predictions_per_seq": ">= 1", "temperature": "> 0",
      "two_stage_generator_steps": ">= 0", "embedding_size": ">= 1",
      "vocab_size": ">= 1", "generator_hidden_size": "> 0",
      "generator_ffn_size": "> 0", "generator_heads": "> 0",
      "generator_layers": "> 0", "learning_rate": "> 0",
      "lr_decay_power": ">= 0", "weight_decay_rate": ">= 0",
      "num_warmup_steps": ">= 0", "num_train_steps": ">= 1",
      "adam_beta1": "[0, 1)", "adam_beta2": "[0, 1)", "adam_epsilon": "> 0",
      "clip_norm": ">= 0", "train_batch_size": ">= 1",
      "eval_batch_size": ">= 1", "max_seq_length": ">= 8",
      "iterations_per_loop": ">= 1", "log_every_steps": ">= 0",
      "save_checkpoints_steps": ">= 1", "keep_checkpoint_max": ">= 1",
      "save_checkpoints_secs": ">= 0", "num_eval_steps": ">= 1",
      "shuffle_buffer_size": ">= 1", "input_cycle_length": ">= 1",
      "num_gpus": ">= 0",
      "intra_op_threads": ">= 0", "inter_op_threads": ">= 0"}

  @property
  def generator_multiplier(self):
    """generator_hidden_size, or Table 5.1's for model_size when unset."""
    if self.generator_hidden_size is not None:
      return self.generator_hidden_size
    return GENERATOR_MULTIPLIER.get(self.model_size, 0.25)

  @classmethod
  def original_spellings(cls, overrides):
    """`overrides` with the original release's switches replaced by the
    fields they set (util/config.apply_overrides calls this: the config
    boundary, the one place these names exist). Fields given directly win.
    """
    return original_switches(overrides, ORIGINAL_SPELLINGS)

  def resolve(self):
    """Fills derived defaults once all overrides are in."""
    self.generator_hidden_size = self.generator_multiplier
    self.weight_sharing = self.weight_sharing or "embeddings"
    if (self.training_algorithm == "two_stage" and
        not self.two_stage_generator_steps):
      self.two_stage_generator_steps = self.num_train_steps // 2
    if self.cross_layer_sharing:
      self.model_hparam_overrides = dict(self.model_hparam_overrides,
                                         share_layers=True)
    # The objective's own defaults (e.g. its masking: ELECTRA's, or BERT's
    # 80/10/10); an unknown objective is left for validate() to name.
    objectives = load_objectives()
    if self.objective in objectives.objective_names():
      objectives.configure(self)
    if self.max_predictions_per_seq is None:
      self.max_predictions_per_seq = int(
          (self.mask_prob + 0.005) * self.max_seq_length)
    if self.embedding_size is not None:
      self.model_hparam_overrides = dict(self.model_hparam_overrides,
                                         embedding_size=self.embedding_size)
    if self.debug:
      self.model_size = "tiny"
      self.num_train_steps = min(self.num_train_steps, 20)
      self.num_warmup_steps = min(self.num_warmup_steps, 5)
      self.train_batch_size = min(self.train_batch_size, 8)
      self.eval_batch_size = min(self.eval_batch_size, 8)
      self.num_eval_steps = min(self.num_eval_steps, 2)
      self.iterations_per_loop = min(self.iterations_per_loop, 5)
    if self.data_dir:
      self.pretrain_tfrecords = self.pretrain_tfrecords or os.path.join(
          self.data_dir, "pretrain_tfrecords", "pretrain_data.tfrecord*")
      self.vocab_file = self.vocab_file or os.path.join(self.data_dir,
                                                        "vocab.txt")
      if self.model_name:
        self.model_dir = self.model_dir or os.path.join(
            self.data_dir, "models", self.model_name)

  def validate(self):
    check_numbers(self)  # the values given, before defaults derive from them
    self.resolve()
    check_numbers(self)
    if not self.data_dir and not (self.pretrain_tfrecords and self.model_dir):
      raise UserError("--data-dir is required (or both pretrain_tfrecords "
                      "and model_dir)")
    if not self.model_dir:
      raise UserError("--model-name is required")
    load_objectives().objective_class(self.objective)  # unknown: named
    choices = (("mask_scheme", MASK_SCHEMES),
               ("repeated_positions", REPEATED),
               ("optimizer", OPTIMIZERS), ("mixed_precision", PRECISIONS),
               ("strategy", STRATEGIES), ("input_sharding", INPUT_SHARDING),
               ("weight_sharing", WEIGHT_SHARING))
    for name, allowed in choices:
      check_choice(f"hparam '{name}'", getattr(self, name), allowed)
    # The model's shape too (model_hparam_overrides' keys and values).
    get_model_config(self.model_size, self.vocab_size or 1,
                     self.model_hparam_overrides)
    if self.max_predictions_per_seq > self.max_seq_length:
      raise UserError(f"max_predictions_per_seq {self.max_predictions_per_seq}"
                      f" exceeds max_seq_length {self.max_seq_length}")
    positions = self.model_hparam_overrides.get("max_position_embeddings",
                                                MAX_POSITIONS)
    if isinstance(positions, int) and self.max_seq_length > positions:
      raise UserError(f"max_seq_length {self.max_seq_length} exceeds the "
                      f"model's {positions} positions (model_hparam_overrides"
                      " max_position_embeddings)")
    if self.seeds:
      parse_seeds(self.seeds)
    if not self.do_train and not self.do_eval:
      raise UserError("nothing to do: both do_train and do_eval are false")
    self._validate_generator()

  def _validate_generator(self):
    """Combinations of generator options that cannot work, named."""
    if self.uniform_generator and self.unigram_generator:
      raise UserError("choose one of uniform_generator and unigram_generator")
    load_objectives().check_config(self)  # the objective's own checks


def parse_seeds(text):
  """'1,2' -> [1, 2]: the seeds field's pretraining seeds K >= 1, each once."""
  try:
    seeds = [int(s) for s in str(text).split(",") if s.strip()]
  except ValueError:
    seeds = []
  if not seeds or min(seeds) < 1 or len(set(seeds)) != len(seeds):
    raise UserError(f"seeds '{text}': give pretraining seeds K >= 1, "
                    "comma-separated, each once (e.g. --seeds 1,2)")
  return seeds


def load_config(argv=None, check_first=None):
  """Parses run_pretraining.py's command line into a PretrainingConfig;
  check_first(config) runs before validate() loads the objectives'
  registry (and TensorFlow)."""
  config, _ = parse_config(
      PretrainingConfig, argv, description="Pretrain an ELECTRA-style model.",
      check_first=check_first)
  return config
