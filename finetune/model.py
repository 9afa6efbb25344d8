"""The fine-tuning model: one pretrained encoder, one head per task."""

import dataclasses
import json
import os

import keras
import numpy as np

from model import Encoder
from model.config import get_model_config
from model.config import scale_config
from util import storage
from util.errors import UserError

PRETRAIN_CONFIG = "pretrain_config.json"


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
@dataclasses.dataclass
class Pretrained:
  """Where the encoder comes from: the run's config and checkpoint."""
  config: object  # PretrainingConfig
  checkpoint: str  # checkpoint path prefix
  model_dir: str


def find_pretrained(path):
  """A pretraining model_dir (or a checkpoint prefix inside one)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from configure_pretraining import PretrainingConfig
  if not path:
    raise UserError("no pretrained model: pass --init-checkpoint or "
                    "--data-dir and --model-name")
  if not storage.isdir(path) and not storage.exists(path + ".index"):
    raise UserError(f"no checkpoint found at {path} (train one with "
                    "run_pretraining.py, or pass --init-checkpoint)")
  model_dir = path if storage.isdir(path) else os.path.dirname(path)
  checkpoint = (tf.train.latest_checkpoint(path) if storage.isdir(path)
                else path)
  if not checkpoint:
    raise UserError(f"no checkpoint found in {path} (train one with "
                    "run_pretraining.py)")
  config_path = os.path.join(model_dir, PRETRAIN_CONFIG)
  if not storage.exists(config_path):
    raise UserError(f"{config_path} not found: the checkpoint's model "
                    "config is unknown")
  values = json.loads(storage.read_text(config_path))
  known = {f.name for f in dataclasses.fields(PretrainingConfig)}
  config = PretrainingConfig(**{k: v for k, v in values.items()
                                if k in known})
  return Pretrained(config, checkpoint, model_dir)


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


def copy_encoder(source, target):
  """Copies every weight of `source` into the same-shaped `target`."""
  pairs = list(zip(_tables(source.embeddings), _tables(target.embeddings)))
  src_rest, dst_rest = _encoder_body(source), _encoder_body(target)
  if len(src_rest) != len(dst_rest):
    raise UserError("the checkpoint's encoder has a different structure")
  pairs += list(zip(src_rest, dst_rest))
  for src, dst in pairs:
    if tuple(src.shape) != tuple(dst.shape):
      raise UserError(f"shape mismatch for {dst.path}: checkpoint "
                      f"{tuple(src.shape)} vs model {tuple(dst.shape)}")
    dst.assign(np.asarray(keras.ops.convert_to_numpy(src)))


def _encoder_body(encoder):
  """The encoder's weights after its embeddings: projection and layers."""
  weights = []
  if encoder.embeddings_project is not None:
    weights += encoder.embeddings_project.weights
  for layer in encoder.transformer_layers:
    weights += layer.weights
  return weights


def load_pretrained_encoder(target, pretrained, config):
  """Restores the pretraining checkpoint and copies its encoder into
  `target` (the fine-tuning model's encoder)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from pretrain.checkpointing import make_checkpoint
  from pretrain.objectives import build_model
  p = pretrained.config
  counts = None
  if p.unigram_generator:  # a unigram generator's table is not needed
    counts = np.ones(p.vocab_size)
  model = build_model(p, counts, ())
  model.build_variables()
  try:
    status = make_checkpoint(model).read(pretrained.checkpoint)
    status.expect_partial()
    status.assert_existing_objects_matched()
  except (tf.errors.OpError, AssertionError, ValueError) as e:
    first = str(e).strip().splitlines()[0][:300]
    raise UserError(f"cannot restore {pretrained.checkpoint}: {first}") \
        from None
  copy_encoder(source_encoder(model, config.init_from), target)
