"""A run as a self-contained TensorFlow SavedModel, for serving.

Signatures (`saved_model_cli show --dir D --all` lists them):
  serving_default  input_ids, input_mask, segment_ids: int32 [B, T] ->
      hidden_states [B, T, H] (the discriminator's encoder, or the one
      encoder of mlm / SCRIPT), and by objective
        ELECTRA, Electric, SCRIPT: logits [B, T], the binary "replaced"
            logit (Electric: the energy E(x)_t), and token_scores [B, T],
            log p(the token is original) (Electric: -E(x)_t), 0 at padding;
        mlm, SCRIPT, Replace/All-Tokens MLM: mlm_logits [B, T, vocab].
  serve_text  text: string [B] -> the same outputs, plus input_ids and
      input_mask (the text tokenized in the graph as the run's tokenizer
      does, with [CLS] ... [SEP], cut to max_seq_length, padded) and, where
      there are token_scores, sentence_score [B]: their sum over the text's
      tokens ([CLS], [SEP] and padding left out), a one-pass PLL.
The vocabulary is in the graph (the tokenizer's constants) and copied as
an asset (`loaded.vocab_file.asset_path`). Loading needs tensorflow and
tensorflow_text (imported first, for its ops), none of this code.
"""

import dataclasses
import json

from keras import ops

from interop.weights import networks
from interop.weights import role_slots
from util.errors import UserError
from util.tf_quiet import import_tensorflow

IDS_SIGNATURE = "serving_default"
TEXT_SIGNATURE = "serve_text"


def _weight_map(model, variables):
  """{role: {name: [index, offset index or -1]}} for the networks whose
  variables the SavedModel holds."""
  index = {id(v): i for i, v in enumerate(variables)}
  out = {}
  for role in networks(model):
    slots = role_slots(model, role)
    if all(id(s.variable) in index for s in slots):
      out[role] = {s.name: [index[id(s.variable)],
                            index.get(id(s.offset), -1)] for s in slots}
  return out


def read_weights(loaded):
  """{role: {name: array}} of a SavedModel written here, loaded."""
  variables = [v.numpy() for v in loaded.model_variables]
  return {role: {name: variables[i] + (variables[j] if j >= 0 else 0)
                 for name, (i, j) in named.items()}
          for role, named in json.loads(
              loaded.weight_map.numpy().decode()).items()}


def export_savedmodel(model, pretrain_config, tokenizer, vocab_file, output_dir,
                      max_seq_length=None):
  """Writes `model` (a restored pretraining model) to `output_dir` with the
  signatures above. tokenizer: the run's (util/tokenization.py), whose
  graph ops serve_text reuses; vocab_file: the file it was read from,
  copied into assets/ ('' leaves it out: the graph holds the vocabulary
  anyway); max_seq_length: where serve_text cuts (default: the run's)."""
  tf = import_tensorflow(with_text=True)
  # The objective's own: head(hidden, mask) gives its extra outputs.
  encoder, head, layers = model.export_head()
  max_len = max_seq_length or pretrain_config.max_seq_length
  if not 2 <= max_len <= encoder.config.max_position_embeddings:
    raise UserError(f"max_seq_length must be in [2, "
                    f"{encoder.config.max_position_embeddings}], got "
                    f"{max_len}")
  special = tokenizer.special_ids

  def outputs(input_ids, input_mask, segment_ids):
    tf.debugging.assert_less_equal(
        tf.shape(input_ids)[1], encoder.config.max_position_embeddings,
        "input_ids are longer than the model's max_position_embeddings")
    hidden = encoder(input_ids, input_mask, segment_ids, training=False)
    out = {"hidden_states": ops.cast(hidden, "float32")}
    out.update(head(hidden, ops.cast(input_mask, "float32")))
    return out

  ids_spec = lambda name: tf.TensorSpec([None, None], tf.int32, name)  # noqa

  @tf.function(input_signature=[ids_spec("input_ids"),
                                ids_spec("input_mask"),
                                ids_spec("segment_ids")])
  def serve_ids(input_ids, input_mask, segment_ids):
    return outputs(input_ids, input_mask, segment_ids)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, "text")])
  def serve_text(text):
    # The Python tokenizer's own graph ops, so the ids match its batches.
    tokens = tokenizer.tokenize_tensor(text)
    tokens = tokens[:, :max_len - 2]
    edge = tf.ones([tokens.nrows(), 1], tf.int32)
    ids = tf.concat([edge * special["cls"], tokens, edge * special["sep"]],
                    axis=1)
    input_ids = ids.to_tensor(default_value=special["pad"])
    input_mask = tf.ones_like(ids).to_tensor()
    out = outputs(input_ids, input_mask, tf.zeros_like(input_ids))
    out.update(input_ids=input_ids, input_mask=input_mask)
    if "token_scores" in out:  # the text's tokens only: no [CLS] / [SEP]
      text_mask = tf.concat([edge * 0, tf.ones_like(tokens), edge * 0],
                            axis=1).to_tensor()
      out["sentence_score"] = tf.reduce_sum(
          out["token_scores"] * tf.cast(text_mask, tf.float32), axis=1)
    return out

  module = tf.Module()
  # Every variable the functions read must be tracked to be saved; a set
  # of ids drops the ones two layers share (GDES, tied tables).
  seen, variables = set(), []
  for layer in layers:
    for v in layer.variables:
      if id(v) not in seen:
        seen.add(id(v))
        variables.append(v)
  module.model_variables = variables
  # So that --init-checkpoint can read it back: our name of each weight ->
  # its index in model_variables (plus a GDES table's shared part), and the
  # run's pretrain_config (interop/sources.py).
  # (String variables: a plain constant attribute is not saved.)
  module.weight_map = tf.Variable(json.dumps(_weight_map(model, variables)),
                                  trainable=False)
  module.pretrain_config = tf.Variable(
      json.dumps(dataclasses.asdict(pretrain_config)), trainable=False)
  module.text_tokenizer = tokenizer.tf_module
  if vocab_file:
    module.vocab_file = tf.saved_model.Asset(vocab_file)
  module.serve_ids, module.serve_text = serve_ids, serve_text
  tf.saved_model.save(module, output_dir, signatures={
      IDS_SIGNATURE: serve_ids.get_concrete_function(),
      TEXT_SIGNATURE: serve_text.get_concrete_function()})
