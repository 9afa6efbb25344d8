"""The fine-tuning model: one pretrained encoder, one head per task."""

import dataclasses

import keras
import numpy as np

from finetune import task_builder
from finetune.config import FinetuningConfig
from interop.weights import encoder_slots
from loading import finetuned as finetuned_files
from loading import runs
from model import Encoder
from model.config import get_model_config
from model.config import scale_config
from pretrain.objectives import objective_class
from util.config import apply_overrides
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
    if choices:  # the length may be dynamic (finetune/padding.py)
      inputs = [keras.ops.reshape(x, (-1, keras.ops.shape(x)[-1]))
                for x in inputs]
    hidden = self.encoder(
        *inputs, training=training,
        first_token_only=self.tasks[task_name].first_token_only)
    if choices:
      hidden = keras.ops.reshape(hidden, (-1, choices) +
                                 tuple(keras.ops.shape(hidden)[1:]))
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
  encoder = _with_overrides(encoder, config.model_hparam_overrides)
  if config.hidden_dropout_prob is not None:
    encoder = dataclasses.replace(
        encoder, hidden_dropout_prob=config.hidden_dropout_prob)
  return encoder


# What the pretrained weights' shapes fix: a fine-tuning run cannot change.
PRETRAINED_SHAPE = ("vocab_size", "hidden_size", "num_hidden_layers",
                    "num_attention_heads", "intermediate_size",
                    "embedding_size", "max_position_embeddings",
                    "type_vocab_size", "share_layers")


def _with_overrides(encoder, overrides):
  """The encoder config with fine-tuning's model_hparam_overrides (e.g.
  dense_init of its heads, attention dropout) applied."""
  known = {f.name for f in dataclasses.fields(encoder)}
  for key, value in (overrides or {}).items():
    if key not in known:
      raise UserError(f"unknown key '{key}' in model_hparam_overrides")
    if key in PRETRAINED_SHAPE and value != getattr(encoder, key):
      raise UserError(
          f"model_hparam_overrides '{key}' is the pretrained model's "
          f"({getattr(encoder, key)}): fine-tuning cannot change it")
  return dataclasses.replace(encoder, **(overrides or {}))


def source_encoder(pretraining_model, init_from):
  """The pretraining model's encoder that fine-tuning starts from."""
  role = ("generator" if init_from == "generator" else
          pretraining_model.MAIN_NETWORK)
  return pretraining_model.networks()[role][0]


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


# ------------------------------------------------- a fine-tuned model's heads
def _head_variables(head):
  """{name inside the head: variable}: its weights (not the dropout seed
  states), by Keras path below the head ("output/kernel"; the path above
  it depends on the model it is in)."""
  prefix = head.name + "/"

  def inner(path):
    path = "/" + path
    return path[path.rindex("/" + prefix) + 1 + len(prefix):]
  return {inner(v.path): v for v in head.weights}


def head_weights(head):
  """{name inside the head: float32 array} of a built head
  (loading/finetuned.py keeps them as heads/<task>/<name>)."""
  return {name: np.asarray(keras.ops.convert_to_numpy(v), np.float32)
          for name, v in _head_variables(head).items()}


def set_head_weights(head, weights, source):
  """Assigns head_weights of a saved head to `head` (built); any missing,
  extra or misshapen weight is one UserError."""
  if not head.built:
    head.build(None)
  variables = _head_variables(head)
  missing = sorted(set(variables) - set(weights))
  extra = sorted(set(weights) - set(variables))
  shapes = [f"{n} {tuple(weights[n].shape)} vs {tuple(v.shape)}"
            for n, v in variables.items()
            if n in weights and tuple(weights[n].shape) != tuple(v.shape)]
  problems = [f"{what}: {', '.join(names[:4])}" for what, names in (
      ("missing", missing), ("unused", extra),
      ("shape (saved vs model)", shapes)) if names]
  if problems:
    raise UserError(f"{source}: its {head.name} does not match the head "
                    f"this run builds ({'; '.join(problems)})")
  for name, variable in variables.items():
    variable.assign(np.asarray(weights[name], np.float32))


# ------------------------------------------------ from a fine-tuned model
def saved_config(finetuned, **values):
  """The FinetuningConfig a fine-tuned model (loading/finetuned.py) was
  trained with (fields this version lacks dropped), `values` applied."""
  known = {f.name for f in dataclasses.fields(FinetuningConfig)}
  saved = {k: v for k, v in finetuned.finetuning_config.items()
           if k in known}
  source = f"{finetuned.path} (finetuning_config)"
  return apply_overrides(apply_overrides(FinetuningConfig(), saved, source),
                         values, source)


def adopt_heads(finetuned, tasks):
  """Gives each task the label list its saved head predicts, and checks
  that the head is the one the task builds; a task the model has no head
  for is one UserError."""
  for task in tasks:
    info = finetuned.tasks.get(task.name)
    if info is None:
      raise UserError(f"{finetuned.path} holds no {task.name} head (it has: "
                      f"{', '.join(finetuned.tasks)}): a fine-tuned model "
                      "of another task set")
    task.restore_labels(info.get("labels"))
    task.adopt_head(info, finetuned.path)


def reused_heads(finetuned, tasks):
  """{task: saved head weights} of the tasks the fine-tuned model a run
  starts from has a head for (same name; its kind and labels must be the
  task's, else one UserError); the other tasks get new heads."""
  reused = {}
  _, heads = finetuned.weights()
  for task in tasks:
    info = finetuned.tasks.get(task.name)
    if info is not None:
      task.adopt_head(info, finetuned.path)
      reused[task.name] = heads[task.name]
  new = [t.name for t in tasks if t.name not in reused]
  print(f"starting from the fine-tuned model {finetuned.path}: its "
        f"encoder; heads reused: {', '.join(reused) or 'none'}; new: "
        f"{', '.join(new) or 'none'}", flush=True)
  return reused


def finetuned_model(finetuned, tasks):
  """A FinetuningModel with a fine-tuned model's encoder and its heads of
  `tasks` (adopt_heads first), every weight assigned."""
  model = FinetuningModel(finetuned.model_config, tasks, name="finetuning")
  ids = np.zeros((1, 2), np.int32)
  model.encoder(ids, np.ones_like(ids), ids, training=False)  # builds it
  encoder, heads = finetuned.weights()
  set_encoder_weights(model.encoder, encoder)
  for task in tasks:
    set_head_weights(model.heads[task.name], heads[task.name],
                     finetuned.path)
  return model


def load_finetuned(path, task_names=""):
  """(finetuned, config, tokenizer, tasks, model) of the fine-tuned model
  in folder `path` (finetuned: its loading/finetuned.py record), with the heads of `task_names` (default: every head), as
  export_model.py needs it."""
  finetuned = finetuned_files.load(path)
  config = saved_config(finetuned, task_names=task_names or ",".join(
      finetuned.tasks), output_dir="")
  tokenizer = runs.load_tokenizer_for(finetuned.pretrain_config)
  tasks = task_builder.get_tasks(config, tokenizer)
  adopt_heads(finetuned, tasks)
  return finetuned, config, tokenizer, tasks, finetuned_model(finetuned,
                                                              tasks)
