"""Checkpoints of the original TF1 ELECTRA release, read into our names.

Its layout (BERT's modeling.py): the discriminator under `electra/`, the
generator's encoder under `generator/` (sharing `electra/embeddings` unless
it has `generator/embeddings` of its own), heads under
`discriminator_predictions/` (dense, dense_1) and `generator_predictions/`
(dense, LayerNorm, output_bias). A BERT-objective run has no `generator/`:
its masked LM is `electra/` + `generator_predictions/`. Electric's
two-tower cloze generator (its `electric_objective`) is `generator_ltr/`
and `generator_rtl/` (their embeddings `electra/embeddings`) and
`cloze_predictions/` (dense, LayerNorm, output_bias).
"""

import re

import numpy as np

from interop.weights import CLOZE
from interop.weights import DISCRIMINATOR
from interop.weights import GENERATOR
from interop.weights import model_roles
from interop.weights import role_slots
from util.errors import UserError

WORD_TABLE = "electra/embeddings/word_embeddings"


def is_tf1_checkpoint(names):
  return WORD_TABLE in names


def read(path):
  """(shapes {name: shape}, reader) of a TF checkpoint prefix."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    reader = tf.train.load_checkpoint(path)
  except (tf.errors.OpError, ValueError) as e:
    raise UserError(f"cannot read checkpoint {path}: "
                    f"{str(e).splitlines()[0][:200]}") from None
  return reader.get_variable_to_shape_map(), reader


def _is_state(name):
  # Optimizer slots and counters are not weights.
  return (name.endswith(("/adam_m", "/adam_v")) or
          name.split("/")[-1] in ("global_step", "temperature"))


def role_weights(shapes, reader):
  """{role: {our name: array}} of every weight in the checkpoint; a name
  this layout does not know is kept (under the discriminator) so the
  strict import reports it."""
  names = {n for n in shapes if not _is_state(n)}
  own_gen_embeddings = any(n.startswith("generator/embeddings/")
                           for n in names)
  has_gen_encoder = any(n.startswith("generator/encoder/") for n in names)
  roles = {}
  if "discriminator_predictions/dense/kernel" in names or has_gen_encoder:
    roles[DISCRIMINATOR] = "electra"
  if "generator_predictions/output_bias" in names:
    roles[GENERATOR] = "generator" if has_gen_encoder else "electra"
  out, used = {}, set()
  cloze = {_cloze_name(n): reader.get_tensor(n) for n in names
           if n.startswith(CLOZE_SCOPES)}
  if cloze:
    out[CLOZE] = cloze
    used.update(n for n in names if n.startswith(CLOZE_SCOPES))
  for role, scope in roles.items():
    named = {}
    for name in names:
      ours = _our_name(name, role, scope, own_gen_embeddings)
      if ours is not None:
        named[ours] = reader.get_tensor(name)
        used.add(name)
    out[role] = named
  for name in sorted(names - used):
    out.setdefault(DISCRIMINATOR, {})[f"(tf1) {name}"] = reader.get_tensor(
        name)
  return out


def _our_name(name, role, scope, own_gen_embeddings):
  """The release's name -> ours in `role`, or None if not that role's."""
  if role == DISCRIMINATOR:
    if name.startswith("electra/"):
      return _inverse(name, "electra")
    if name.startswith("discriminator_predictions/"):
      return _inverse(name, "electra")
    return None
  if name.startswith("generator_predictions/"):
    return _inverse(name, scope)
  embeddings_scope = "generator" if own_gen_embeddings else "electra"
  if name.startswith(f"{embeddings_scope}/embeddings/"):
    return _inverse(name.replace(embeddings_scope, scope, 1), scope)
  if name.startswith(scope + "/") and not name.startswith(
      f"{scope}/embeddings/"):
    return _inverse(name, scope)
  return None


def _inverse(name, scope):
  name = re.sub(r"^" + scope + "/", "electra.", name)
  name = re.sub(r"encoder/layer_(\d+)/", r"encoder.layer.\1.", name)
  name = name.replace("LayerNorm/gamma", "LayerNorm.weight")
  name = name.replace("LayerNorm/beta", "LayerNorm.bias")
  name = re.sub(r"_embeddings$", "_embeddings.weight", name)
  name = re.sub(r"/kernel$", ".weight", name)
  name = name.replace("dense_1", "dense_prediction")
  name = name.replace("generator_predictions/output_bias",
                      "generator_lm_head.bias")
  return name.replace("/", ".")


CLOZE_SCOPES = ("generator_ltr/", "generator_rtl/", "cloze_predictions/")
TOWERS = {"l2r": "generator_ltr", "r2l": "generator_rtl"}


def _cloze_name(name):
  """The release's two-tower name -> ours (interop/weights.py CLOZE)."""
  for ours, scope in TOWERS.items():
    if name.startswith(scope + "/"):
      return f"{ours}." + _inverse(name, scope)
  return _inverse(name.replace("cloze_predictions/", "generator_predictions/"),
                  "electra").replace("generator_", "cloze_")


def _release_cloze_name(ours):
  tower, _, rest = ours.partition(".")
  if tower in TOWERS:
    return release_name(rest, TOWERS[tower])
  return release_name(ours.replace("cloze_", "generator_"), "electra").replace(
      "generator_predictions/", "cloze_predictions/")


def release_name(ours, scope):
  """Our name (interop/weights.py) -> the release's under `scope`; the
  inverse of _inverse."""
  name = ours.replace("generator_lm_head.bias",
                      "generator_predictions/output_bias")
  name = re.sub(r"^electra\.", scope + ".", name)
  name = name.replace("dense_prediction", "dense_1")
  name = re.sub(r"LayerNorm\.weight$", "LayerNorm.gamma", name)
  name = re.sub(r"LayerNorm\.bias$", "LayerNorm.beta", name)
  name = re.sub(r"_embeddings\.weight$", "_embeddings", name)
  name = re.sub(r"\.weight$", ".kernel", name)
  name = re.sub(r"encoder\.layer\.(\d+)\.", r"encoder.layer_\1.", name)
  return name.replace(".", "/")


def release_weights(model):
  """{the release's name: float32 array} of a pretraining model's networks
  in its layout (this module's docstring), which role_weights reads back.
  A generator beside a discriminator is `generator/`, sharing
  `electra/embeddings` when ours shares them (the release's default)."""
  roles = model_roles(model)
  cloze = ({_release_cloze_name(s.name): s.value()
            for s in role_slots(model, CLOZE)} if CLOZE in roles else {})
  if DISCRIMINATOR not in roles:  # BERT, SCRIPT: the masked LM is electra/
    return {release_name(s.name, "electra"): s.value()
            for s in role_slots(model, GENERATOR)}
  disc = role_slots(model, DISCRIMINATOR)
  out = dict({release_name(s.name, "electra"): s.value() for s in disc},
             **cloze)
  if GENERATOR not in roles:
    return out
  tables = {s.name: s for s in disc
            if s.name.startswith("electra.embeddings.")}
  gen = role_slots(model, GENERATOR)
  shared = [s.name in tables and s.variable is tables[s.name].variable
            and s.offset is None for s in gen
            if s.name.startswith("electra.embeddings.")]
  if any(shared) and not all(shared):
    raise UserError("this model's generator shares some embedding weights "
                    "with the discriminator and not others: the release's "
                    "layout cannot hold that")
  for s in gen:
    if s.name.startswith("electra.embeddings.") and all(shared):
      continue  # electra/embeddings, already written
    out[release_name(s.name, "generator")] = s.value()
  return out


def write_checkpoint(prefix, values, global_step=None):
  """Saves {name: array} as the release's tf.compat.v1 Saver does: `prefix`
  .index/.data plus the folder's `checkpoint` file; int64 `global_step`
  when given."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  graph = tf.Graph()
  with graph.as_default():
    variables = {name: tf.compat.v1.get_variable(
        name, initializer=tf.constant(np.asarray(value)), use_resource=False)
                 for name, value in values.items()}
    if global_step is not None:
      variables["global_step"] = tf.compat.v1.get_variable(
          "global_step", initializer=tf.constant(global_step, tf.int64),
          use_resource=False)
    # Relative: the folder may move (the export's staging folder does).
    saver = tf.compat.v1.train.Saver(var_list=variables,
                                     save_relative_paths=True)
    with tf.compat.v1.Session(graph=graph) as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      saver.save(sess, prefix, write_meta_graph=False)


def architecture(named):
  """TransformerConfig fields of one network from its weights' shapes.
  Head count: the release's head size is 64 at every size (Table 5.1);
  model_hparam_overrides can say otherwise."""
  v, e = named["electra.embeddings.word_embeddings.weight"].shape
  layers = {int(m.group(1)) for n in named
            for m in [re.match(r"electra\.encoder\.layer\.(\d+)\.", n)] if m}
  if not layers:
    raise UserError("the checkpoint's encoder has no layers")
  h = named["electra.encoder.layer.0.attention.self.query.weight"].shape[1]
  f = named["electra.encoder.layer.0.intermediate.dense.weight"].shape[1]
  return dict(
      vocab_size=int(v), embedding_size=int(e), hidden_size=int(h),
      intermediate_size=int(f), num_hidden_layers=max(layers) + 1,
      num_attention_heads=max(1, int(h) // 64),
      max_position_embeddings=int(
          named["electra.embeddings.position_embeddings.weight"].shape[0]),
      type_vocab_size=int(
          named["electra.embeddings.token_type_embeddings.weight"].shape[0]),
      # The release's model/modeling.py gelu is the exact erf form
      # (BERT's was the tanh one); tests/reference/gelu.json.
      hidden_act="gelu")
