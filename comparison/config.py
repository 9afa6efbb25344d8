"""Config for run_comparison.py: one dataclass, overridable by JSON hparams
and `--field-name` flags. TF-free, so bad flags fail in under a second."""

import dataclasses
import os

from finetune import data_layout
from finetune.config import FinetuningConfig
from pretrain import objective_names
from pretrain.config import MAX_POSITIONS
from pretrain.config import PretrainingConfig
from scoring.config import ScoringConfig
from util import storage
from util.config import apply_overrides
from util.config import check_folder
from util.config import check_numbers
from util.config import parse_config
from util.errors import UserError
from util.outputs import check_output_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# GLUE tasks whose train and dev sets are public (MNLI/QQP/QNLI train are
# large downloads); the papers' GLUE score averages all eight.
DEFAULT_TASKS = "cola,sst,mrpc,sts,rte"
TASK_ALIASES = {"sst-2": "sst", "sst2": "sst", "sts-b": "sts", "stsb": "sts"}
# Token-level tasks, read from a CoNLL-2000 folder (conll_dir).
TAGGING_TASKS = ("chunk", "pos")
# What a comparison fine-tunes: GLUE from glue_dir, tagging from conll_dir.
KNOWN_TASKS = data_layout.GLUE + TAGGING_TASKS


@dataclasses.dataclass
class ComparisonConfig:
  """Objectives pretrained for the same FLOPs, then fine-tuned and scored."""
  output_dir: str = ""  # everything: data/, models/, results.json, plots
  # Pretraining data: TFRecords in DATA/pretrain_tfrecords are reused; else
  # built from corpus_dir (default: the embedded sample) with vocab_file.
  corpus_dir: str = ""
  vocab_file: str = ""
  pretrain_data_dir: str = ""  # default OUTPUT_DIR/data
  num_processes: int = 2  # dataset building
  max_seq_length: int = 128
  # Documents the build sets aside; every checkpoint is evaluated on them.
  heldout_fraction: float = 0.02

  # What to compare: objective names or presets (mlm, electra, electric,
  # script, electra_15, replace_mlm, all_tokens_mlm, ale, ...); NAME:K
  # pretrains that one K times (seeds), overriding pretrain_seeds.
  objectives: str = "mlm,electra,electric,script"
  pretrain_seeds: int = 1  # pretraining runs (seeds) per objective
  model_size: str = "tiny"
  pretrain_hparams: dict = dataclasses.field(default_factory=dict)  # all runs
  budget_flops: float = 0.0  # train FLOPs of each run; 0 = ELECTRA preset's
  num_checkpoints: int = 4  # evaluated and fine-tuned at budget x k/N
  warmup_fraction: float = 0.1  # warmup cap, share of each run's steps

  # Fine-tuning: GLUE tasks from glue_dir (CoLA/, SST-2/, ... folders);
  # chunk and pos from conll_dir, CoNLL-2000's train.txt and test.txt
  # (test.txt scored as dev, as the ELECTRA release reports chunking).
  glue_dir: str = ""
  conll_dir: str = ""
  tasks: str = DEFAULT_TASKS
  seeds: int = 3  # fine-tuning seeds per task (the median is reported)
  finetune_checkpoints: str = "all"  # all, final, or k's of k/N: "2,4"
  finetune_hparams: dict = dataclasses.field(default_factory=dict)

  # BLiMP accuracy of each final model (run_scoring.py --mode blimp).
  blimp_dir: str = ""  # "" = no BLiMP column
  blimp_limit: int = 100  # pairs per paradigm; 0 = all
  # Beside each objective's own estimator, every model is also scored with
  # this one (run_scoring.py --method; "" = none): mlm, the masked-LM PLL,
  # the one estimator every objective has (BERT's own MLM; the ELECTRA
  # family's generator).
  blimp_same_method: str = "mlm"
  scoring_hparams: dict = dataclasses.field(default_factory=dict)

  # Jobs run at once, each with cores / N threads. On a 2-core CPU two
  # one-thread jobs do 1.13x the work of one two-thread job
  # (docs/run_comparison.md); a
  # checkpoint's jobs wait only for that checkpoint.
  parallel_jobs: int = 1
  # Comma-separated glob patterns of job keys (pretrain-electra,
  # eval-electra-2500, finetune-electra-5000-rte-1, blimp-electra): runs
  # just those, e.g. a saved checkpoint's fine-tunes while the full command
  # pretrains in another process, which then skips what this one finished.
  only: str = ""

  dry_run: bool = False  # print the plan (steps, FLOPs per run) and stop

  # Every number's range (util/config.check_numbers).
  RANGES = {"num_processes": ">= 1", "max_seq_length": ">= 8",
            "budget_flops": ">= 0", "num_checkpoints": ">= 1",
            "warmup_fraction": "(0, 1)", "seeds": ">= 1",
            "blimp_limit": ">= 0", "parallel_jobs": ">= 1",
            "pretrain_seeds": ">= 1", "heldout_fraction": "[0, 0.5]"}

  @property
  def objective_seeds(self):
    """{objective: number of pretraining seeds}, in the order given."""
    out = {}
    for spec in (o.strip() for o in self.objectives.split(",")):
      if not spec:
        continue
      name, _, count = spec.partition(":")
      name = name.strip()
      if name in out:
        raise UserError(f"objective '{name}' is named twice in "
                        f"--objectives '{self.objectives}'")
      try:
        out[name] = int(count) if count else self.pretrain_seeds
      except ValueError:
        out[name] = 0
      if out[name] < 1:
        raise UserError(f"'{spec}': the pretraining seeds after ':' must be "
                        "a whole number >= 1")
    return out

  @property
  def objective_names(self):
    return list(self.objective_seeds)

  @property
  def task_names(self):
    names = [t.strip().lower() for t in self.tasks.split(",") if t.strip()]
    return [TASK_ALIASES.get(t, t) for t in names]

  @property
  def finetune_indices(self):
    """Which of the N checkpoints (1-based) are fine-tuned."""
    n, spec = self.num_checkpoints, self.finetune_checkpoints.strip()
    if spec == "all":
      return list(range(1, n + 1))
    if spec == "final":
      return [n]
    try:
      picks = sorted({int(k) for k in spec.split(",")})
    except ValueError:
      picks = []
    if not picks or not all(1 <= k <= n for k in picks):
      raise UserError(f"finetune_checkpoints must be all, final or numbers "
                      f"in 1..{n} (of --num-checkpoints), got '{spec}'")
    return picks

  @property
  def data_dir(self):
    return self.pretrain_data_dir or os.path.join(self.output_dir, "data")

  def validate(self):
    if not self.output_dir:
      raise UserError("--output-dir is required")
    check_output_dir(self.output_dir)  # a file there fails --dry-run too
    if not self.objective_names:
      raise UserError("no objectives: --objectives mlm,electra,...")
    # Before any heavy import: a typo is refused in a second.
    objective_names.check(self.objective_names)
    unknown = [t for t in self.task_names if t not in KNOWN_TASKS]
    if unknown:
      raise UserError(f"unknown task '{unknown[0]}' in --tasks (choose from "
                      f"{', '.join(KNOWN_TASKS)})")
    check_numbers(self)
    self.finetune_indices  # noqa: B018 (checks the value)
    # Unknown, ill-typed or out-of-range values fail here, not hours later
    # in a job.
    for flag, cls, values in (
        ("--pretrain-hparams", PretrainingConfig, self.pretrain_hparams),
        ("--finetune-hparams", FinetuningConfig, self.finetune_hparams),
        ("--scoring-hparams", ScoringConfig, self.scoring_hparams)):
      check_numbers(apply_overrides(cls(), values, flag), flag)
    # The model's positions bound the data's length: said before planning
    # (no preset in configs/ changes them; --pretrain-hparams may).
    overrides = apply_overrides(PretrainingConfig(), self.pretrain_hparams,
                                "--pretrain-hparams").model_hparam_overrides
    positions = overrides.get("max_position_embeddings", MAX_POSITIONS)
    if isinstance(positions, int) and self.max_seq_length > positions:
      raise UserError(f"max_seq_length {self.max_seq_length} exceeds the "
                      f"model's {positions} positions (max_position_"
                      "embeddings; --pretrain-hparams model_hparam_overrides"
                      " sets them)")
    self.corpus_dir = self.corpus_dir or os.path.join(ROOT, "sample_data",
                                                      "corpus")
    self.vocab_file = self.vocab_file or os.path.join(ROOT, "sample_data",
                                                      "vocab_8k.txt")
    have_data = storage.exists(os.path.join(self.data_dir,
                                            "pretrain_tfrecords",
                                            "metadata.json"))
    if not have_data:
      for name in ("corpus_dir", "vocab_file"):
        if not storage.exists(getattr(self, name)):
          raise UserError(f"{name} not found: {getattr(self, name)}")
    glue = [t for t in self.task_names if t not in TAGGING_TASKS]
    tagging = [t for t in self.task_names if t in TAGGING_TASKS]
    if glue:
      if not self.glue_dir:
        raise UserError("fine-tuning needs --glue-dir (a folder with the "
                        "tasks' CoLA/, SST-2/, ... folders), or --tasks ''")
      check_folder(self.glue_dir, "glue_dir")
    if tagging:
      if not self.conll_dir:
        raise UserError(f"{', '.join(tagging)} need --conll-dir (a folder "
                        "with CoNLL-2000's train.txt and test.txt)")
      check_folder(self.conll_dir, "conll_dir")
      for name in ("train.txt", "test.txt"):
        if not storage.exists(os.path.join(self.conll_dir, name)):
          raise UserError(f"conll_dir {self.conll_dir} has no {name}")
    if self.blimp_dir:
      check_folder(self.blimp_dir, "blimp_dir")


def load_config(argv=None):
  config, _ = parse_config(
      ComparisonConfig, argv,
      description="Pretrain objectives for equal FLOPs, fine-tune and "
      "score each, and report a table and plots.")
  return config
