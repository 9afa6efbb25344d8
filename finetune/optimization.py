"""Layer-wise learning-rate decay (ELECTRA paper Table 6) for fine-tuning.

The release's `_get_layer_lrs`: depth 0 for the embeddings (and their
projection), i + 1 for transformer layer i, n_layers + 2 for task heads;
each variable's learning rate is lr * decay ** (n_layers + 2 - depth). With
cross-layer sharing the one shared layer takes the top layer's depth. The
optimizer itself is training/optimization.py's, as pretraining's.
"""

import re

from training import optimization
from training.optimization import WarmupPolynomialDecay


def depth_of(path, num_layers, encoder_name="encoder"):
  """The release's depth of the variable at Keras `path`."""
  if f"{encoder_name}/" not in path:
    return num_layers + 2  # a task head
  layer = re.search(r"/layer_(\d+)/", path)
  if layer:
    return int(layer.group(1)) + 1
  return 0  # embeddings and embeddings_project


def layer_multipliers(variables, num_layers, decay, share_layers=False):
  """Each variable's learning-rate multiplier, decay ** (n + 2 - depth)."""
  multipliers = []
  for v in variables:
    depth = depth_of(v.path, num_layers)
    if share_layers and 0 < depth <= num_layers:
      depth = num_layers
    multipliers.append(decay ** (num_layers + 2 - depth))
  return multipliers


def create_optimizer(config, variables, num_layers, num_train_steps,
                     share_layers=False):
  """Layer-wise AdamW over `variables`, warmup then linear decay."""
  warmup = config.warmup_proportion * num_train_steps  # a float, as the
  # original's max(num_train_steps * warmup_proportion, warmup_steps)
  schedule = WarmupPolynomialDecay(config.learning_rate, num_train_steps,
                                   warmup, power=1.0,
                                   warmup_scales_decay=config.warmup_scales_decay)
  return optimization.create_optimizer(
      config, schedule, variables, lr_multipliers=layer_multipliers(
          variables, num_layers, config.layerwise_lr_decay, share_layers))
