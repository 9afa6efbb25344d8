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
      tokens ([CLS], [SEP] and padding left out). Not run_scoring.py's
      PLL (for ELECTRA, log p(all original) by the discriminator, not
      log p(token | rest) over the vocabulary): named apart for that.
The vocabulary is in the graph (the tokenizer's constants) and copied as
an asset (`loaded.vocab_file.asset_path`). Loading needs tensorflow and
tensorflow_text (imported first, for its ops), none of this code.

A fine-tuned model's head exports the same way
(export_finetuned_savedmodel): a GLUE head's serve_text takes the raw text
(a pair task also text_b) and gives the label; a SQuAD head's takes the
question and the context and gives the answer
(interop/savedmodel_squad.py).
"""

import dataclasses
import json

from keras import ops

from interop.savedmodel_squad import SQUAD_KINDS
from interop.savedmodel_squad import squad_signatures
from interop.weights import role_slots
from util.errors import UserError
from util.tf_quiet import import_tensorflow

IDS_SIGNATURE = "serving_default"
TEXT_SIGNATURE = "serve_text"


def pack_text(tokenizer, max_len, text, text_b=None):
  """Graph ops: strings [B] (and a second segment's) -> int32 input_ids,
  input_mask, segment_ids [B, T] and text_mask (1 at the texts' tokens),
  as fine-tuning's featurization packs them: [CLS] a [SEP] (b [SEP]), cut
  to max_len (a pair longest first, as finetune/featurization.py's
  truncate_pair), padded to the batch's longest. The tokenizer's own graph
  ops, so the ids match its batches."""
  tf = import_tensorflow(with_text=True)
  special = tokenizer.special_ids
  a = tokenizer.tokenize_tensor(text)
  segments = [a]
  if text_b is None:
    segments = [a[:, :max_len - 2]]
  else:
    b = tokenizer.tokenize_tensor(text_b)
    keep_a, keep_b = truncated_lengths(a.row_lengths(), b.row_lengths(),
                                       max_len - 3)
    segments = [tf.RaggedTensor.from_tensor(x.to_tensor(), lengths=n)
                for x, n in ((a, keep_a), (b, keep_b))]
  edge = tf.ones([segments[0].nrows(), 1], tf.int32)
  parts, types, texts = [edge * special["cls"]], [edge * 0], [edge * 0]
  for i, tokens in enumerate(segments):
    parts += [tokens, edge * special["sep"]]
    types += [tf.ones_like(tokens) * i, edge * i]
    texts += [tf.ones_like(tokens), edge * 0]
  ids = tf.concat(parts, axis=1)
  return {"input_ids": ids.to_tensor(default_value=special["pad"]),
          "input_mask": tf.ones_like(ids).to_tensor(),
          "segment_ids": tf.concat(types, axis=1).to_tensor(),
          "text_mask": tf.concat(texts, axis=1).to_tensor()}


def truncated_lengths(len_a, len_b, budget):
  """How many tokens of a pair truncate_pair keeps (it drops tokens from
  the end of the longer one, b on a tie, until both fit), in closed form:
  a shorter one that fits with the longer cut to the rest stays whole;
  else a keeps ceil(budget / 2) and b floor(budget / 2)."""
  tf = import_tensorflow()
  len_a, len_b = (tf.cast(x, tf.int32) for x in (len_a, len_b))
  shorter = tf.minimum(len_a, len_b)
  half = tf.logical_and(len_a + len_b > budget, 2 * shorter > budget)
  cut = len_a + len_b > budget
  keep_a = tf.where(half, (budget + 1) // 2, tf.where(
      tf.logical_and(cut, len_a > len_b), budget - len_b, len_a))
  keep_b = tf.where(half, budget // 2, tf.where(
      tf.logical_and(cut, len_b >= len_a), budget - len_a, len_b))
  return keep_a, keep_b


def _weight_map(model, variables):
  """{role: {name: [index, offset index or -1]}} for the networks whose
  variables the SavedModel holds."""
  index = {id(v): i for i, v in enumerate(variables)}
  out = {}
  for role in model.networks():
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


def _check_length(encoder, max_len, least):
  """serve_text's cut: from `least` ([CLS] + [SEP]s) to the positions."""
  if not least <= max_len <= encoder.config.max_position_embeddings:
    raise UserError(f"max_seq_length must be in [{least}, "
                    f"{encoder.config.max_position_embeddings}], got "
                    f"{max_len}")
  return max_len


def _encode(tf, encoder, input_ids, input_mask, segment_ids):
  """The encoder's states, with a clear error for too-long inputs."""
  tf.debugging.assert_less_equal(
      tf.shape(input_ids)[1], encoder.config.max_position_embeddings,
      "input_ids are longer than the model's max_position_embeddings")
  return encoder(input_ids, input_mask, segment_ids, training=False)


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
  max_len = _check_length(encoder,
                          max_seq_length or pretrain_config.max_seq_length, 2)

  def outputs(input_ids, input_mask, segment_ids):
    hidden = _encode(tf, encoder, input_ids, input_mask, segment_ids)
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
    packed = pack_text(tokenizer, max_len, text)
    input_ids, input_mask = packed["input_ids"], packed["input_mask"]
    out = outputs(input_ids, input_mask, packed["segment_ids"])
    out.update(input_ids=input_ids, input_mask=input_mask)
    if "token_scores" in out:  # the text's tokens only: no [CLS] / [SEP]
      out["sentence_score"] = tf.reduce_sum(
          out["token_scores"] * tf.cast(packed["text_mask"], tf.float32),
          axis=1)
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


GLUE_KINDS = ("classification", "regression")
FINETUNED_KINDS = GLUE_KINDS + SQUAD_KINDS


def check_finetuned_kind(task_name, kind):
  """One UserError for a head no SavedModel signature serves."""
  if kind not in FINETUNED_KINDS:
    raise UserError(f"{task_name}: a SavedModel is written for GLUE "
                    f"classification and regression heads and SQuAD, not a "
                    f"{kind} head (nothing was written)")


def export_finetuned_savedmodel(encoder, head, task, info, tokenizer,
                                vocab_file, output_dir, max_seq_length,
                                metadata):
  """One head of a fine-tuned model as a SavedModel. encoder, head: its
  Keras layers; task: the fine-tuning task (its config has the SQuAD
  settings); info: the task's entry in the model's record (head kind,
  labels, text_pair); metadata: JSON-able, kept as `finetuned`.

  GLUE heads: serving_default (input_ids, input_mask, segment_ids) and
  serve_text (text, and text_b for a pair task: strings [B], tokenized
  and packed in the graph as fine-tuning does) -> classification: logits
  [B, n], probabilities [B, n], label_id [B] and label [B] (the label
  string); regression: score [B]. serve_text adds input_ids, input_mask
  and segment_ids.
  SQuAD heads: serve_text (question, context) -> answer [B] and more
  (interop/savedmodel_squad.py)."""
  tf = import_tensorflow(with_text=True)
  kind, labels = info["head"], info.get("labels")
  check_finetuned_kind(task.name, kind)
  if kind in SQUAD_KINDS:
    serve_ids, serve_text = squad_signatures(
        tf, lambda *ids: _encode(tf, encoder, *ids), head, tokenizer,
        _check_length(encoder, max_seq_length, 5), task.config, task.v2)
  else:
    serve_ids, serve_text = _glue_signatures(
        tf, encoder, head, kind, labels, info.get("text_pair"), tokenizer,
        _check_length(encoder, max_seq_length, 3))

  module = tf.Module()
  seen, variables = set(), []
  for layer in (encoder, head):
    for v in layer.variables:
      if id(v) not in seen:
        seen.add(id(v))
        variables.append(v)
  module.model_variables = variables
  module.finetuned = tf.Variable(json.dumps(metadata), trainable=False)
  module.text_tokenizer = tokenizer.tf_module
  if vocab_file:
    module.vocab_file = tf.saved_model.Asset(vocab_file)
  # Served as signatures only (as attributes too, each would be traced
  # twice more on save).
  tf.saved_model.save(module, output_dir, signatures={
      IDS_SIGNATURE: serve_ids.get_concrete_function(),
      TEXT_SIGNATURE: serve_text.get_concrete_function()})


def _glue_signatures(tf, encoder, head, kind, labels, text_pair, tokenizer,
                     max_len):
  """(serve_ids, serve_text) of a GLUE classification/regression head."""

  def outputs(input_ids, input_mask, segment_ids):
    hidden = _encode(tf, encoder, input_ids, input_mask, segment_ids)
    logits = ops.cast(head(hidden, training=False), "float32")
    if kind == "regression":
      return {"score": logits[:, 0]}
    label_id = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return {"logits": logits, "probabilities": tf.nn.softmax(logits),
            "label_id": label_id,
            "label": tf.gather(tf.constant(labels), label_id)}

  ids_spec = lambda name: tf.TensorSpec([None, None], tf.int32, name)  # noqa
  text_spec = lambda name: tf.TensorSpec([None], tf.string, name)  # noqa

  @tf.function(input_signature=[ids_spec("input_ids"),
                                ids_spec("input_mask"),
                                ids_spec("segment_ids")], autograph=False)
  def serve_ids(input_ids, input_mask, segment_ids):
    return outputs(input_ids, input_mask, segment_ids)

  # (autograph=False: nothing here branches on tensors, and converting the
  # tokenizer's and Keras' code takes seconds per trace.)
  def text_outputs(text, text_b=None):
    packed = pack_text(tokenizer, max_len, text, text_b)
    out = outputs(packed["input_ids"], packed["input_mask"],
                  packed["segment_ids"])
    out.update({k: packed[k] for k in ("input_ids", "input_mask",
                                       "segment_ids")})
    return out

  if text_pair:
    serve_text = tf.function(
        lambda text, text_b: text_outputs(text, text_b), autograph=False,
        input_signature=[text_spec("text"), text_spec("text_b")])
  else:
    serve_text = tf.function(text_outputs, autograph=False,
                             input_signature=[text_spec("text")])
  return serve_ids, serve_text
