"""BAM in a fine-tuning run (dissertation chapter 3, finetune/bam.py): a
teacher run writes its kept model's outputs on its train rows; a student
run reads them (or predicts them with a teacher's fine-tuned model) and
trains on the annealed mix of gold and teacher."""

import os

from finetune import bam
from finetune.model import finetuned_model
from finetune.model import load_finetuned
from loading import finetuned as finetuned_files
from util import storage
from util.errors import UserError


def check_tasks(tasks):
  """BAM distills classification and regression tasks only (3.2.2)."""
  for task in tasks:
    if task.head_kind not in ("classification", "regression"):
      raise UserError(f"{task.name} is a {task.head_kind} task: BAM's "
                      "distill and write_distill_outputs take "
                      "classification and regression (GLUE) tasks only")


def with_teacher_weight(batch, weight):
  """A distill step's batch with the teacher's share of the target,
  1 - lambda, as a [B] feature: a tensor, so that the step's
  tf.function is traced once, not once per value."""
  # TensorFlow only here: the JAX path imports this module without it.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  batch = dict(batch)
  batch["teacher_weight"] = tf.fill(tf.shape(batch["input_ids"])[:1],
                                    tf.cast(weight, tf.float32))
  return batch


class Teachers:
  """The teachers' outputs on a run's train rows, and a teacher run's
  own for its students (OUTPUT_DIR/distill/<task>.npz)."""

  def __init__(self, config, tasks, data, paths, predictor, writes=True):
    """data, paths, predictor: the run's TaskData, RunOutputs and
    Predictor; writes: this process writes (several: process 0)."""
    self.config = config
    self.tasks = tasks
    self.data = data
    self.paths = paths
    self.predictor = predictor
    self.writes = writes
    self._outputs = None  # {task: teacher outputs per train row}

  def outputs(self):
    """{task: its teacher's outputs on this run's train rows, in order}:
    read from a teacher run's .npz, or predicted with a teacher's
    fine-tuned model (read and featurized as it was trained). Once per
    run; a bad teacher is one UserError."""
    if self._outputs is None:
      teachers = {}
      for task in self.tasks:
        path = self.config.teacher_paths[task.name]
        examples, features = self.data.examples_and_features(task, "train")
        keys = bam.row_keys(examples, features)
        shape = (() if task.head_kind == "regression" else
                 (len(task.head_labels()),))
        if finetuned_files.is_finetuned(path):
          stored, values = self._model_outputs(path, task, examples)
          values = bam.match_teacher_outputs(path, task.name, stored, values,
                                             keys, shape)
        elif storage.isdir(path):
          raise UserError(f"{task.name}: teacher {path} is a folder but not "
                          f"a fine-tuned model (no {finetuned_files.MODEL_FILE}"
                          "): give a teacher's distill/<task>.npz or its "
                          "kept model's folder")
        else:
          values = bam.read_teacher_outputs(path, task.name, keys, shape)
        teachers[task.name] = values
        print(f"{task.name}: teacher {path} ({len(keys)} train rows)",
              flush=True)
      self._outputs = teachers
    return self._outputs

  def _model_outputs(self, path, task, examples):
    """(row keys, outputs) of the fine-tuned model at `path` on `examples`
    as its own run would featurize them for training."""
    _, _, _, tasks, model = load_finetuned(path, task.name)
    features = tasks[0].featurize(examples, is_training=True)
    self.data.add(task.name, "teacher", examples, features)
    try:
      values = self.predictor.head_outputs(model, tasks[0], "teacher")
      return bam.row_keys(examples, features), values
    finally:
      self.data.discard(task.name, "teacher")

  def write_outputs(self):
    """write_distill_outputs: the kept model's outputs on each task's
    train rows, OUTPUT_DIR/distill/<task>.npz (a BAM teacher's)."""
    kept = finetuned_files.load(self.paths.kept_model_path())
    model = finetuned_model(kept, self.tasks)
    for task in self.tasks:
      values = self.predictor.head_outputs(model, task, "train")
      keys = bam.row_keys(*self.data.examples_and_features(task, "train"))
      if not self.writes:  # it predicted alongside: its share of the work
        continue
      path = self.paths.distill_output_path(task)
      storage.makedirs(os.path.dirname(path))
      bam.write_teacher_outputs(path, task.name, keys, values)
      print(f"wrote {task.name}'s teacher outputs on {len(keys)} train rows "
            f"(trial {kept.info.get('trial', '?')}'s model): {path}",
            flush=True)
