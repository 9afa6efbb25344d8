"""Optimizers and the learning-rate schedule (Keras 3, backend-neutral).

AdamW or LAMB with weight decay that skips LayerNorm and biases, linear
warmup and polynomial decay to 0 (ELECTRA paper Table 6: "Linear" decay,
10000 warmup steps).
"""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="electra")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
  """lr * (1 - step/total)^power, times min(1, step/warmup) as the original
  release's model/optimization.py does (`warmup_scales_decay`); else
  lr * step/warmup during warmup, rising to the peak lr."""

  def __init__(self, learning_rate, num_train_steps, num_warmup_steps,
               power=1.0, warmup_scales_decay=True):
    self.learning_rate = learning_rate
    self.num_train_steps = num_train_steps
    self.num_warmup_steps = num_warmup_steps
    self.power = power
    self.warmup_scales_decay = warmup_scales_decay

  def __call__(self, step):
    step = ops.cast(step, "float32")
    progress = ops.minimum(step, self.num_train_steps) / self.num_train_steps
    decayed = self.learning_rate * ops.power(1.0 - progress, self.power)
    warmup = self.num_warmup_steps
    if isinstance(warmup, (int, float)) and not warmup:
      return decayed
    # The step counts (warmup too) may be traced values (the JAX driver
    # sets them after timing its compiled step).
    warmup = ops.cast(warmup, "float32")
    fraction = ops.where(warmup > 0,
                         ops.minimum(1.0, step / ops.maximum(warmup, 1.0)),
                         1.0)
    if self.warmup_scales_decay:
      return decayed * fraction
    return ops.where(step < warmup, self.learning_rate * fraction, decayed)

  def get_config(self):
    return dict(learning_rate=self.learning_rate,
                num_train_steps=self.num_train_steps,
                num_warmup_steps=self.num_warmup_steps, power=self.power,
                warmup_scales_decay=self.warmup_scales_decay)


def no_decay(variable):
  """LayerNorm parameters and biases get no weight decay."""
  path = variable.path.lower()
  return "layernorm" in path or path.endswith("bias")


def create_optimizer(config, schedule=None):
  """The optimizer for config.optimizer. Clipping is done by the trainer,
  after gradients are summed across replicas."""
  schedule = schedule or WarmupPolynomialDecay(
      config.learning_rate, config.num_train_steps, config.num_warmup_steps,
      config.lr_decay_power, config.warmup_scales_decay)
  kwargs = dict(learning_rate=schedule, weight_decay=config.weight_decay_rate,
                beta_1=config.adam_beta1, beta_2=config.adam_beta2,
                epsilon=config.adam_epsilon)
  if config.optimizer == "lamb":
    return keras.optimizers.Lamb(**kwargs)
  return keras.optimizers.AdamW(**kwargs)


def build_optimizer(optimizer, variables):
  """Creates slot variables and excludes no-decay variables."""
  optimizer.exclude_from_weight_decay(
      var_list=[v for v in variables if no_decay(v)])
  optimizer.build(variables)
