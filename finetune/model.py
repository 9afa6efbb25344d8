"""The fine-tuning model: one pretrained encoder, one head per task."""

import dataclasses

import keras

from interop.weights import encoder_slots
from loading import runs
from model import Encoder
from model.config import get_model_config
from model.config import scale_config
from pretrain.objectives import objective_class
from util.errors import UserError


class FinetuningModel(keras.Model):
  """`call(features, task_name, training)` -> (per-row loss, outputs)."""

  def __init__(self, model_config, tasks, **kwargs):
    super().__init__(**kwargs)
    self.model_config = model_config
    self.encoder = Encoder(model_config, name="encoder")
    self.tasks = {task.name: task for task in tasks}
    self.heads = {task.name: task.build_head(model_config)
                  for task in tasks}

  def build(self, input_shape=None):
    # The encoder and each head build on their first call (one task's call
    # never touches the other heads).
    self.built = True

  def call(self, features, task_name, training=None):
    inputs = [features[k] for k in ("input_ids", "input_mask",
                                    "segment_ids")]
    # Multiple choice: [B, C, T] inputs (C sequences per example) are
    # encoded as B * C rows; their states come back as [B, C, T, H].
    choices = inputs[0].shape[1] if len(inputs[0].shape) == 3 else None
    if choices:
      inputs = [keras.ops.reshape(x, (-1, x.shape[-1])) for x in inputs]
    hidden = self.encoder(*inputs, training=training)
    if choices:
      hidden = keras.ops.reshape(hidden, (-1, choices) +
                                 tuple(hidden.shape[1:]))
    return self.tasks[task_name].loss_and_outputs(
        self.heads[task_name], hidden, features, training)

  def variables_for(self, task_name):
    """What a step of `task_name` trains: the encoder and its head."""
    return (self.encoder.trainable_variables +
            self.heads[task_name].trainable_variables)


# ------------------------------------------------ from a pretraining run
def model_config_for(pretrained, config):
  """The encoder's TransformerConfig, as pretrained (the generator's when
  init_from=generator), with fine-tuning's dropout."""
  pretrain_config = pretrained.config
  encoder = get_model_config(pretrain_config.model_size,
                             pretrain_config.vocab_size,
                             pretrain_config.model_hparam_overrides)
  if config.init_from == "generator":
    if objective_class(pretrain_config.objective).MAIN_NETWORK == "generator":
      raise UserError(
          f"a {pretrain_config.objective} model has no separate generator; "
          "use init_from=discriminator")
    if (pretrain_config.two_tower_generator or
        pretrain_config.uniform_generator or
        pretrain_config.unigram_generator):
      raise UserError("init_from=generator needs a masked-LM generator")
    if pretrain_config.weight_sharing != "all":
      encoder = scale_config(encoder, pretrain_config.generator_multiplier,
                             pretrain_config.generator_ffn_size,
                             pretrain_config.generator_heads,
                             pretrain_config.generator_layers)
  if config.hidden_dropout_prob is not None:
    encoder = dataclasses.replace(
        encoder, hidden_dropout_prob=config.hidden_dropout_prob)
  return encoder


def source_encoder(pretraining_model, init_from):
  """The pretraining model's encoder that fine-tuning starts from."""
  if hasattr(pretraining_model, "encoder"):  # mlm, script: one encoder
    return pretraining_model.encoder
  if init_from == "generator":
    return pretraining_model.generator.encoder
  return pretraining_model.discriminator


def set_encoder_weights(target, weights):
  """Assigns {name: array} (pretrained_encoder_weights) to `target`."""
  slots = encoder_slots(target)
  if sorted({s.name for s in slots}) != sorted(weights):
    raise UserError("the checkpoint's encoder has a different structure")
  for slot in slots:
    value = weights[slot.name]
    if tuple(value.shape) != tuple(slot.variable.shape):
      raise UserError(f"shape mismatch for {slot.variable.path}: checkpoint "
                      f"{tuple(value.shape)} vs model "
                      f"{tuple(slot.variable.shape)}")
    slot.assign(value)


def pretrained_encoder_weights(pretrained, config):
  """{name: array} of the run's encoder that fine-tuning starts from (read
  once; every trial assigns them with set_encoder_weights)."""
  pretrain_config = pretrained.config
  need = ("generator" if config.init_from == "generator" else
          objective_class(pretrain_config.objective).MAIN_NETWORK,)
  if pretrained.source is not None:
    # Another format: its encoder by name, heads or not (a KerasHub
    # backbone or a transformers ElectraModel has none; fine-tuning needs
    # none). set_encoder_weights checks every name and shape.
    named = pretrained.source.weights()
    if need[0] not in named:
      raise UserError(f"{pretrained.checkpoint} holds no {need[0]} (it "
                      f"has: {', '.join(named) or 'nothing'})")
    return {n: a for n, a in named[need[0]].items()
            if n.startswith("electra.")}
  model = runs.restore_model(pretrained, need=need)
  # By name (interop/weights.py); GDES tables resolve to shared + delta.
  return {slot.name: slot.value() for slot in
          encoder_slots(source_encoder(model, config.init_from))}
