"""Where a fine-tuning run writes, and the check, before any work, that it
replaces nothing an earlier run (or the user) left there."""

import os
import time

from finetune import preflight
from util import outputs
from util import storage
from util.errors import UserError


class RunOutputs:
  """The paths of everything a run (or --do-predict) writes, under
  OUTPUT_DIR unless predict_output says otherwise."""

  def __init__(self, config, tasks):
    self.config = config
    self.tasks = tasks
    self.stamp = time.strftime("%Y%m%d-%H%M%S")  # this run's files

  def kept_model_path(self):
    """OUTPUT_DIR/<tasks>_model: where this run keeps its model."""
    return preflight.kept_model_path(self.config)

  def record_path(self):
    """OUTPUT_DIR/<tasks>_trials.json: the record of finished trials."""
    return os.path.join(self.config.output_dir,
                        f"{'_'.join(self.config.tasks)}_trials.json")

  def prediction_path(self, task, split, trial):
    """Trial `trial`'s predictions (1-based, as the logs count)."""
    return os.path.join(self.config.output_dir,
                        f"{task.name}_{split}_predictions_trial{trial}"
                        f"{task.predictions_ext}")

  def evaluation_path(self, task, split):
    """An evaluation's predictions (--no-do-train), named by its time like
    its results file: a second evaluation replaces nothing."""
    stem = os.path.join(self.config.output_dir,
                        f"{task.name}_{split}_predictions_eval-{self.stamp}")
    path, n = stem + task.predictions_ext, 1
    while storage.exists(path):  # two evaluations in one second
      n += 1
      path = f"{stem}_{n}{task.predictions_ext}"
    return path

  def dev_outputs_path(self, task, trial):
    """Trial `trial`'s dev outputs (write_dev_outputs)."""
    return os.path.join(self.config.output_dir,
                        f"{task.name}_dev_outputs_trial{trial}.npz")

  def planned(self):
    """Every prediction file this run will write."""
    config = self.config
    splits = (["dev"] if config.do_eval else []) + (
        ["test"] if config.write_test_outputs else [])
    trials = range(1, config.num_trials + 1)
    return [f for trial in trials
            for task in self.tasks
            for split in splits
            for f in task.output_files(self.prediction_path(task, split,
                                                            trial))] + [
                self.dev_outputs_path(task, trial) for trial in trials
                for task in self.tasks
                if config.write_dev_outputs and config.do_eval]

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

  def check_predict_output(self):
    """Before any work: predict_output's folder can be written, and its
    files replace nothing (unless --overwrite)."""
    config = self.config
    path = self.predict_output()
    outputs.check_output_dir(os.path.dirname(path) or ".", "predict_output")
    for f in self.tasks[0].output_files(path):
      # (A folder still to be made holds nothing yet.)
      if os.path.lexists(os.path.dirname(os.path.abspath(f))):
        outputs.check_new_file(f, "predict_output", config.overwrite)

  def check_new(self):
    """Refuses, before any work, to replace an earlier run's files (called
    only when no interrupted run of the same command is resumed)."""
    config = self.config
    if config.overwrite:
      return
    kept = ([self.kept_model_path()] if config.do_train and
            config.keep_model != "none" else [])
    if config.write_distill_outputs:
      kept += [self.distill_output_path(t) for t in self.tasks]
    existing = [f for f in kept + self.planned() if storage.exists(f)]
    if existing:
      more = f" (and {len(existing) - 1} more)" if len(existing) > 1 else ""
      # --overwrite would replace a kept model: not the advice then.
      how = ("use another --output-dir for a new run, or --no-do-train to "
             "evaluate that model" if existing[0] in kept else
             "pass --overwrite to replace, or another --output-dir")
      raise UserError(f"{existing[0]}{more} already exists: {how} "
                      "(nothing was written)")

  def results_path(self):
    """A new results file: the time stamp, numbered if it is taken."""
    config = self.config
    stem = os.path.join(config.output_dir, f"results_{'_'.join(config.tasks)}_"
                        f"{self.stamp}")
    path, n = stem + ".json", 1
    while storage.exists(self._output(path)):
      n += 1
      path = f"{stem}_{n}.json"
    return path

  def _output(self, path):
    storage.makedirs(self.config.output_dir)
    return path
