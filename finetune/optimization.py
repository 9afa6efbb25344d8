"""AdamW with layer-wise learning-rate decay (ELECTRA paper Table 6).

The release's `_get_layer_lrs`: depth 0 for the embeddings (and their
projection), i + 1 for transformer layer i, n_layers + 2 for task heads;
each variable's learning rate is lr * decay ** (n_layers + 2 - depth). With
cross-layer sharing the one shared layer takes the top layer's depth.
"""

import re

import keras
from keras import ops

from training.optimization import WarmupPolynomialDecay


def depth_of(path, num_layers, encoder_name="encoder"):
  """The release's depth of the variable at Keras `path`."""
  if f"{encoder_name}/" not in path:
    return num_layers + 2  # a task head
  layer = re.search(r"/layer_(\d+)/", path)
  if layer:
    return int(layer.group(1)) + 1
  return 0  # embeddings and embeddings_project


class LayerwiseAdamW(keras.optimizers.AdamW):
  """AdamW whose update for each variable uses lr x that variable's
  multiplier (set by `set_multipliers` before the first step)."""

  def set_multipliers(self, variables, multipliers):
    self.build(variables)
    self._multipliers = [1.0] * len(variables)
    for variable, m in zip(variables, multipliers):
      self._multipliers[self._get_variable_index(variable)] = float(m)

  def _multiplier(self, variable):
    return self._multipliers[self._get_variable_index(variable)]

  def update_step(self, gradient, variable, learning_rate):
    super().update_step(gradient, variable,
                        learning_rate * self._multiplier(variable))

  def _apply_weight_decay(self, variables):
    if not self.weight_decay:
      return
    for variable in variables:
      if self._use_weight_decay(variable):
        lr = ops.cast(self.learning_rate, variable.dtype)
        lr = lr * self._multiplier(variable)
        wd = ops.cast(self.weight_decay, variable.dtype)
        variable.assign(variable - variable * wd * lr)


def create_optimizer(config, variables, num_layers, num_train_steps,
                     share_layers=False):
  """LayerwiseAdamW over `variables` with warmup then linear decay."""
  warmup = config.warmup_proportion * num_train_steps  # a float, as the
  # original's max(num_train_steps * warmup_proportion, warmup_steps)
  schedule = WarmupPolynomialDecay(config.learning_rate, num_train_steps,
                                   warmup, power=1.0,
                                   warmup_scales_decay=config.warmup_scales_decay)
  optimizer = LayerwiseAdamW(
      learning_rate=schedule, weight_decay=config.weight_decay_rate,
      beta_1=config.adam_beta1, beta_2=config.adam_beta2,
      epsilon=config.adam_epsilon)
  decay = config.layerwise_lr_decay
  multipliers = []
  for v in variables:
    depth = depth_of(v.path, num_layers)
    if share_layers and 0 < depth <= num_layers:
      depth = num_layers
    multipliers.append(decay ** (num_layers + 2 - depth))
  optimizer.exclude_from_weight_decay(var_list=[
      v for v in variables
      if "layernorm" in v.path.lower() or v.path.endswith("bias")])
  optimizer.set_multipliers(variables, multipliers)
  return optimizer
