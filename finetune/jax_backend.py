"""The fine-tuning loop's JAX backend (finetune/loop.py has the loop):
every JAX device, data parallel (keras.distribution.DataParallel, as
pretraining), the Predictor's step jitted, and a trial's training run
by finetune/jax_trainer.py's JaxFinetuner over the train rows as arrays.

Several processes (KERAS_DISTRIBUTION_*, joined as pretraining's by
training/jax_devices.py join_hosts): the devices of all of them are one
mesh; each process reads and featurizes the tasks itself (every row on
every process), each batch is split over all the devices, the outputs
gathered, and process 0 alone reads the record and writes (the loop's
is_chief).

So under KERAS_BACKEND=jax a run has the TensorFlow runner's trials,
record, kept model, evaluation only, test outputs, --do-predict and a
fine-tuned model as the start, from the same code. What differs: the
order of the train rows (pretrain/arrays.py batch_rows, not tf.data's
shuffle), so a trial's numbers are close to the TensorFlow runner's, not
equal; and no per-step log (a trial trains in one call): a line every
~15 s instead (training/heartbeat.py).
"""

import time

import jax
import numpy as np

from finetune import arrays
from finetune import padding
from finetune.loop import FinetuningLoop
from finetune.prediction import Predictor
from finetune.prediction import model_shapes
from training.heartbeat import Heartbeat
from training.jax_devices import Devices
from training.jax_devices import barrier
from training.jax_devices import chief_decides
from training.jax_devices import fetch
from training.jax_devices import join_hosts
from training.step_log import LOG_SECONDS


class JaxPredictor(Predictor):
  """The Predictor with its step jitted (one program per batch length; a
  short last batch is wrapped to a full one, so it needs none of its
  own), each batch split over the devices."""

  def __init__(self, config, data, devices):
    super().__init__(config, data)
    self.devices = devices
    self._jitted = {}  # (task, variables' shapes) -> jitted eval step

  def _steps(self, model, task, rows, example):
    key = (task.name, model_shapes(model))
    if key not in self._jitted:
      template, name = model, task.name  # its layers; weights as arguments

      def step(trainable, fixed, batch):
        (loss, outputs), _ = template.stateless_call(
            trainable, fixed, batch, task_name=name, training=False)
        return dict(outputs, loss=loss)

      self._jitted[key] = jax.jit(step)
    step = self._jitted[key]
    weights = [[self.devices.put(v.value) for v in variables]
               for variables in (model.trainable_variables,
                                 model.non_trainable_variables)]
    seq_len = example["input_ids"].shape[-1]
    multiple = padding.multiple_for(self.config, seq_len)
    size = self.config.eval_batch_size

    def run(batch):
      n = len(batch["input_ids"])
      if n < size:
        batch = {k: v[np.arange(size) % n] for k, v in batch.items()}
      batch = padding.trimmed(batch, multiple, task.min_trimmed_length)
      out = step(*weights, self.devices.split(batch))
      return padding.padded_back({k: fetch(v)[:n] for k, v in out.items()},
                                 task.per_token_outputs, seq_len)
    return (lambda batches: (run(batch) for batch in batches)), False


class JaxFinetuningRunner(FinetuningLoop):
  """The loop on JAX."""

  def __init__(self, config):
    # Before any JAX computation: several processes join here.
    self.is_chief = join_hosts()[0] == 0
    self._finetuner = None  # built at the first trial that trains
    self._compiled = False  # its steps, by the first trial in this process
    super().__init__(config)

  def _devices(self, config):
    return Devices(jax.devices(), config)  # every process's (joined)

  def _chief_decides(self, decide):
    return chief_decides(decide)

  def _barrier(self, name):
    barrier(name)

  def _predictor(self, config, data):
    return JaxPredictor(config, data, self.strategy)

  def finetuner(self, model):
    """The tasks' JaxFinetuner over their train rows, made once per run
    (`model`, the first trial's, its steps' template)."""
    if self._finetuner is None:
      # pylint: disable-next=g-import-not-at-top
      from finetune.jax_trainer import JaxFinetuner
      teachers = self.teachers.outputs() if self.config.distill else None
      featurized = {}
      for task in self.tasks:
        examples, features = self.data.examples_and_features(task, "train")
        if teachers:  # BAM: the teacher's outputs per train row
          features = dict(features, teacher_outputs=teachers[task.name])
        featurized[task.name] = {"train": (examples, features)}
      data = arrays.in_memory(self.config, self.tasks, featurized,
                              self.vocab_size)
      for name, info in data.meta["tasks"].items():
        print(f"{name}: {info['train_examples']} train examples, "
              f"{info['train_rows']} rows, {info['train_steps']} steps",
              flush=True)
      self._finetuner = JaxFinetuner(self.config, self.model_config,
                                     self.tasks, data, self.strategy.devices,
                                     model=model)
    return self._finetuner

  def train(self, model, seed):
    config, finetuner = self.config, self.finetuner(model)
    steps = finetuner.num_steps
    print(self._training_line(finetuner.inputs, steps, " on JAX", (
        f"{len(self.strategy.devices)} {jax.devices()[0].platform} "
        "device(s); ")), flush=True)
    # One call trains the whole trial: a line every LOG_SECONDS meanwhile,
    # as the TensorFlow runner's step log gives.
    trial = seed - config.seed + 1  # the loop's trial seeds
    what = (f"trial {trial}: "
            + ("" if self._compiled else "compiling, then ")
            + f"{steps} steps")
    print(f"{what}; a line every {LOG_SECONDS:.0f} s until it ends",
          flush=True)
    began = time.time()
    with Heartbeat(what):
      summary = finetuner.fit(model, seed)
    self._compiled = True
    print(f"step {steps}/{steps} | loss {summary['final_loss']:.4f} | "
          f"{time.time() - began:.1f} s", flush=True)
    return summary["final_loss"]
