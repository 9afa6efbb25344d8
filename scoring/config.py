"""Config for run_scoring.py: one dataclass, overridable by JSON hparams
and `--field-name` flags (util/config.py). TF-free, so bad flags fail fast.
"""

import dataclasses
import os

from inference.choices import ENGINES
from inference.choices import PRECISIONS
from pretrain import load_objectives
from util import storage
from util.config import check_choice
from util.config import check_numbers
from util.config import check_data_dir
from util.config import check_folder
from util.config import model_path
from util.config import parse_config
from util.config import require_model_path
from util.errors import UserError
from util.outputs import check_new_file
from util.outputs import same_file

MODES = ("sentences", "blimp", "nbest")
FORMATS = ("tsv", "jsonl")  # mode=sentences' output
# Flags that only some modes read -> those modes.
FLAG_MODES = {"input_file": ("sentences",), "output_file": ("sentences",),
              "per_token": ("sentences",), "format": ("sentences",),
              "blimp_dir": ("blimp",),
              "blimp_limit": ("blimp",), "nbest_dev": ("nbest",),
              "nbest_test": ("nbest",), "nbest_limit": ("nbest",),
              "results_file": ("blimp", "nbest")}
# Token-by-token estimators of scoring/pll.py; every objective's own
# one-pass estimator (its PLL_METHOD, e.g. electric, script) joins them.
TOKEN_BY_TOKEN_METHODS = ("mlm", "electra")


def methods():
  registry = load_objectives().REGISTRY
  own = [c.PLL_METHOD for c in registry.values() if c.PLL_METHOD]
  return tuple(dict.fromkeys(own + list(TOKEN_BY_TOKEN_METHODS)))


@dataclasses.dataclass
class ScoringConfig:
  """What to score, with which pretraining run, and how. The run lives in
  DATA_DIR/models/NAME/ (or --init-checkpoint: a model_dir or a checkpoint
  prefix in one)."""
  data_dir: str = ""
  model_name: str = ""
  init_checkpoint: str = ""  # default DATA_DIR/models/NAME
  vocab_file: str = ""  # default: the run's, else DATA_DIR/vocab.txt

  mode: str = "sentences"  # sentences, blimp or nbest
  # PLL estimator; "" = the objective's own: electric, script, mlm
  # (Salazar et al., n passes) or electra (appendix G, top_k candidates).
  method: str = ""
  batch_size: int = 128  # rows per model call (sentences or masked copies)
  max_seq_length: int = 0  # 0 = the run's; longer text is truncated
  top_k: int = 100  # electra: generator candidates per token (appendix G)
  # What runs the model (inference/engine.py): auto (OpenVINO for 1024+
  # model rows, else TensorFlow), openvino or tensorflow (the reference);
  # precision auto = bfloat16 where the CPU has AVX512-BF16/AMX.
  inference_engine: str = "auto"
  inference_precision: str = "auto"

  # mode=sentences: one sentence a line; "" or "-" = stdin.
  input_file: str = ""
  output_file: str = ""  # "" = stdout
  # tsv: a header line, then pll<TAB>tokens<TAB>sentence per input line;
  # jsonl: {"sentence", "pll", "tokens", "truncated"} per input line.
  format: str = "tsv"
  per_token: bool = False  # jsonl, with each token's string and PLL

  # mode=blimp: a folder of BLiMP-style *.jsonl files.
  blimp_dir: str = ""
  blimp_limit: int = 0  # pairs per paradigm; 0 = all

  # mode=nbest: mlm-scoring JSON n-best lists; lambda tuned on dev.
  nbest_dev: str = ""
  nbest_test: str = ""  # optional: the best dev lambda applied here
  nbest_limit: int = 0  # utterances per file; 0 = all
  lambdas: str = "0:2:0.05"  # start:stop:step (inclusive), or "0,0.5,1"

  results_file: str = ""  # blimp/nbest: also write the results as JSON
  overwrite: bool = False  # replace an existing output_file / results_file

  # Every number's range (util/config.check_numbers); max_seq_length 0 is
  # the run's, else room for [CLS], [SEP] and a token.
  RANGES = {"batch_size": "> 0", "max_seq_length": ">= 0", "top_k": "> 0",
            "blimp_limit": ">= 0", "nbest_limit": ">= 0"}

  @property
  def model_path(self):
    return model_path(self)

  @property
  def lambda_grid(self):
    return parse_lambdas(self.lambdas)

  def validate(self):
    check_numbers(self)
    check_data_dir(self)
    require_model_path(self)
    check_choice("mode", self.mode, MODES)
    check_choice("format", self.format, FORMATS)
    check_choice("inference_engine", self.inference_engine, ENGINES)
    check_choice("inference_precision", self.inference_precision,
                 PRECISIONS)
    if self.method:
      check_choice("method", self.method, methods(),
                   note=" (or empty for the objective's own)")
    if 0 < self.max_seq_length < 3:
      raise UserError("max_seq_length must leave room for [CLS], [SEP] and "
                      "a token (>= 3)")
    self._check_mode_flags()
    for name in ("output_file", "results_file"):
      check_new_file(getattr(self, name), name, self.overwrite)
    getattr(self, f"_validate_{self.mode}")()

  def _check_mode_flags(self):
    """Flags of another mode are a mistake, not something to ignore."""
    defaults = {f.name: f.default for f in dataclasses.fields(self)}
    for name, modes in FLAG_MODES.items():
      if getattr(self, name) != defaults[name] and self.mode not in modes:
        raise UserError(f"--{name.replace('_', '-')} applies to --mode "
                        f"{' or '.join(modes)}, not {self.mode}")

  def _validate_sentences(self):
    if self.input_file not in ("", "-"):
      _need_file(self.input_file, "input_file")
      if same_file(self.input_file, self.output_file):
        raise UserError(f"output_file {self.output_file} is the input_file: "
                        "scores would replace the sentences")

  def _validate_blimp(self):
    if not self.blimp_dir:
      raise UserError("mode blimp needs --blimp-dir (a folder of *.jsonl)")
    check_folder(self.blimp_dir, "blimp_dir")

  def _validate_nbest(self):
    if not self.nbest_dev:
      raise UserError("mode nbest needs --nbest-dev (an n-best JSON file to "
                      "tune lambda on)")
    _need_file(self.nbest_dev, "nbest_dev")
    if self.nbest_test:
      _need_file(self.nbest_test, "nbest_test")
    parse_lambdas(self.lambdas)  # a bad grid fails before any scoring


def _need_file(path, name):
  if storage.isdir(path):
    raise UserError(f"{name} {path} is a folder, not a file")
  if not storage.exists(path):
    raise UserError(f"{name} not found: {path}")
  if "://" not in path and not os.path.isfile(path):
    raise UserError(f"{name} {path} is not a regular file (a device or a "
                    "pipe)")


def parse_lambdas(spec):
  """"start:stop:step" (stop included) or "a,b,c" -> sorted floats."""
  spec = spec.strip()
  try:
    if ":" in spec:
      start, stop, step = (float(x) for x in spec.split(":"))
      if step <= 0 or stop < start:
        raise ValueError
      count = int(round((stop - start) / step)) + 1
      if count > 100000:
        raise ValueError
      values = [round(start + i * step, 10) for i in range(count)]
    else:
      values = [float(x) for x in spec.split(",") if x.strip()]
  except ValueError:
    values = []
  if not values:
    raise UserError(f"lambdas must be 'start:stop:step' (step > 0) or a "
                    f"comma-separated list of numbers, got '{spec}'")
  return sorted(set(values))


def load_config(argv=None):
  config, _ = parse_config(
      ScoringConfig, argv,
      description="Score text with a pretrained model's pseudo-log-"
                  "likelihood: sentences, BLiMP or n-best rescoring.")
  return config


def sentences_said(n):
  """`1 sentence`, `2 sentences`, `1,000 sentences` (scoring's lines)."""
  return f"{n:,} sentence" + ("" if n == 1 else "s")
