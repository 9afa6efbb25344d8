"""Hugging Face `transformers` directories: config.json, model.safetensors,
vocab.txt and tokenizer_config.json, as ElectraForPreTraining (the
discriminator) or ElectraForMaskedLM (the generator / a masked LM) saves
them. No torch needed: safetensors reads and writes NumPy arrays.

One difference transformers builds in: its generator head always uses the
exact GELU, where ours (and the TF1 release) follows hidden_act; models
with hidden_act "gelu" (the default) agree exactly.

A fine-tuned model's heads (finetuned_head) go to
ElectraForSequenceClassification (GLUE classification and regression),
ElectraForTokenClassification (tagging), ElectraForMultipleChoice and
ElectraForQuestionAnswering (SQuAD, qa_head linear), each computing
exactly what ours does; a CRF tagger, the release's (or XLNet's) SQuAD
head and 2.0's answerability classifier have no transformers class that
can (one UserError says why).
"""

import json
import os
import shutil

import numpy as np
from safetensors.numpy import load_file
from safetensors.numpy import save_file

from interop.weights import DISCRIMINATOR
from interop.weights import GENERATOR
from util.errors import UserError

CONFIG, WEIGHTS = "config.json", "model.safetensors"
ARCHITECTURES = {DISCRIMINATOR: "ElectraForPreTraining",
                 GENERATOR: "ElectraForMaskedLM"}
# Our activation names -> transformers' (its "gelu" is the exact erf form,
# "gelu_new" the tanh approximation of the TF1 release).
ACTIVATIONS = {"gelu": "gelu", "gelu_approx": "gelu_new",
               "gelu_new": "gelu_new", "relu": "relu", "silu": "silu",
               "tanh": "tanh"}
FROM_HF_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_approx",
                       "gelu_pytorch_tanh": "gelu_approx",
                       "gelu_fast": "gelu_approx", "relu": "relu",
                       "silu": "silu", "swish": "silu", "tanh": "tanh"}
CONFIG_FIELDS = ("vocab_size", "embedding_size", "hidden_size",
                 "num_hidden_layers", "num_attention_heads",
                 "intermediate_size", "hidden_dropout_prob",
                 "attention_probs_dropout_prob", "max_position_embeddings",
                 "type_vocab_size", "initializer_range", "layer_norm_eps")


def _is_linear(name, array):
  """transformers' Linear weights are [out, in]; Keras kernels [in, out]."""
  return (array.ndim == 2 and name.endswith(".weight") and
          not name.endswith("_embeddings.weight"))


def architecture(role, with_head=True):
  return ARCHITECTURES[role] if with_head else "ElectraModel"


def config_fields(config):
  """transformers' ElectraConfig fields of our TransformerConfig:
  transformers.ElectraConfig(**config_fields(c)) has our sizes."""
  return dict({f: getattr(config, f) for f in CONFIG_FIELDS},
              hidden_act=ACTIVATIONS[config.hidden_act])


def save(output_dir, role, weights, config, vocab_file, do_lower_case,
         pad_id=0, with_head=True, architecture_name="", extra_config=None):
  """Writes one network; `config` is its TransformerConfig. Without its
  head it is an ElectraModel (e.g. the main model of an ablation).
  architecture_name and extra_config: another class (a fine-tuned head,
  finetuned_head) and its config fields."""
  os.makedirs(output_dir, exist_ok=True)
  hf_config = config_fields(config)
  hf_config.update(
      architectures=[architecture_name or architecture(role, with_head)],
      model_type="electra", pad_token_id=pad_id,
      position_embedding_type="absolute", tie_word_embeddings=True)
  hf_config.update(extra_config or {})
  if config.share_layers:
    hf_config["_comment"] = "cross-layer shared: every layer is one copy"
  tensors = {name: np.ascontiguousarray(a.T if _is_linear(name, a) else a)
             for name, a in weights.items()}
  save_file(tensors, os.path.join(output_dir, WEIGHTS),
            metadata={"format": "pt"})  # what transformers checks for
  with open(os.path.join(output_dir, CONFIG), "w") as f:
    json.dump(hf_config, f, indent=2, sort_keys=True)
  if vocab_file.endswith(".txt"):
    shutil.copyfile(vocab_file, os.path.join(output_dir, "vocab.txt"))
    with open(os.path.join(output_dir, "tokenizer_config.json"), "w") as f:
      json.dump({"tokenizer_class": "ElectraTokenizer",
                 "do_lower_case": do_lower_case,
                 "model_max_length": config.max_position_embeddings}, f,
                indent=2)
  else:  # a SentencePiece model: transformers' Electra tokenizer can't
    shutil.copyfile(vocab_file, os.path.join(
        output_dir, os.path.basename(vocab_file)))


# ------------------------------------------------- fine-tuned heads
FINETUNED_ARCHITECTURES = {
    "classification": "ElectraForSequenceClassification",
    "regression": "ElectraForSequenceClassification",
    "tagging": "ElectraForTokenClassification",
    "multiple_choice": "ElectraForMultipleChoice",
    "squad_linear": "ElectraForQuestionAnswering",
}
_SQUAD = ("our default SQuAD head is the ELECTRA release's (qa_head "
          "electra; xlnet is alike): end logits conditioned on the chosen "
          "start, a beam over starts and ends, which transformers' "
          "ElectraForQuestionAnswering (start and end logits from one "
          "linear layer, independent of each other) cannot express; "
          "fine-tune with qa_head linear to export one")
_ANSWERABLE = ("SQuAD 2.0's answerability classifier has no place in "
               "transformers' ElectraForQuestionAnswering; fine-tune with "
               "qa_head linear and answerable_classifier false (the null "
               "score then comes from the [CLS] span, as BERT's)")
NO_TRANSFORMERS_CLASS = {
    "tagging_crf": ("a CRF tagging head (learned transitions, Viterbi "
                    "decoding) has no transformers ELECTRA class; "
                    "fine-tune without tagging_crf to export it"),
    "squad": _SQUAD,
    "squad_answerable": _SQUAD,
    "squad_linear_answerable": _ANSWERABLE,
}


def finetuned_head(task, kind, head, hidden_size, labels):
  """(architecture, config fields, {name: array}) of the transformers class
  that computes exactly what one of our fine-tuned heads does. head: {name
  inside the head: array} (finetune/model.py's head_weights, Keras
  orientation); labels: the head's label list (None: regression or
  multiple choice). One UserError where no class can."""
  if kind in NO_TRANSFORMERS_CLASS:
    raise UserError(f"{task}: {NO_TRANSFORMERS_CLASS[kind]} (nothing was "
                    "written)")
  if kind not in FINETUNED_ARCHITECTURES:
    raise UserError(f"{task}: a {kind} head has no transformers class here")
  if kind == "squad_linear":  # qa_outputs: Linear(H, 2) = [start, end]
    return FINETUNED_ARCHITECTURES[kind], {}, {
        "qa_outputs.weight": np.concatenate(
            [head["start_logits/kernel"], head["end_logits/kernel"]], 1),
        "qa_outputs.bias": np.concatenate(
            [head["start_logits/bias"], head["end_logits/bias"]])}
  kernel, bias = head["output/kernel"], head["output/bias"]  # [H, n], [n]
  n = kernel.shape[1]
  if kind == "multiple_choice":
    # ElectraSequenceSummary without projection or activation is the
    # [CLS] state; the classifier is our linear layer.
    extra = dict(summary_type="first", summary_use_proj=False,
                 summary_activation="linear", summary_first_dropout=0.0,
                 summary_last_dropout=0.0)
    return FINETUNED_ARCHITECTURES[kind], extra, {
        "classifier.weight": kernel, "classifier.bias": bias}
  names = list(labels) if labels else ["score"]
  extra = dict(id2label=dict(enumerate(names)),
               label2id={x: i for i, x in enumerate(names)})
  if kind == "tagging":  # dropout + Linear on every token: ours exactly
    return FINETUNED_ARCHITECTURES[kind], extra, {
        "classifier.weight": kernel, "classifier.bias": bias}
  # ElectraClassificationHead is out_proj(gelu(dense(h_[CLS]))); ours is
  # one linear layer, y = W h + b. Exactly the same: dense computes (y, -y)
  # in its first 2n units (0 in the rest), out_proj takes the first minus
  # the second half, and gelu(y) - gelu(-y) = y Phi(y) + y Phi(-y) = y for
  # any y (as for the tanh form: x s(x) with s(x) + s(-x) = 1).
  if 2 * n > hidden_size:
    raise UserError(f"{task}: {n} outputs need {2 * n} of the classifier's "
                    f"{hidden_size} hidden units to be exported exactly")
  h = kernel.shape[0]
  dense, dense_bias = np.zeros((h, h), np.float32), np.zeros(h, np.float32)
  dense[:, :n], dense[:, n:2 * n] = kernel, -kernel
  dense_bias[:n], dense_bias[n:2 * n] = bias, -bias
  out = np.zeros((h, n), np.float32)
  out[np.arange(n), np.arange(n)] = 1.0
  out[n + np.arange(n), np.arange(n)] = -1.0
  extra["problem_type"] = ("regression" if kind == "regression" else
                           "single_label_classification")
  return FINETUNED_ARCHITECTURES[kind], extra, {
      "classifier.dense.weight": dense, "classifier.dense.bias": dense_bias,
      "classifier.out_proj.weight": out,
      "classifier.out_proj.bias": np.zeros(n, np.float32)}


def is_hf_dir(path):
  return os.path.isfile(os.path.join(path, CONFIG))


def network_dirs(path):
  """{role: directory}: `path` itself (its architectures say the role) or
  the discriminator/ and generator/ folders export_model.py writes."""
  if is_hf_dir(path):
    return {_role(path): path}
  found = {role: os.path.join(path, role) for role in (DISCRIMINATOR,
                                                      GENERATOR)
           if is_hf_dir(os.path.join(path, role))}
  return found


def _role(path):
  config = read_config(path)
  architectures = config.get("architectures") or ["ElectraModel"]
  if config.get("model_type") != "electra":
    raise UserError(f"{path}: model_type is {config.get('model_type')!r}, "
                    "not 'electra'")
  return GENERATOR if "ElectraForMaskedLM" in architectures else DISCRIMINATOR


def read_config(path):
  try:
    with open(os.path.join(path, CONFIG)) as f:
      return json.load(f)
  except (OSError, ValueError) as e:
    raise UserError(f"cannot read {os.path.join(path, CONFIG)}: {e}") from None


def load(path):
  """({our name: array}, TransformerConfig fields) of one directory."""
  weights_file = os.path.join(path, WEIGHTS)
  if not os.path.isfile(weights_file):
    raise UserError(f"{path} has no {WEIGHTS} (save it with "
                    "save_pretrained(..., safe_serialization=True))")
  config = read_config(path)
  try:
    tensors = load_file(weights_file)
  except Exception as e:  # pylint: disable=broad-except
    # safetensors raises its own SafetensorError on a damaged file.
    raise UserError(f"cannot read {weights_file}: {str(e)[:200]}") from None
  if not any(n.startswith("electra.") for n in tensors):
    # An ElectraModel (no head) saves its encoder without the prefix.
    tensors = {f"electra.{n}": a for n, a in tensors.items()}
  named = {}
  for name, array in tensors.items():
    if name.startswith("generator_lm_head.weight"):
      continue  # tied to the word embeddings; checked below
    named[name] = array.T if _is_linear(name, array) else array
  if "generator_lm_head.weight" in tensors:
    tied = named.get("electra.embeddings.word_embeddings.weight")
    if tied is None or not np.array_equal(tensors["generator_lm_head.weight"],
                                          tied):
      raise UserError(f"{path}: generator_lm_head is not tied to the word "
                      "embeddings, which this model requires")
  act = config.get("hidden_act", "gelu")
  if act not in FROM_HF_ACTIVATIONS:
    raise UserError(f"{path}: hidden_act {act!r} is not supported")
  if config.get("position_embedding_type", "absolute") != "absolute":
    raise UserError(f"{path}: only absolute position embeddings are "
                    "supported")
  fields = {f: config[f] for f in CONFIG_FIELDS if f in config}
  fields["hidden_act"] = FROM_HF_ACTIVATIONS[act]
  fields.setdefault("embedding_size", fields.get("hidden_size"))
  return named, fields
