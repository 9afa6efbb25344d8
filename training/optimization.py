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


class LayerwiseAdamW(keras.optimizers.Adam):
  """AdamW with a learning rate per variable: lr x its multiplier, for the
  Adam step and the decoupled weight decay alike (ELECTRA's layer-wise
  decay). The decay is applied in update_step, so no private Keras method
  is overridden; variables are told apart by their optimizer index, which
  also names a replica's copy under tf.distribute."""

  def __init__(self, weight_decay=0.0, **kwargs):
    super().__init__(**kwargs)  # no base weight decay: update_step's
    self.decoupled_weight_decay = weight_decay

  def set_multipliers(self, variables, multipliers):
    """Builds the slots; variables get lr x multiplier, decay as no_decay."""
    self.build(variables)
    self._scales = [(1.0, False)] * len(variables)
    for variable, m in zip(variables, multipliers):
      self._scales[self._get_variable_index(variable)] = (
          float(m), not no_decay(variable))

  def update_step(self, gradient, variable, learning_rate):
    multiplier, decays = self._scales[self._get_variable_index(variable)]
    lr = ops.cast(learning_rate, variable.dtype) * multiplier
    if decays and self.decoupled_weight_decay:
      wd = ops.cast(self.decoupled_weight_decay, variable.dtype)
      self.assign_sub(variable, variable * wd * lr)
    super().update_step(gradient, variable, lr)


def create_optimizer(config, schedule=None, variables=None,
                     lr_multipliers=None):
  """The optimizer for config.optimizer (AdamW where a config has none),
  with weight decay that skips LayerNorm and biases. Pretraining: one
  learning rate (slots built by build_optimizer). Fine-tuning passes
  `variables` and their `lr_multipliers` (layer-wise decay): built here.
  Clipping is done by the caller, after gradients are summed across
  replicas (training/step.py)."""
  schedule = schedule or WarmupPolynomialDecay(
      config.learning_rate, config.num_train_steps, config.num_warmup_steps,
      config.lr_decay_power, config.warmup_scales_decay)
  kwargs = dict(learning_rate=schedule, weight_decay=config.weight_decay_rate,
                beta_1=config.adam_beta1, beta_2=config.adam_beta2,
                epsilon=config.adam_epsilon)
  kind = getattr(config, "optimizer", "adamw")
  if lr_multipliers is not None:
    if kind != "adamw":
      raise ValueError("per-variable learning rates are for AdamW only")
    optimizer = LayerwiseAdamW(**kwargs)
    optimizer.set_multipliers(variables, lr_multipliers)
    return optimizer
  if kind == "lamb":
    return keras.optimizers.Lamb(**kwargs)
  return keras.optimizers.AdamW(**kwargs)


def build_optimizer(optimizer, variables):
  """Creates slot variables and excludes no-decay variables."""
  optimizer.exclude_from_weight_decay(
      var_list=[v for v in variables if no_decay(v)])
  optimizer.build(variables)
