"""Config for export_model.py: one dataclass, overridable by JSON hparams
and `--field-name` flags (util/config.py). TF-free, so bad flags fail fast.
"""

import dataclasses

from util import storage
from util.config import check_choice
from util.config import check_data_dir
from util.config import check_numbers
from util.config import model_path
from util.config import parse_config
from util.config import require_model_path
from util.errors import UserError
from util.outputs import check_output_dir

FORMATS = ("savedmodel", "keras", "hf", "keras_hub", "tf1")


@dataclasses.dataclass
class ExportConfig:
  """Which model to export, to what. The model is DATA_DIR/models/NAME/ (or
  --init-checkpoint: any format fine-tuning accepts)."""
  data_dir: str = ""
  model_name: str = ""
  init_checkpoint: str = ""  # default DATA_DIR/models/NAME
  vocab_file: str = ""  # default: the run's, else DATA_DIR/vocab.txt
  format: str = "hf"  # hf (transformers), savedmodel, keras (.keras), keras_hub (a KerasHub preset) or tf1 (the original release's checkpoint)
  output_dir: str = ""  # must not exist yet (or be empty)
  max_seq_length: int = 0  # savedmodel text signature; 0 = the run's
  # A fine-tuned model (run_finetuning.py's OUTPUT_DIR/<tasks>_model/):
  # the heads to export, comma-separated (default: every one).
  task_names: str = ""

  # Every number's range (util/config.check_numbers).
  RANGES = {"max_seq_length": ">= 0"}

  @property
  def model_path(self):
    return model_path(self)

  def validate(self):
    check_numbers(self)
    check_data_dir(self)
    require_model_path(self)
    check_choice("format", self.format, FORMATS)
    if not self.output_dir:
      raise UserError("pass --output-dir (a new folder)")
    if storage.exists(self.output_dir) and not storage.isdir(
        self.output_dir):
      raise UserError(f"output_dir {self.output_dir} is a file: choose a new "
                      "folder (nothing was written)")
    if storage.exists(self.output_dir) and storage.listdir(self.output_dir):
      raise UserError(f"output_dir {self.output_dir} already exists and is "
                      "not empty: choose a new folder (nothing was written)")
    # Missing parents are made (as the quickstart's next command needs);
    # the nearest existing one must be a folder we can write in.
    check_output_dir(self.output_dir, "output_dir")
    if 0 < self.max_seq_length < 3:
      raise UserError("max_seq_length must be 0 (the run's) or >= 3")
    if self.max_seq_length and self.format != "savedmodel":
      raise UserError(f"--max-seq-length applies to --format savedmodel "
                      f"only, not {self.format}")


def load_config(argv=None):
  config, _ = parse_config(
      ExportConfig, argv,
      description="Export a pretrained model: a Hugging Face transformers "
                  "directory (hf), a TF SavedModel (savedmodel), a .keras "
                  "archive (keras) or a KerasHub preset (keras_hub).")
  return config
