"""Our networks' weights under one set of names: those of Hugging Face
`transformers`' ELECTRA (ElectraForPreTraining / ElectraForMaskedLM), in
Keras orientation (dense kernels [in, out]). Every format converts to and
from these names: hf.py transposes, tf1.py renames.

A pretraining model holds up to two networks ("roles"):
  discriminator  encoder `electra.*` + head `discriminator_predictions.*`
  generator      encoder `electra.*` + head `generator_predictions.*`,
                 `generator_lm_head.bias` (the masked LM; BERT and SCRIPT
                 models have only this one)
Keras only (no TensorFlow), so it runs under any backend.
"""

import dataclasses

import numpy as np
from keras import ops

from model import DISCRIMINATOR  # noqa: F401 (the roles, for interop)
from model import GENERATOR  # noqa: F401
from model import DiscriminatorHead
from model import MaskedLMHead
from model.encoder import DisentangledEmbeddings
from util.errors import UserError



@dataclasses.dataclass
class Slot:
  """One named weight: `variable`, plus `offset` (a GDES table's shared
  part, which the variable's value is added to)."""
  name: str
  variable: object
  offset: object = None

  def value(self):
    v = ops.convert_to_numpy(self.variable)
    if self.offset is not None:
      v = v + ops.convert_to_numpy(self.offset)
    return np.asarray(v, np.float32)

  def assign(self, value):
    if self.offset is not None:
      value = value - ops.convert_to_numpy(self.offset)
    self.variable.assign(value.astype(np.float32))


def _dense(name, dense):
  return [Slot(f"{name}.weight", dense.kernel), Slot(f"{name}.bias", dense.bias)]


def _layer_norm(name, norm):
  return [Slot(f"{name}.weight", norm.gamma), Slot(f"{name}.bias", norm.beta)]


def encoder_slots(encoder, prefix="electra."):
  """The encoder's weights. A cross-layer-shared encoder lists its one
  layer under every layer index, as transformers stores it."""
  e = encoder.embeddings
  slots = []
  for table in ("word", "position", "token_type"):
    layer = getattr(e, f"{table}_embeddings")
    offset = None
    if isinstance(e, DisentangledEmbeddings):  # GDES: shared + own delta
      offset = getattr(e.shared, f"{table}_embeddings").embeddings
    slots.append(Slot(f"{prefix}embeddings.{table}_embeddings.weight",
                      layer.embeddings, offset))
  slots += _layer_norm(f"{prefix}embeddings.LayerNorm", e.layer_norm)
  if encoder.embeddings_project is not None:
    slots += _dense(f"{prefix}embeddings_project", encoder.embeddings_project)
  layers = encoder.transformer_layers
  for i in range(encoder.config.num_hidden_layers):
    layer, p = layers[i % len(layers)], f"{prefix}encoder.layer.{i}."
    for part in ("query", "key", "value"):
      slots += _dense(f"{p}attention.self.{part}",
                      getattr(layer.attention, part))
    slots += _dense(f"{p}attention.output.dense", layer.attention_output)
    slots += _layer_norm(f"{p}attention.output.LayerNorm",
                         layer.attention_layer_norm)
    slots += _dense(f"{p}intermediate.dense", layer.intermediate)
    slots += _dense(f"{p}output.dense", layer.output_dense)
    slots += _layer_norm(f"{p}output.LayerNorm", layer.output_layer_norm)
  return slots


def discriminator_head_slots(head):
  return (_dense("discriminator_predictions.dense", head.dense) +
          _dense("discriminator_predictions.dense_prediction",
                 head.dense_prediction))


def masked_lm_head_slots(head):
  """The output projection is tied to the word embeddings (no weight)."""
  return (_dense("generator_predictions.dense", head.dense) +
          _layer_norm("generator_predictions.LayerNorm", head.layer_norm) +
          [Slot("generator_lm_head.bias", head.output_bias)])


# Electric's two-tower cloze generator (Electric section 2.4): no format
# but the TF1 release's names it, so it is a role of its own, not a
# network: `l2r.` and `r2l.` towers (the discriminator's embeddings
# shared, so not theirs) and the `cloze_predictions.` head.
CLOZE = "cloze"


def cloze_generator(model):
  """The model's TwoTowerGenerator, or None."""
  generator = getattr(getattr(model, "pair", None), "generator", None)
  return generator if getattr(generator, "kind", "") == "two_tower" else None


def model_roles(model):
  """The roles a model's weights are exported and imported under."""
  roles = list(model.networks())
  return roles + [CLOZE] if cloze_generator(model) is not None else roles


def _cloze_slots(model):
  towers = cloze_generator(model)
  shared = {id(s.variable) for s in encoder_slots(model.networks()[
      DISCRIMINATOR][0]) if s.name.startswith("electra.embeddings.")}
  slots = []
  for tower in (towers.l2r, towers.r2l):
    for s in encoder_slots(tower, f"{tower.name}.electra."):
      if ".embeddings." not in s.name:
        slots.append(s)
      elif id(s.variable) not in shared:
        raise UserError("this Electric model's cloze towers have their own "
                        "embeddings: the layout of roles holds the "
                        "discriminator's shared ones only")
  return slots + [dataclasses.replace(s, name=s.name.replace(
      "generator_", "cloze_")) for s in masked_lm_head_slots(
          towers.predictions)]


def role_slots(model, role):
  if role == CLOZE:
    return _cloze_slots(model)
  encoder, head = model.networks()[role]
  slots = encoder_slots(encoder)
  if isinstance(head, DiscriminatorHead):
    slots += discriminator_head_slots(head)
  elif isinstance(head, MaskedLMHead):
    slots += masked_lm_head_slots(head)
  return slots


def export_weights(model, role):
  """{name: float32 array} of one network."""
  return {slot.name: slot.value() for slot in role_slots(model, role)}


def import_weights(model, weights_by_role, source="the checkpoint",
                   require=()):
  """Assigns {role: {name: array}} to `model`, every role given; the roles
  in `require` must be among them. Strict: any missing weight, shape
  mismatch or leftover is one UserError that lists what differs (the first
  few of each)."""
  missing = [role for role in require if role not in weights_by_role]
  if missing:
    raise UserError(f"{source} holds no {' or '.join(missing)} (it has: "
                    f"{', '.join(weights_by_role) or 'nothing'})")
  have = model_roles(model)
  problems, plan = [], []
  # The generator first: a GDES discriminator's tables are offsets from
  # the shared ones, which the generator's weights set.
  for role in sorted(weights_by_role, key=lambda r: r != GENERATOR):
    named = weights_by_role[role]
    if role not in have:
      problems.append(f"{source} has a {role} but this model has none")
      continue
    slots = role_slots(model, role)
    missing = [s.name for s in slots if s.name not in named]
    shapes = [f"{s.name} {tuple(named[s.name].shape)} vs "
              f"{tuple(s.variable.shape)}" for s in slots
              if s.name in named and
              tuple(named[s.name].shape) != tuple(s.variable.shape)]
    used = {s.name for s in slots}
    extra = sorted(n for n in named if n not in used)
    for what, names in (("missing", missing), ("shape (source vs model)",
                                                shapes), ("unused", extra)):
      if names:
        problems.append(f"{role} {what}: {_few(names)}")
    plan += [(s, named[s.name]) for s in slots if s.name in named]
  if problems:
    raise UserError(f"{source} does not match the model: "
                    + "; ".join(problems))
  seen = {}
  for slot, value in plan:
    key = id(slot.variable)
    if key in seen and not np.allclose(seen[key], value, atol=1e-6):
      # Weights this model ties (cross-layer or embedding sharing) differ
      # in the source: taking one silently would change the network.
      raise UserError(f"{source}: {slot.name} differs from a weight this "
                      "model shares it with (its weight_sharing or "
                      "cross_layer_sharing does not match the source)")
    seen[key] = value
    slot.assign(value)


def _few(names, n=4):
  more = f" (+{len(names) - n} more)" if len(names) > n else ""
  return ", ".join(names[:n]) + more
