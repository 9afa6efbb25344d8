"""Optimizers and the learning-rate schedule (Keras 3, backend-neutral).

The original release's Adam (no bias correction; its model/optimization.py)
by default, or Keras' bias-corrected AdamW, or LAMB; weight decay skips
LayerNorm and biases; linear warmup and polynomial decay to 0 (ELECTRA paper
Table 6: "Linear" decay, 10000 warmup steps).
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


class PerVariableRates:
  """An optimizer's (learning-rate multiplier, whether it decays) per
  variable: 1 and no_decay's rule unless set_multipliers gives ELECTRA's
  layer-wise rates. Variables are told apart by their optimizer index,
  which also names a replica's copy under tf.distribute."""

  def _build_rates(self, var_list):
    self._scales = [(1.0, not no_decay(v)) for v in var_list]

  def set_multipliers(self, variables, multipliers):
    """Builds the slots; variables get lr x multiplier."""
    self.build(variables)
    for variable, m in zip(variables, multipliers):
      self._scales[self._get_variable_index(variable)] = (
          float(m), not no_decay(variable))

  def _rate(self, variable, learning_rate):
    """(this variable's learning rate, whether it decays)."""
    multiplier, decays = self._scales[self._get_variable_index(variable)]
    lr = ops.cast(learning_rate, variable.dtype) * multiplier
    return lr, decays and bool(self.decoupled_weight_decay)


class AdamWeightDecay(PerVariableRates, keras.optimizers.Optimizer):
  """The original release's AdamWeightDecayOptimizer: Adam's moving averages
  without bias correction, each variable moved by
  lr x multiplier x (m / (sqrt(v) + epsilon) + weight_decay x variable),
  the decay term only where it decays (no_decay). Early steps are thus up to
  ~(1 - beta1^t)^-1 x sqrt(1 - beta2^t) larger than Keras' Adam: 3.6x at
  step 78, 1.36x at 780 (docs/mirroring.md)."""

  def __init__(self, learning_rate, weight_decay=0.0, beta_1=0.9,
               beta_2=0.999, epsilon=1e-6, name="adam_weight_decay",
               **kwargs):
    super().__init__(learning_rate=learning_rate, name=name, **kwargs)
    self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
    self.decoupled_weight_decay = weight_decay

  def build(self, var_list):
    if self.built:
      return
    super().build(var_list)
    self._m, self._v = self.add_optimizer_variables(var_list, ["m", "v"])
    self._build_rates(var_list)

  def update_step(self, gradient, variable, learning_rate):
    lr, decays = self._rate(variable, learning_rate)
    index = self._get_variable_index(variable)
    gradient = ops.cast(gradient, variable.dtype)
    m, v = self._m[index], self._v[index]
    self.assign_add(m, (gradient - m) * (1 - self.beta_1))
    self.assign_add(v, (ops.square(gradient) - v) * (1 - self.beta_2))
    update = m / (ops.sqrt(v) + self.epsilon)
    if decays:
      update = update + self.decoupled_weight_decay * variable
    self.assign_sub(variable, lr * update)

  def get_config(self):
    config = super().get_config()
    config.update(weight_decay=self.decoupled_weight_decay,
                  beta_1=self.beta_1, beta_2=self.beta_2,
                  epsilon=self.epsilon)
    return config


class LayerwiseAdamW(PerVariableRates, keras.optimizers.Adam):
  """Keras' AdamW with a learning rate per variable: lr x its multiplier,
  for the Adam step and the decoupled weight decay alike. The decay is
  applied in update_step, so no private Keras method is overridden."""

  def __init__(self, weight_decay=0.0, **kwargs):
    super().__init__(**kwargs)  # no base weight decay: update_step's
    self.decoupled_weight_decay = weight_decay

  def build(self, var_list):
    if self.built:
      return
    super().build(var_list)
    self._build_rates(var_list)

  def update_step(self, gradient, variable, learning_rate):
    lr, decays = self._rate(variable, learning_rate)
    if decays:
      wd = ops.cast(self.decoupled_weight_decay, variable.dtype)
      self.assign_sub(variable, variable * wd * lr)
    super().update_step(gradient, variable, lr)


def create_optimizer(config, schedule=None, variables=None,
                     lr_multipliers=None):
  """The optimizer for config.optimizer: "adam_weight_decay" (the original
  release's), "adamw" (Keras', bias-corrected) or "lamb"; weight decay
  skips LayerNorm and biases. Pretraining: one learning rate (slots built by
  build_optimizer). Fine-tuning passes `variables` and their
  `lr_multipliers` (layer-wise decay): built here. Clipping is done by the
  caller, after gradients are summed across replicas (training/step.py)."""
  schedule = schedule or WarmupPolynomialDecay(
      config.learning_rate, config.num_train_steps, config.num_warmup_steps,
      config.lr_decay_power, config.warmup_scales_decay)
  kwargs = dict(learning_rate=schedule, weight_decay=config.weight_decay_rate,
                beta_1=config.adam_beta1, beta_2=config.adam_beta2,
                epsilon=config.adam_epsilon)
  kind = config.optimizer
  if lr_multipliers is not None and kind == "lamb":
    raise ValueError("per-variable learning rates are for Adam only")
  if kind == "adam_weight_decay":
    optimizer = AdamWeightDecay(**kwargs)
  elif kind == "lamb":
    return keras.optimizers.Lamb(**kwargs)
  elif lr_multipliers is not None:
    optimizer = LayerwiseAdamW(**kwargs)
  else:
    return keras.optimizers.AdamW(**kwargs)
  if lr_multipliers is not None:
    optimizer.set_multipliers(variables, lr_multipliers)
  return optimizer


def build_optimizer(optimizer, variables):
  """Creates slot variables and excludes no-decay variables."""
  if not isinstance(optimizer, AdamWeightDecay):  # it reads no_decay itself
    optimizer.exclude_from_weight_decay(
        var_list=[v for v in variables if no_decay(v)])
  optimizer.build(variables)


def clip_by_global_norm(grads, clip_norm, loss_scale=1.0):
  """(grads scaled as tf.clip_by_global_norm scales them, their global
  norm / loss_scale) for the JAX steps; a None (a frozen variable's) stays
  None and counts for nothing. clip_norm 0: not clipped."""
  norm = ops.sqrt(sum(ops.sum(ops.square(ops.cast(g, "float32")))
                      for g in grads if g is not None)) / loss_scale
  if clip_norm > 0:
    scale = clip_norm / ops.maximum(norm, clip_norm)
    grads = [None if g is None else g * ops.cast(scale, g.dtype)
             for g in grads]
  return grads, norm
