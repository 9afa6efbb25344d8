"""A model's outputs on a task's rows (dev, test, a predict file, a BAM
teacher's), fed to the task's scorer."""

import sys

import numpy as np

from finetune import padding
from finetune.featurization import model_inputs
from inference.engine import Engine
from training.progress import Progress

class Predictor:
  """Runs a model over a split of the run's TaskData in eval batches, one
  traced step per task and model shape for the whole run: the step takes
  the weights as arguments (Keras' stateless_call), so every trial's
  model, of the same shape, reuses the first one's trace."""

  def __init__(self, config, data):
    self.config = config
    self.data = data
    self._eval_steps = {}  # (task, variables' shapes) -> traced eval step
    # Or the engine (inference/engine.py): one conversion per task and
    # model shape for the run, compiled with each trial's weights in.
    self.engine = Engine(config.inference_engine, config.inference_precision)
    # (task, variables' shapes) -> (the model compiled in, EngineFunction)
    self._engine_steps = {}

  def call_once(self, model, task, split):
    """Calls the model on one row of a split, so that every variable
    (head, dropout seeds) exists before a tf.function traces it."""
    _, features = self.data.examples_and_features(task, split)
    model({k: v[:1] for k, v in model_inputs(features).items()},
          task_name=task.name, training=False)

  def predict(self, model, task, split):
    """The task's scorer, fed with the model's outputs on `split`."""
    examples, features = self.data.examples_and_features(task, split)
    scorer = task.get_scorer(examples, features)
    inputs = {k: np.asarray(v) for k, v in model_inputs(features).items()}
    n, size = len(inputs["input_ids"]), self.config.eval_batch_size
    steps, per_row = self._steps(model, task, n, inputs)
    progress = Progress(f"{split} {task.name}", n, "examples", sys.stdout)
    if per_row:  # the engine trims padding: run by length, score in order
      batches = self._in_row_order(steps, inputs, size, progress)
    else:  # scored batch by batch: no outputs held
      batches = steps({k: v[b:b + size] for k, v in inputs.items()}
                      for b in range(0, n, size))
    losses = []
    for begin, out in zip(range(0, n, size), batches):
      losses.append(out.pop("loss"))
      scorer.update(out)
      if not per_row:
        progress.update(min(begin + size, n))
    progress.finish(done=n, always=False)
    return scorer, (float(np.mean(np.concatenate(losses))) if losses
                    else float("nan"))

  @staticmethod
  def _in_row_order(steps, inputs, size, progress):
    """The steps' outputs over rows sorted by length (like lengths batch
    together), put back in row order as batches of `size`."""
    n = len(inputs["input_ids"])
    order = np.argsort(inputs["input_mask"].sum(axis=1), kind="stable")
    starts, outs = range(0, n, size), []
    for begin, out in zip(starts, steps(
        {k: v[order[b:b + size]] for k, v in inputs.items()} for b in starts)):
      outs.append(out)
      progress.update(min(begin + size, n))
    if not outs:  # an empty split
      return []
    inverse = np.argsort(order)
    merged = {k: np.concatenate([o[k] for o in outs])[inverse]
              for k in outs[0]}
    return [{k: v[b:b + size] for k, v in merged.items()}
            for b in range(0, n, size)]

  def _steps(self, model, task, rows, example):
    """(fn(batches) -> an iterator of {output: NumPy array, "loss": [B]},
    per_row): the engine's compiled forward for `rows` rows where the
    engine takes them (batches in flight side by side), else TensorFlow's
    traced eval step; per_row: the engine trims the batches' padding (a
    task whose outputs are per row, not per token). example: the split's
    model inputs (their keys, dtypes and shapes)."""
    # TensorFlow only here: the JAX path imports this module without it.
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    task_name, seq_len = task.name, example["input_ids"].shape[-1]
    if self.engine.runs(rows):
      per_row = task.per_row_outputs
      key = (task_name, model_shapes(model))
      if key not in self._engine_steps:
        def forward(batch):
          loss, outputs = model(batch, task_name=task_name, training=False)
          return dict(outputs, loss=loss)

        self._engine_steps[key] = (model, self.engine.wrap(
            forward, trim_by="input_mask" if per_row else None,
            min_length=task.min_trimmed_length, variables=model.variables,
            throughput=True))
      bound, step = self._engine_steps[key]
      if bound is not model:  # a later trial's: its weights compiled in
        step.rebind(model.variables)
        self._engine_steps[key] = (model, step)
      return step.map, per_row
    step = self._eval_step(model, task_name, task.static_length)
    weights = [[tf.convert_to_tensor(v) for v in variables] for variables in
               (model.trainable_variables, model.non_trainable_variables)]
    multiple = padding.multiple_for(self.config, seq_len)
    if multiple and not task.static_length:  # one trace, any length
      step.get_concrete_function(
          *[[tf.TensorSpec(w.shape, w.dtype) for w in ws] for ws in weights],
          _any_length(example))

    def run(batch):  # at the batch's length; per-token outputs back at T
      out = step(*weights, padding.trimmed(batch, multiple,
                                           task.min_trimmed_length))
      return padding.padded_back({k: v.numpy() for k, v in out.items()},
                                 task.per_token_outputs, seq_len)
    return (lambda batches: (run(batch) for batch in batches)), False

  def _eval_step(self, model, task_name, static_length=False):
    """The traced eval step for a task and this model's shape, made once
    (dev, test, predict files and later trials reuse it); static_length:
    traced per length (task.static_length)."""
    # TensorFlow only here: the JAX path imports this module without it.
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    key = (task_name, model_shapes(model))
    step = self._eval_steps.get(key)
    if step is None:
      template = model  # its layers run; the weights come as arguments

      @tf.function(reduce_retracing=not static_length)
      def step(trainable, non_trainable, batch):
        (loss, outputs), _ = template.stateless_call(
            trainable, non_trainable, batch, task_name=task_name,
            training=False)
        return dict(outputs, loss=loss)

      self._eval_steps[key] = step
    return step

  def head_outputs(self, model, task, split):
    """The model's outputs on a split's rows (through predict):
    probabilities [N, C], or predictions [N] of a regression."""
    self.call_once(model, task, split)
    scorer, _ = self.predict(model, task, split)
    return scorer.collected()["predictions" if task.head_kind == "regression"
                              else "probabilities"]


def _any_length(features):
  """TensorSpecs of a batch of `features`' rows: any number of rows, and
  of any length where per token (finetune/padding.py)."""
  # TensorFlow only here: the JAX path imports this module without it.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  ids = features["input_ids"].shape
  return {k: tf.TensorSpec((None,) + v.shape[1:-1] + (None,)
                           if padding.is_sequence(v, ids) else
                           (None,) + v.shape[1:], v.dtype)
          for k, v in features.items()}


def model_shapes(model):
  """What a trace of the model depends on: its variables' shapes, dtypes."""
  return tuple((tuple(v.shape), v.dtype) for v in model.variables)
