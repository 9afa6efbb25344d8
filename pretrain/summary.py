"""A pretraining run summed up, as the quickstart ends (TF-free, instant):

  python -m pretrain.summary --data-dir DATA_DIR --model-name NAME \
      --before eval_before.json [--started EPOCH_SECONDS] \
      [--pretrain-hparams configs/electra_tiny.json] [--glue-dir GLUE_DIR]

Prints the eval before -> after table (eval_results.json of the untrained
model, kept as --before, and the run's own), how long it all took, and
the commands to try next with this run's folder and name filled in (each
runs as printed, from the folder the summary ran in: the fine-tuning one
reads GLUE's RTE from --glue-dir or DATA_DIR/finetuning_data, else says
what it needs first; the export one names a folder not yet there); and
draws the train log's curves (TensorBoard's scalars, read without
TensorFlow) into MODEL_DIR/train_curves.png.
"""

import dataclasses
import glob
import os
import shlex
import struct
import sys
import time

from finetune import data_layout
from util import storage
from util.config import check_data_dir
from util.config import parse_config
from util.errors import main_guard
from util.errors import UserError
from util.text_files import read_json

RESULTS = "eval_results.json"  # pretrain/trainer.py writes it
PLOT = "train_curves.png"
# Train-log scalars that are not the objective's (training/step_log.py).
NOT_CURVES = ("learning_rate", "sequences_per_second", "grad_norm")


@dataclasses.dataclass
class SummaryConfig:
  data_dir: str = ""
  model_name: str = ""
  # Eval results of the untrained model; "" or a missing file = none (a
  # re-run of a trained model has no before).
  before: str = ""
  started: float = 0.0  # when the run began, in epoch seconds; 0 = unsaid
  # The hparams the run was trained with, repeated in the next commands.
  pretrain_hparams: str = ""
  # A folder holding GLUE's RTE/ (or rte/), for the fine-tuning command;
  # "" = DATA_DIR/finetuning_data.
  glue_dir: str = ""

  RANGES = {"started": ">= 0"}

  @property
  def model_dir(self):
    return os.path.join(self.data_dir, "models", self.model_name)

  def validate(self):
    if not (self.data_dir and self.model_name):
      raise UserError("pass --data-dir and --model-name")
    check_data_dir(self)


def read_results(path):
  """A run's eval results (a JSON object), or one clear error."""
  if not storage.exists(path):
    raise UserError(f"no eval results at {path}: run run_pretraining.py "
                    "with --do-eval first")
  results = read_json(path)
  if not isinstance(results, dict):
    raise UserError(f"{path} is not a JSON object")
  return results


def table(before, after):
  """Each metric both evals share (all of after's when there is no
  before), one row each: `metric  before  after`."""
  def step(results):
    return f"step {results.get('global_step', '?')}"

  names = sorted(k for k in after if k != "global_step" and
                 isinstance(after[k], (int, float)) and
                 (before is None or k in before))
  width = max([len("eval metric")] + [len(k) for k in names])
  head = [f"before ({step(before)})"] if before else []
  head.append(f"after ({step(after)})")
  cols = [max(len(h), 8) for h in head]
  lines = [f"  {'eval metric':<{width}}  " + "  ".join(
      f"{h:>{c}}" for h, c in zip(head, cols))]
  for k in names:
    values = ([before[k]] if before else []) + [after[k]]
    lines.append(f"  {k:<{width}}  " + "  ".join(
        f"{v:>{c}.4f}" for v, c in zip(values, cols)))
  return lines


def python():
  """How to call this interpreter: ./.venv/bin/python and the like when
  it lives under the current folder, else plain python."""
  exe = os.path.abspath(sys.executable)
  rel = os.path.relpath(exe)
  return rel if not rel.startswith("..") else "python"


GLUE_PLACEHOLDER = "GLUE_DIR"


def has_rte(folder):
  """Whether `folder` holds RTE's train.tsv and dev.tsv (finetune/
  data_layout.py's names: rte/ or RTE/)."""
  return bool(folder) and all(data_layout.find(folder, "rte", split)
                              for split in ("train", "dev"))


def finetune_command(config, run):
  """(what, the flags after --task-names rte): GLUE's RTE from glue_dir,
  else DATA_DIR/finetuning_data, else the command says what it needs."""
  docs = "docs/run_finetuning.md#where-the-data-goes"
  if has_rte(config.glue_dir):
    return (f"fine-tune (GLUE's RTE from {config.glue_dir}; {docs})",
            ["--raw-data-dir", config.glue_dir])
  own = os.path.join(config.data_dir, "finetuning_data")
  if has_rte(own):
    return f"fine-tune (GLUE's RTE from {own}; {docs})", []
  return (f"fine-tune: first download GLUE (RTE/ with train.tsv and "
          f"dev.tsv), then put its folder for {GLUE_PLACEHOLDER} (or rerun "
          f"make quickstart GLUE_DIR=its folder); {docs}",
          ["--raw-data-dir", GLUE_PLACEHOLDER])


def export_dir(config):
  """DATA_DIR/export/NAME, or NAME-2, NAME-3, ...: the first folder not
  there yet (or empty), so the printed export runs again on a rerun
  without touching an earlier export."""
  base = os.path.join(config.data_dir, "export", config.model_name)
  path, n = base, 1
  while storage.exists(path) and (not storage.isdir(path) or
                                  storage.listdir(path)):
    n += 1
    path = f"{base}-{n}"
  return path


def next_commands(config, py="python"):
  """(what, command) for fine-tuning, scoring, export and a hotter run."""
  run = ["--data-dir", config.data_dir, "--model-name", config.model_name]
  hparams = (["--hparams", config.pretrain_hparams]
             if config.pretrain_hparams else [])

  def cmd(*words):
    return " ".join(shlex.quote(w) for w in (py,) + words)

  sample = "the cat sat on the mat ."
  what, glue = finetune_command(config, run)
  return [
      (what, cmd("run_finetuning.py", *run, "--task-names", "rte", *glue)),
      ("score sentences (PLL in nats; docs/run_scoring.md)",
       f"printf {shlex.quote(sample + chr(92) + 'n')} | " +
       cmd("run_scoring.py", *run)),
      ("export for transformers (docs/export_model.md)",
       cmd("export_model.py", *run, "--format", "hf", "--output-dir",
           export_dir(config))),
      ("pretrain a new model with hotter samples (its discriminator learns "
       "in these minutes)",
       cmd("run_pretraining.py", "--data-dir", config.data_dir,
           "--model-name", config.model_name + "_t2", *hparams,
           "--temperature", "2.0", "--do-eval")),
  ]


def summary_lines(config, before, after, seconds=None, py="python"):
  took = f", done in {seconds / 60:.1f} min" if seconds is not None else ""
  lines = [f"== {config.model_dir}{took}"]
  lines += table(before, after)
  lines.append("next:")
  for what, command in next_commands(config, py):
    lines += [f"  # {what}", f"  {command}"]
  return lines


def _records(path):
  """The records of a TFRecord file (TensorBoard's event files), CRCs
  unchecked; a record cut short (a run still writing) ends it."""
  with open(path, "rb") as f:
    while True:
      header = f.read(12)
      if len(header) < 12:
        return
      length, = struct.unpack("<Q", header[:8])
      data = f.read(length)
      if len(data) < length or len(f.read(4)) < 4:
        return
      yield data


def read_scalars(folder):
  """{tag: {step: value}} of the TensorBoard event files in `folder`."""
  # tensorboard's protos and tensor_util import without TensorFlow.
  from tensorboard.compat.proto import event_pb2  # pylint: disable=g-import-not-at-top
  from tensorboard.util import tensor_util  # pylint: disable=g-import-not-at-top
  scalars = {}
  for path in sorted(glob.glob(os.path.join(folder, "events.out.tfevents.*"))):
    for data in _records(path):
      event = event_pb2.Event.FromString(data)
      for value in event.summary.value:
        number = (float(tensor_util.make_ndarray(value.tensor))
                  if value.HasField("tensor") else value.simple_value)
        scalars.setdefault(value.tag, {})[event.step] = number
  return scalars


def write_plot(config):
  """The train log's curves, losses left and the rest right, into
  MODEL_DIR/train_curves.png; returns its path (None without a log)."""
  scalars = read_scalars(os.path.join(config.model_dir, "train"))
  tags = sorted(t for t in scalars if t not in NOT_CURVES)
  if not tags:
    return None
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  saved = os.path.join(config.model_dir, "pretrain_config.json")
  run = read_json(saved) if storage.exists(saved) else {}
  fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
  for tag in tags:
    steps = sorted(scalars[tag])
    ax = axes[0] if tag.endswith("loss") else axes[1]
    ax.plot(steps, [scalars[tag][s] for s in steps], label=tag)
  losses = [v for t in tags if t.endswith("loss") for v in scalars[t].values()]
  if losses and min(losses) > 0:  # the total is 50x the discriminator's
    axes[0].set_yscale("log")
  axes[0].set_ylabel("loss (train batches, mean per log line)")
  axes[1].set_ylabel("share / score")
  for ax in axes:
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
      ax.legend(fontsize=8)
  fig.suptitle(f"{config.model_name}: {run.get('objective', '?')} "
               f"{run.get('model_size', '')} pretraining, 1 run (seed "
               f"{run.get('seed', '?')}), train log")
  fig.tight_layout()
  path = os.path.join(config.model_dir, PLOT)
  fig.savefig(path, dpi=80)
  plt.close(fig)
  return path


@main_guard
def main(argv=None):
  config, _ = parse_config(SummaryConfig, argv,
                           description="A pretraining run summed up.")
  after = read_results(os.path.join(config.model_dir, RESULTS))
  before = (read_results(config.before)
            if config.before and storage.exists(config.before) else None)
  seconds = time.time() - config.started if config.started else None
  lines = summary_lines(config, before, after, seconds, python())
  plot = write_plot(config)
  if plot:
    lines.insert(len(table(before, after)) + 1, f"  train curves: {plot}")
  print("\n".join(lines), flush=True)


if __name__ == "__main__":
  main()
