"""KerasHub presets: a directory that `keras_hub.models.ElectraBackbone.
from_preset(path)` loads (config.json, model.weights.h5, metadata.json;
tokenizer.json and assets/tokenizer/vocabulary.txt for
`keras_hub.models.ElectraTokenizer.from_preset(path)`).

The backbone is one encoder (the discriminator's; a masked LM's own when
there is none). What KerasHub has no place for, the heads and the other
network, goes beside it in electra_pretraining.safetensors (weights under
interop/weights.py's names, "<role>/<name>") with electra_pretraining.json
(each network's TransformerConfig), which KerasHub ignores and which make
the preset a whole pretraining model again as --init-checkpoint. A preset
KerasHub itself made has its encoder only: enough to fine-tune.

KerasHub's ElectraBackbone always uses the tanh GELU (the TF1 release
uses the exact one). The export checks the preset against our encoder
computed with that same GELU (float32 rounding, or a weight is misplaced);
for a model with the exact GELU ("gelu", our default) it also reports how
far the tanh form moves the outputs, which no preset can avoid. ELECTRA
has no pooler: pooled_dense is written as the identity (pooled_output =
tanh(sequence_output[:, 0])) and ignored on import.
Needs the `keras-hub` package (pip install keras-hub); never downloads.
"""

import dataclasses
import json
import os

import keras
import numpy as np

from interop.weights import DISCRIMINATOR
from interop.weights import export_weights
from interop.weights import GENERATOR
from model.encoder import Encoder
from util import storage
from util.errors import UserError

SIDECAR = "electra_pretraining.json"
EXTRA_WEIGHTS = "electra_pretraining.safetensors"
BACKBONE_CLASS = "ElectraBackbone"
# What KerasHub's TransformerEncoder computes; other settings cannot be
# represented and are refused at export.
LAYER_NORM_EPS = 1e-12
ACTIVATIONS = ("gelu_approx", "gelu_new", "gelu")


def _keras_hub():
  try:
    import keras_hub  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise UserError("KerasHub presets need the keras-hub package: pip "
                    "install keras-hub") from None
  return keras_hub


# ------------------------------------------------------------ naming
def weight_map(num_layers):
  """{our name (interop/weights.py): KerasHub weight path}."""
  e = "electra.embeddings."
  names = {
      e + "word_embeddings.weight": "token_embedding/embeddings",
      e + "position_embeddings.weight": "position_embedding/embeddings",
      e + "token_type_embeddings.weight": "segment_embedding/embeddings",
      e + "LayerNorm.weight": "embeddings_layer_norm/gamma",
      e + "LayerNorm.bias": "embeddings_layer_norm/beta",
      "electra.embeddings_project.weight": "embeddings_projection/kernel",
      "electra.embeddings_project.bias": "embeddings_projection/bias",
  }
  parts = {"attention.self.query": "self_attention_layer/query",
           "attention.self.key": "self_attention_layer/key",
           "attention.self.value": "self_attention_layer/value",
           "attention.output.dense": "self_attention_layer/attention_output",
           "attention.output.LayerNorm": "self_attention_layer_norm",
           "intermediate.dense": "feedforward_intermediate_dense",
           "output.dense": "feedforward_output_dense",
           "output.LayerNorm": "feedforward_layer_norm"}
  for i in range(num_layers):
    for ours, theirs in parts.items():
      norm = ours.endswith("LayerNorm")
      for suffix, var in (("weight", "gamma" if norm else "kernel"),
                          ("bias", "beta" if norm else "bias")):
        names[f"electra.encoder.layer.{i}.{ours}.{suffix}"] = (
            f"transformer_layer_{i}/{theirs}/{var}")
  return names


def _variables(backbone):
  return {v.path.split("/", 1)[1] if v.path.startswith(backbone.name + "/")
          else v.path: v for v in backbone.weights}


# ------------------------------------------------------------ export
def export_preset(model, tokenizer, vocab_file, output_dir, log=print):
  """Writes `model` (a pretraining model) as a KerasHub preset; returns
  (mapped, activation): the largest difference on a probe batch between
  the preset loaded back with from_preset and our encoder computed with
  KerasHub's tanh GELU, and between that and our encoder as trained (0
  for a tanh-GELU model)."""
  kh = _keras_hub()
  found = model.networks()
  if not found:
    raise UserError("this model has no encoder KerasHub's ElectraBackbone "
                    "can hold")
  role = DISCRIMINATOR if DISCRIMINATOR in found else GENERATOR
  encoder = found[role][0]
  model_config = encoder.config
  if model_config.hidden_act not in ACTIVATIONS:
    raise UserError(f"KerasHub's ElectraBackbone uses the GELU; this "
                    f"model's activation is {model_config.hidden_act}")
  if model_config.layer_norm_eps != LAYER_NORM_EPS:
    raise UserError(
        f"KerasHub's ElectraBackbone uses layer_norm_eps "
        f"{LAYER_NORM_EPS:g}; this model's is {model_config.layer_norm_eps:g}")
  backbone = kh.models.ElectraBackbone(
      vocab_size=model_config.vocab_size,
      num_layers=model_config.num_hidden_layers,
      num_heads=model_config.num_attention_heads,
      hidden_dim=model_config.hidden_size,
      embedding_dim=model_config.embedding_size,
      intermediate_dim=model_config.intermediate_size,
      dropout=model_config.hidden_dropout_prob,
      max_sequence_length=model_config.max_position_embeddings,
      num_segments=model_config.type_vocab_size,
      dtype="float32")
  weights = {r: export_weights(model, r) for r in found}
  names = weight_map(model_config.num_hidden_layers)
  variables = _variables(backbone)
  used = set()
  for name, value in weights[role].items():
    if name in names:
      target = variables[names[name]]
      target.assign(value.reshape(tuple(target.shape)))
      used.add(name)
  pooled = variables["pooled_dense/kernel"]
  pooled.assign(np.eye(*pooled.shape, dtype=np.float32))
  variables["pooled_dense/bias"].assign(
      np.zeros(variables["pooled_dense/bias"].shape, np.float32))
  backbone.save_to_preset(output_dir)
  if vocab_file.endswith(".txt"):
    try:
      kh.models.ElectraTokenizer(
          vocabulary=vocab_file, lowercase=tokenizer.do_lower_case,
          strip_accents=tokenizer.strip_accents).save_to_preset(output_dir)
    except ValueError as e:  # e.g. a vocabulary without [CLS]/[SEP]
      raise UserError(f"KerasHub's ElectraTokenizer cannot take "
                      f"{vocab_file}: {str(e).splitlines()[0]}") from None
  else:
    log(f"note: {os.path.basename(vocab_file)} is a SentencePiece model, "
        "which KerasHub's ElectraTokenizer (WordPiece) cannot hold; the "
        "preset has no tokenizer")
  _write_extras(output_dir, role, found, weights, used)
  return _check(encoder, output_dir, kh)


def _write_extras(output_dir, role, found, weights, used):
  from safetensors.numpy import save  # pylint: disable=g-import-not-at-top
  extra = {f"{r}/{n}": np.ascontiguousarray(a) for r, named in weights.items()
           for n, a in named.items() if not (r == role and n in used)}
  if extra:  # bytes, written with open(): the file gets the usual mode
    with open(os.path.join(output_dir, EXTRA_WEIGHTS), "wb") as f:
      f.write(save(extra))
  sidecar = {"format": 1, "backbone": role,
             "networks": {r: dataclasses.asdict(enc.config)
                          for r, (enc, _) in found.items()}}
  with open(os.path.join(output_dir, SIDECAR), "w") as f:
    json.dump(sidecar, f, indent=2, sort_keys=True)


def probe_batch(vocab_size, length=16, rows=3):
  """Random ids [rows, length], rows after the first half padding."""
  rng = np.random.RandomState(0)
  ids = rng.randint(1, vocab_size, size=(rows, length)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1:, length // 2:] = 0
  return ids * mask, mask, np.zeros_like(ids)


def sequence_output(backbone, ids, mask, segments):
  out = backbone({"token_ids": ids, "padding_mask": mask,
                  "segment_ids": segments}, training=False)
  return np.asarray(out["sequence_output"], np.float32)


def _check(encoder, output_dir, kh):
  """The preset, loaded back as KerasHub loads it, against our encoder:
  (vs our encoder with the tanh GELU, tanh GELU vs the model's own)."""
  loaded = kh.models.ElectraBackbone.from_preset(output_dir)
  length = min(16, encoder.config.max_position_embeddings)
  ids, mask, segments = probe_batch(encoder.config.vocab_size, length)
  theirs = sequence_output(loaded, ids, mask, segments)
  ours = np.asarray(encoder(ids, mask, segments, training=False), np.float32)
  tanh_gelu = ours
  if encoder.config.hidden_act == "gelu":
    twin = _tanh_gelu_twin(encoder)
    tanh_gelu = np.asarray(twin(ids, mask, segments, training=False),
                           np.float32)
  real = mask > 0
  return (float(np.max(np.abs(theirs[real] - tanh_gelu[real]))),
          float(np.max(np.abs(tanh_gelu[real] - ours[real]))))


def _tanh_gelu_twin(encoder):
  """`encoder` with the tanh GELU: its weights, KerasHub's activation."""
  config = dataclasses.replace(encoder.config, hidden_act="gelu_approx")
  twin = Encoder(config, embeddings=encoder.embeddings, causal=encoder.causal,
                 dtype=encoder.dtype_policy)
  twin.build((None, None))
  parts = [(twin.transformer_layers, encoder.transformer_layers)]
  if encoder.embeddings_project is not None:
    parts.append(([twin.embeddings_project], [encoder.embeddings_project]))
  for mine, theirs in parts:
    for a, b in zip(mine, theirs):
      a.set_weights(b.get_weights())
  return twin


# ------------------------------------------------------------ import
def is_preset(path):
  """A directory whose config.json names a KerasHub class."""
  config = os.path.join(path, "config.json")
  if not (storage.isdir(path) and storage.exists(config)):
    return False
  try:
    data = json.loads(storage.read_text(config))
  except (ValueError, UnicodeDecodeError, OSError):
    return False
  return isinstance(data, dict) and (
      str(data.get("registered_name", "")).startswith("keras_hub>") or
      str(data.get("module", "")).startswith("keras_hub."))


def load_preset(path):
  """({role: {name: array}}, {role: TransformerConfig fields}, vocab file,
  do_lower_case) of a KerasHub ELECTRA preset."""
  kh = _keras_hub()
  config = json.loads(storage.read_text(os.path.join(path, "config.json")))
  name = config.get("class_name", "")
  if name != BACKBONE_CLASS:
    raise UserError(f"{path} is a KerasHub {name or 'preset'}, not an "
                    f"{BACKBONE_CLASS}")
  try:
    backbone = kh.models.ElectraBackbone.from_preset(path, dtype="float32")
  except (ValueError, OSError, KeyError) as e:
    raise UserError(f"KerasHub cannot load {path}: "
                    f"{str(e).strip().splitlines()[0][:200]}") from None
  variables = _variables(backbone)
  sidecar = _read_sidecar(path)
  role = sidecar.get("backbone", DISCRIMINATOR)
  # KerasHub's shapes back to ours: [H, heads, head] -> [H, H] and so on.
  named = {ours: _ours_shape(ours, np.asarray(
      keras.ops.convert_to_numpy(variables[theirs]), np.float32))
           for ours, theirs in weight_map(backbone.num_layers).items()
           if theirs in variables}
  weights = {role: named}
  extra = os.path.join(path, EXTRA_WEIGHTS)
  if storage.exists(extra):
    from safetensors.numpy import load_file  # pylint: disable=g-import-not-at-top
    for key, array in load_file(extra).items():
      r, n = key.split("/", 1)
      weights.setdefault(r, {})[n] = array
  fields = {role: dict(
      vocab_size=backbone.vocab_size, hidden_size=backbone.hidden_dim,
      num_hidden_layers=backbone.num_layers,
      num_attention_heads=backbone.num_heads,
      intermediate_size=backbone.intermediate_dim,
      embedding_size=backbone.embedding_dim,
      max_position_embeddings=backbone.max_sequence_length,
      type_vocab_size=backbone.num_segments, hidden_act="gelu_approx",
      layer_norm_eps=LAYER_NORM_EPS, hidden_dropout_prob=backbone.dropout,
      attention_probs_dropout_prob=backbone.dropout)}
  # What this codebase wrote beside it: the activation the model was
  # trained with, its other network.
  for r, saved in sidecar.get("networks", {}).items():
    fields[r] = dict(fields.get(r, {}), **saved) if r != role else dict(
        fields[r], hidden_act=saved.get("hidden_act", "gelu_approx"),
        share_layers=saved.get("share_layers", False))
  vocab, lower = "", True
  tokenizer_config = os.path.join(path, "tokenizer.json")
  if storage.exists(tokenizer_config):
    t = json.loads(storage.read_text(tokenizer_config)).get("config", {})
    lower = bool(t.get("lowercase", False))
    candidate = os.path.join(path, "assets", "tokenizer", "vocabulary.txt")
    vocab = candidate if storage.exists(candidate) else ""
  return weights, fields, vocab, lower


def _ours_shape(name, array):
  if array.ndim == 3 and ".attention.output.dense." in name:
    return array.reshape(array.shape[0] * array.shape[1], array.shape[2])
  if array.ndim == 3:  # query/key/value kernels
    return array.reshape(array.shape[0], array.shape[1] * array.shape[2])
  if array.ndim == 2 and name.endswith(".bias"):  # query/key/value biases
    return array.reshape(-1)
  return array


def _read_sidecar(path):
  sidecar = os.path.join(path, SIDECAR)
  if not storage.exists(sidecar):
    return {}
  try:
    data = json.loads(storage.read_text(sidecar))
  except (ValueError, UnicodeDecodeError) as e:
    raise UserError(f"{sidecar} is not valid JSON: {e}") from None
  if not isinstance(data, dict):
    raise UserError(f"{sidecar} is not a JSON object")
  return data
