"""Where a pretrained model comes from, whatever its format:
  ours   a pretraining run (model_dir with pretrain_config.json + checkpoint)
  savedmodel  export_model.py's SavedModel (the network it serves)
  hf     a transformers ELECTRA directory (config.json + model.safetensors),
         or the discriminator/ + generator/ pair export_model.py writes
  tf1    a checkpoint of the original TF1 ELECTRA release
  keras  a .keras archive of a discriminator (export_model.py)
  keras_hub  a KerasHub ElectraBackbone preset (export_model.py's, with our
         heads and generator beside it, or KerasHub's own: an encoder)
  finetuned  a fine-tuned model run_finetuning.py kept (loading/finetuned.py):
         its encoder, as a discriminator without a head
  npz    .npz shards + weights.json (interop/npz_weights.py), as the
         TensorFlow-free JAX driver writes them (pretrain/jax_trainer.py)
Each gives a PretrainingConfig that describes its architecture and the
weights under our names (interop/weights.py), so fine-tuning, scoring and
run_pretraining.py --init-checkpoint treat them alike. find_pretrained
gives any of them as a Pretrained (loading/runs.py), which restore_model
restores. The formats themselves are interop/'s.
"""

import dataclasses
import json
import os

import numpy as np

from pretrain.config import PretrainingConfig
from interop import hf
from interop import keras_hub
from interop import npz_weights
from interop import tf1
from interop.keras_archive import load_keras
from interop.savedmodel import read_weights
from interop.weights import CLOZE
from interop.weights import DISCRIMINATOR
from interop.weights import GENERATOR
from interop.weights import export_weights
from loading import finetuned
from loading import runs
from pretrain.run_config import CONFIG_FILE
from pretrain.run_config import config_from_json
from util import storage
from util.errors import UserError
from util.tf_quiet import import_tensorflow


@dataclasses.dataclass
class Source:
  kind: str
  path: str
  config: object  # PretrainingConfig (resolved)
  _weights: object  # () -> {role: {name: array}}

  def weights(self):
    return self._weights()


def find_pretrained(path):
  """The pretrained model at `path`: one of our runs (a model_dir or a
  checkpoint prefix inside one), or any format open_source reads."""
  if not path:
    raise UserError("no pretrained model: pass --init-checkpoint or "
                    "--data-dir and --model-name")
  # An .npz weights folder (the JAX pretraining driver's) may hold a
  # pretrain_config.json too: it is read as npz, not as a TensorFlow run.
  if runs.is_our_run(path) and not npz_weights.is_npz_weights(path):
    return runs.find_run(path)
  source = open_source(path)
  return runs.Pretrained(source.config, source.path, path, source)


def open_source(path):
  """The Source at `path`; one clear error when it is none of the kinds.
  Its `path` is where the weights are (a checkpoint prefix for ours and
  the TF1 release's)."""
  if not path:
    raise UserError("no pretrained model given")
  if npz_weights.is_npz_weights(path):
    return _npz_source(path)
  if runs.is_our_run(path):
    return _our_source(path)
  if path.endswith(".keras"):
    return _keras_source(path)
  if finetuned.is_finetuned(path):
    return _finetuned_source(path)
  if storage.isdir(path):
    if keras_hub.is_preset(path):  # its config.json is not transformers'
      return _keras_hub_source(path)
    if hf.network_dirs(path):
      return _hf_source(path)
    if storage.exists(os.path.join(path, "saved_model.pb")):
      return _savedmodel_source(path)
    prefix = runs.latest_checkpoint(path)
  else:
    prefix = path
  if prefix and storage.exists(prefix + ".index"):
    shapes, reader = tf1.read(prefix)
    if tf1.is_tf1_checkpoint(shapes):
      return _tf1_source(prefix, shapes, reader)
    raise UserError(f"{prefix}: a checkpoint with neither our "
                    f"{CONFIG_FILE} beside it nor the original "
                    "ELECTRA release's variable names")
  raise UserError(f"no checkpoint found at {path}: expected a pretraining "
                  "run, a transformers ELECTRA directory, an original "
                  "ELECTRA checkpoint, a KerasHub preset, a .keras "
                  "archive or a fine-tuned model")


# ---------------------------------------------------------------- kinds
def _our_source(path):
  pretrained = runs.find_run(path)

  def weights():
    model = runs.restore_model(pretrained)
    return {role: export_weights(model, role) for role in model.networks()}
  return Source("ours", pretrained.checkpoint, pretrained.config, weights)


def _npz_source(path):
  manifest = npz_weights.read_manifest(path)
  pretrain_config = config_from_json(
      json.dumps(manifest.get("pretrain_config") or {}),
      os.path.join(path, npz_weights.MANIFEST))
  return Source("npz", path, pretrain_config,
                lambda: npz_weights.read(path)[1])


def _hf_source(path):
  dirs = hf.network_dirs(path)
  loaded = {role: hf.load(d) for role, d in dirs.items()}
  fields = {role: f for role, (_, f) in loaded.items()}
  named = {role: w for role, (w, _) in loaded.items()}
  main_dir = dirs.get(DISCRIMINATOR) or dirs[GENERATOR]
  vocab = os.path.join(main_dir, "vocab.txt")
  lower = True
  tokenizer_config = os.path.join(main_dir, "tokenizer_config.json")
  if os.path.isfile(tokenizer_config):
    with open(tokenizer_config) as f:
      lower = json.load(f).get("do_lower_case", True)
  pretrain_config = architecture_config(
      fields, _shared_embeddings(named),
      vocab if os.path.isfile(vocab) else "", lower)
  return Source("hf", path, pretrain_config, lambda: named)


def _keras_hub_source(path):
  named, fields, vocab, lower = keras_hub.load_preset(path)
  pretrain_config = architecture_config(fields, _shared_embeddings(named),
                                        vocab, lower)
  return Source("keras_hub", path, pretrain_config, lambda: named)


def _tf1_source(prefix, shapes, reader):
  named = tf1.role_weights(shapes, reader)
  fields = {role: tf1.architecture(w) for role, w in named.items()
            if role != CLOZE}
  if CLOZE in named:  # the generator's sizes are a tower's
    tower = {n[len("l2r."):]: w for n, w in named[CLOZE].items()
             if n.startswith("l2r.")}
    tower.update((n, w) for n, w in named[DISCRIMINATOR].items()
                 if n.startswith("electra.embeddings."))
    fields[GENERATOR] = tf1.architecture(tower)
  shared = not any(n.startswith("generator/embeddings/") for n in shapes)
  vocab = os.path.join(os.path.dirname(prefix), "vocab.txt")
  pretrain_config = architecture_config(
      fields, shared, vocab if storage.exists(vocab) else "", True,
      two_tower=CLOZE in named)
  return Source("tf1", prefix, pretrain_config, lambda: named)


def _keras_source(path):
  model = load_keras(path)  # one clear error when there is none
  fields = {DISCRIMINATOR: dataclasses.asdict(model.config)}
  named = {DISCRIMINATOR: export_weights(model, DISCRIMINATOR)}
  pretrain_config = architecture_config(fields, False, "", True)
  return Source("keras", path, pretrain_config, lambda: named)


def _finetuned_source(path):
  """The encoder of a fine-tuned model (its heads are fine-tuning's:
  finetune/model.py reads them from loading/finetuned.py itself)."""
  model = finetuned.load(path)
  pretrain_config = architecture_config(
      {DISCRIMINATOR: dataclasses.asdict(model.model_config)}, False,
      model.vocab_file, model.pretrain_config.do_lower_case)
  return Source("finetuned", path, pretrain_config,
                lambda: {DISCRIMINATOR: model.encoder_weights()})


def _savedmodel_source(path):
  tf = import_tensorflow(with_text=True)
  loaded = tf.saved_model.load(path)
  if not hasattr(loaded, "weight_map"):
    raise UserError(f"{path}: a SavedModel not written by export_model.py")
  pretrain_config = config_from_json(loaded.pretrain_config.numpy().decode())
  assets = os.path.join(path, "assets")
  vocab = [os.path.join(assets, n) for n in sorted(storage.listdir(assets))
           ] if storage.isdir(assets) else []
  pretrain_config.vocab_file = vocab[0] if vocab else ""  # the copy export made
  named = read_weights(loaded)
  return Source("savedmodel", path, pretrain_config, lambda: named)


def _shared_embeddings(named):
  """Whether the generator's embedding tables are the discriminator's."""
  if len(named) < 2:
    return False
  disc, gen = named[DISCRIMINATOR], named[GENERATOR]
  keys = [k for k in disc if k.startswith("electra.embeddings.")]
  return all(k in gen and np.array_equal(disc[k], gen[k]) for k in keys)


def architecture_config(fields, shared_embeddings, vocab_file, do_lower_case,
                        two_tower=False):
  """A PretrainingConfig with the architecture of networks whose
  TransformerConfig fields are `fields` {role: {...}}: an ELECTRA model
  when there is a discriminator (its generator's size as multipliers),
  else a masked LM; two_tower: Electric, the generator a tower (the
  release's electric_objective; its ablation ELECTRA-TT saves the same
  variables)."""
  disc, gen = fields.get(DISCRIMINATOR), fields.get(GENERATOR)
  main = disc or gen
  values = dict(
      model_size="base", vocab_size=int(main["vocab_size"]),
      model_hparam_overrides={k: v for k, v in main.items()
                              if k != "vocab_size"},
      vocab_file=vocab_file, do_lower_case=do_lower_case,
      max_seq_length=min(512, int(main["max_position_embeddings"])))
  if disc is None:
    values["objective"] = "mlm"
  elif gen is not None:
    if gen["embedding_size"] != disc["embedding_size"]:
      raise UserError("the generator's embedding size differs from the "
                      "discriminator's, which this codebase cannot build")
    values.update(
        generator_hidden_size=gen["hidden_size"] / disc["hidden_size"],
        generator_ffn_size=(gen["intermediate_size"] /
                            disc["intermediate_size"]),
        generator_heads=(gen["num_attention_heads"] /
                         disc["num_attention_heads"]),
        generator_layers=(gen["num_hidden_layers"] /
                          disc["num_hidden_layers"]),
        weight_sharing="embeddings" if shared_embeddings else "none")
  if two_tower:
    values.update(objective="electric", two_tower_generator=True)
  pretrain_config = PretrainingConfig(**values)
  pretrain_config.resolve()
  return pretrain_config
