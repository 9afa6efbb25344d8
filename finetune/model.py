"""The fine-tuning model: one pretrained encoder, one head per task."""

import dataclasses

import keras
import numpy as np

from model import Encoder
from model.config import get_model_config
from model.config import scale_config
from pretrain import runs
from util.errors import UserError


class FinetuningModel(keras.Model):
  """`call(features, task_name, training)` -> (per-row loss, outputs)."""

  def __init__(self, encoder_config, tasks, **kwargs):
    super().__init__(**kwargs)
    self.encoder_config = encoder_config
    self.encoder = Encoder(encoder_config, name="encoder")
    self.tasks = {task.name: task for task in tasks}
    self.heads = {task.name: task.build_head(encoder_config)
                  for task in tasks}

  def build(self, input_shape=None):
    # The encoder and each head build on their first call (one task's call
    # never touches the other heads).
    self.built = True

  def call(self, features, task_name, training=None):
    hidden = self.encoder(features["input_ids"], features["input_mask"],
                          features["segment_ids"], training=training)
    return self.tasks[task_name].loss_and_outputs(
        self.heads[task_name], hidden, features, training)

  def variables_for(self, task_name):
    """What a step of `task_name` trains: the encoder and its head."""
    return (self.encoder.trainable_variables +
            self.heads[task_name].trainable_variables)


# ------------------------------------------------ from a pretraining run
def encoder_config_for(pretrained, config):
  """The encoder's TransformerConfig, as pretrained (the generator's when
  init_from=generator), with fine-tuning's dropout."""
  p = pretrained.config
  encoder = get_model_config(p.model_size, p.vocab_size,
                             p.model_hparam_overrides)
  if config.init_from == "generator":
    if p.objective in ("mlm", "script"):
      raise UserError(f"a {p.objective} model has no separate generator; "
                      "use init_from=discriminator")
    if p.two_tower_generator or p.uniform_generator or p.unigram_generator:
      raise UserError("init_from=generator needs a masked-LM generator")
    if p.weight_sharing != "all":
      encoder = scale_config(encoder, p.generator_hidden_size,
                             p.generator_ffn_size, p.generator_heads,
                             p.generator_layers)
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


def _tables(embeddings):
  """Effective embedding tables (GDES: shared + delta) and LayerNorm."""
  from model.encoder import DisentangledEmbeddings
  if isinstance(embeddings, DisentangledEmbeddings):
    tables = [embeddings._table(n) for n in (  # pylint: disable=protected-access
        "word_embeddings", "position_embeddings", "token_type_embeddings")]
  else:
    tables = [embeddings.word_embeddings.embeddings,
              embeddings.position_embeddings.embeddings,
              embeddings.token_type_embeddings.embeddings]
  return tables + [embeddings.layer_norm.gamma, embeddings.layer_norm.beta]


def encoder_weights(encoder):
  """The encoder's weights in one order: embedding tables, projection,
  layers (GDES tables resolved to shared + delta)."""
  return _tables(encoder.embeddings) + _encoder_body(encoder)


def set_encoder_weights(target, weights):
  """Assigns NumPy `weights` (encoder_weights order) to `target`."""
  variables = encoder_weights(target)
  if len(variables) != len(weights):
    raise UserError("the checkpoint's encoder has a different structure")
  for value, variable in zip(weights, variables):
    if tuple(value.shape) != tuple(variable.shape):
      raise UserError(f"shape mismatch for {variable.path}: checkpoint "
                      f"{tuple(value.shape)} vs model {tuple(variable.shape)}")
    variable.assign(value)


def _encoder_body(encoder):
  """The encoder's weights after its embeddings: projection and layers."""
  weights = []
  if encoder.embeddings_project is not None:
    weights += encoder.embeddings_project.weights
  for layer in encoder.transformer_layers:
    weights += layer.weights
  return weights


def pretrained_encoder_weights(pretrained, config):
  """NumPy weights of the run's encoder that fine-tuning starts from (read
  once; every trial assigns them with set_encoder_weights)."""
  p = pretrained.config
  # A unigram generator's table is no variable, and not needed here.
  counts = np.ones(p.vocab_size) if p.unigram_generator else None
  mlm_only = p.objective in ("mlm", "script")
  need = ("generator" if config.init_from == "generator" or mlm_only
          else "discriminator",)
  model = runs.restore_model(pretrained, counts, need=need)
  return [np.asarray(keras.ops.convert_to_numpy(w)) for w in
          encoder_weights(source_encoder(model, config.init_from))]
