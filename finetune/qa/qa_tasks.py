"""SQuAD 1.1 ("squadv1") and 2.0 ("squad") with the ELECTRA release's head.

Data: RAW_DATA_DIR/<task>/{train,dev,test}.json in the official layout.

Features (one row per sliding window over a context):
  input_ids, input_mask, segment_ids [N, T]: [CLS] question [SEP] context
      [SEP], segment 1 from the first context token to the last [SEP];
  answer_mask [N, T]: 1 at [CLS] and at the row's context tokens (where a
      span may start or end; [CLS] is the "no answer in this row" target);
  start_positions, end_positions [N]: the answer's sub-tokens in the row,
      0/0 ([CLS]) for an unanswerable question or an answer outside it;
  is_impossible [N] float, example_index [N];
  and for the scorer only (leading "_", never fed to the model):
  _token_to_orig_map [N, T] (context word of each token, -1 elsewhere),
  _token_is_max_context [N, T] (the row where the token has most context),
  _token_char_start / _token_char_end [N, T] (its characters in the context),
  _span_start [N] (the window's first sub-token within the context).

Head (XLNet style, as the ELECTRA release): start logits from Dense(1); end
logits conditioned on a start: Dense(hidden, act)(concat(h_t, h_start)) ->
LayerNorm -> Dense(1). Training conditions on the gold start; inference runs
a beam: the top `beam_size` starts, and for each its top `beam_size` ends
(start_n_top = end_n_top = config.beam_size, as in the release). SQuAD 2.0
adds an answerability logit (larger = unanswerable) from [CLS] concatenated
with the start-probability-weighted mean of hidden states.

Null score (2.0, as the release): with the answerability classifier it is
the smallest answerability logit over the example's rows; without it,
min over rows of (log p_start([CLS]) + log p_end([CLS] | [CLS])) minus the
best span's score. The prediction is "" when it exceeds qa_na_threshold.

Answer text: the context's characters from the start sub-token's first to
the end sub-token's last. Sub-token character offsets come from WordPiece
pieces when they spell out their word's length exactly (the length check of
BERT's get_final_text; so "Smith's" can yield "Smith"); otherwise, and for
SentencePiece, a sub-token stands for its whole whitespace word.
"""

import collections
import dataclasses
import json
import math
import os

import numpy as np
from keras import layers
from keras import ops

from finetune import task
from finetune.qa import squad_eval
from model.encoder import activation
from model.encoder import initializer
from util import storage
from util.errors import UserError

_MASKED = -1e9  # logit of a position where no span may start or end


# ---------------------------------------------------------------- examples

@dataclasses.dataclass
class QAExample(task.Example):
  """One question on one context. Questions of a paragraph share its
  context, doc_tokens and word_spans objects."""
  qid: str
  question: str
  context: str
  doc_tokens: list  # whitespace-separated words of the context
  word_spans: list  # [start, end) characters of each word
  answers: list  # every gold answer text ([] if unanswerable or unknown)
  answer_text: str = ""  # the answer trained on
  start_word: int = -1  # its first and last word (-1: none known)
  end_word: int = -1
  is_impossible: bool = False


def _is_whitespace(c):
  return c in " \t\r\n" or ord(c) == 0x202F


def split_context(text):
  """Whitespace words, their [start, end) characters, char -> word index."""
  words, spans, char_to_word = [], [], []
  prev_is_space = True
  for i, c in enumerate(text):
    if _is_whitespace(c):
      prev_is_space = True
    else:
      if prev_is_space:
        words.append(c)
        spans.append([i, i + 1])
      else:
        words[-1] += c
        spans[-1][1] = i + 1
      prev_is_space = False
    char_to_word.append(len(words) - 1)
  return words, spans, char_to_word


def read_squad_file(path):
  """The "data" list of a SQuAD JSON file; UserError when unusable."""
  if not storage.exists(path) or storage.isdir(path):
    raise UserError(f"SQuAD file not found: {path}")
  try:
    with storage.open_file(path, "r") as f:
      data = json.load(f)
  except json.JSONDecodeError as e:
    raise UserError(f"{path} is not valid JSON: {e.msg} at line "
                    f"{e.lineno} column {e.colno}") from None
  except UnicodeDecodeError:
    raise UserError(f"{path} is not UTF-8 text") from None
  if not isinstance(data, dict) or not isinstance(data.get("data"), list):
    raise UserError(f"{path} is not in the SQuAD layout: it needs a "
                    f'top-level object with a "data" list')
  return data["data"]


def _field(obj, key, kind, path, where):
  if not isinstance(obj, dict) or not isinstance(obj.get(key), kind):
    raise UserError(f'{path}: {where} lacks a valid "{key}" field')
  return obj[key]


def _answer_words(context, char_to_word, doc_tokens, answer):
  """(start_word, end_word) of an answer, or None if it cannot be found
  in the context (bad offsets, odd Unicode): as BERT, train without it."""
  text, start = answer.get("text"), answer.get("answer_start")
  if not isinstance(text, str) or not isinstance(start, int) or not text:
    return None
  end = start + len(text) - 1
  if start < 0 or end >= len(char_to_word):
    return None
  first, last = char_to_word[start], char_to_word[end]
  if first < 0:
    return None
  found = " ".join(doc_tokens[first:last + 1]).lower()
  if " ".join(text.split()).lower() not in found:
    return None
  return first, last


# ---------------------------------------------------------------- features

@dataclasses.dataclass
class _Doc:
  """A context's sub-tokens: ids, word index and characters of each."""
  ids: np.ndarray
  to_word: np.ndarray
  char_start: np.ndarray
  char_end: np.ndarray
  word_start: np.ndarray  # first sub-token of each word; [W] = len(ids)


def _piece_lengths(tokenizer, ids, word):
  """Characters each WordPiece piece covers, or None if they do not spell
  out the word's length (accents, [UNK], SentencePiece...)."""
  vocab = getattr(tokenizer, "vocab", None)
  if vocab is None or tokenizer.special_ids["unk"] in ids:
    return None
  lengths = [len(vocab[i]) - 2 * vocab[i].startswith("##") for i in ids]
  return lengths if sum(lengths) == len(word) else None


def _build_doc(tokenizer, doc_tokens, word_spans, pieces):
  ids, to_word, starts, ends, word_start = [], [], [], [], []
  for w, (word, (c0, c1)) in enumerate(zip(doc_tokens, word_spans)):
    word_ids = pieces[word]
    word_start.append(len(ids))
    lengths = _piece_lengths(tokenizer, word_ids, word)
    offset = c0
    for j, piece in enumerate(word_ids):
      ids.append(piece)
      to_word.append(w)
      if lengths is None:
        starts.append(c0)
        ends.append(c1)
      else:
        starts.append(offset)
        offset += lengths[j]
        ends.append(offset)
  word_start.append(len(ids))
  as_array = lambda x: np.asarray(x, np.int32)  # noqa: E731
  return _Doc(as_array(ids), as_array(to_word), as_array(starts),
              as_array(ends), as_array(word_start))


def _answer_pieces(doc, example, answer_ids):
  """Sub-token [start, end] of the trained answer, tightened to the span
  whose pieces equal the answer's own ("(1895-1943)." -> "1895"), or None."""
  if example.start_word < 0:
    return None
  start = int(doc.word_start[example.start_word])
  end = int(doc.word_start[example.end_word + 1]) - 1
  if end < start:
    return None
  for s in range(start, end + 1):
    for e in range(end, s - 1, -1):
      if doc.ids[s:e + 1].tolist() == answer_ids:
        return s, e
  return start, end


def doc_spans(num_tokens, max_tokens, stride):
  """(start, length) windows of at most max_tokens, stride apart; one empty
  window for an empty context, so every example gets a row."""
  spans, start = [], 0
  while start < num_tokens:
    length = min(num_tokens - start, max_tokens)
    spans.append((start, length))
    if start + length == num_tokens:
      break
    start += min(length, stride)
  return spans or [(0, 0)]


def max_context_span(spans, num_tokens):
  """For each sub-token, the window where min(left, right) context is
  largest (+0.01 x window length; first window on ties), as BERT."""
  scores = np.full((len(spans), max(num_tokens, 1)), -np.inf)
  for i, (start, length) in enumerate(spans):
    pos = np.arange(start, start + length)
    scores[i, pos] = (np.minimum(pos - start, start + length - 1 - pos) +
                      0.01 * length)
  return np.argmax(scores, axis=0)


class _Rows:
  """Builds padded feature rows one window at a time."""

  ARRAYS = (("input_ids", np.int32), ("input_mask", np.int32),
            ("segment_ids", np.int32), ("answer_mask", np.int32),
            ("_token_to_orig_map", np.int32),
            ("_token_is_max_context", bool),
            ("_token_char_start", np.int32), ("_token_char_end", np.int32))
  SCALARS = (("example_index", np.int32), ("start_positions", np.int32),
             ("end_positions", np.int32), ("is_impossible", np.float32),
             ("_span_start", np.int32))

  def __init__(self, seq_len, special_ids):
    self.seq_len = seq_len
    self.special = special_ids
    self.rows = {name: [] for name, _ in self.ARRAYS + self.SCALARS}

  def add(self, doc, query, span, is_max, answer, example_index, impossible):
    t, (start, length) = self.seq_len, span
    row = {name: np.zeros(t, dtype) for name, dtype in self.ARRAYS}
    row["input_ids"][:] = self.special["pad"]
    off = len(query) + 2  # first context position
    end = off + length
    row["input_ids"][:off] = [self.special["cls"]] + query + [
        self.special["sep"]]
    row["input_ids"][off:end] = doc.ids[start:start + length]
    row["input_ids"][end] = self.special["sep"]
    row["input_mask"][:end + 1] = 1
    row["segment_ids"][off:end + 1] = 1
    row["answer_mask"][0] = 1
    row["answer_mask"][off:end] = 1
    row["_token_to_orig_map"][:] = -1
    row["_token_to_orig_map"][off:end] = doc.to_word[start:start + length]
    row["_token_is_max_context"][off:end] = is_max[start:start + length]
    row["_token_char_start"][off:end] = doc.char_start[start:start + length]
    row["_token_char_end"][off:end] = doc.char_end[start:start + length]
    for name, value in row.items():
      self.rows[name].append(value)
    positions = (0, 0)
    if answer is not None and start <= answer[0] and answer[1] < start + length:
      positions = (answer[0] - start + off, answer[1] - start + off)
    values = (example_index, *positions, float(impossible), start)
    for (name, _), value in zip(self.SCALARS, values):
      self.rows[name].append(value)

  def arrays(self):
    out = {}
    for name, dtype in self.ARRAYS:
      out[name] = (np.stack(self.rows[name]) if self.rows[name] else
                   np.zeros((0, self.seq_len), dtype))
    for name, dtype in self.SCALARS:
      out[name] = np.asarray(self.rows[name], dtype)
    return out


# -------------------------------------------------------------------- head

class SQuADHead(layers.Layer):
  """Start logits, end logits given a start, and (2.0) answerability.

  call(hidden, answer_mask, start_positions=None, training=None) returns
  float32 tensors: start_log_probs [B, T]; end_log_probs [B, T] given the
  gold start (when start_positions is given); at inference start_top_index
  / start_top_log_probs [B, k] and end_top_index / end_top_log_probs
  [B, k, k]; answerable_logit [B] (with the classifier) or, for 2.0 without
  it, cls_log_prob [B] = log p_start(0) + log p_end(0 | start 0).
  Inference holds [B, k, T, hidden] end features (k = beam_size).
  """

  def __init__(self, config, beam_size, v2, answerable_classifier=True,
               answerable_uses_start_logits=True, dropout=0.1, **kwargs):
    super().__init__(**kwargs)
    self.config = config
    self.beam_size = beam_size
    self.v2 = v2
    self.answerable = v2 and answerable_classifier
    self.uses_start = answerable_uses_start_logits
    init, h = initializer(config), config.hidden_size
    self.act = activation(config.hidden_act)
    self.start_dense = layers.Dense(1, kernel_initializer=init,
                                    name="start_logits")
    # Applied to concat(h_t, h_start) by splitting its kernel, so the
    # [B, k, T, 2H] concatenation is never built.
    self.end_hidden = layers.Dense(h, kernel_initializer=init,
                                   name="end_hidden")
    self.end_norm = layers.LayerNormalization(
        epsilon=config.layer_norm_eps, name="end_LayerNorm")
    self.end_dense = layers.Dense(1, kernel_initializer=init,
                                  name="end_logits")
    if self.answerable:
      self.answer_hidden = layers.Dense(
          h, activation=self.act, kernel_initializer=init,
          name="answer_hidden")
      self.answer_dropout = layers.Dropout(dropout)
      self.answer_dense = layers.Dense(1, kernel_initializer=init,
                                       name="answer_logit")

  def build(self, input_shape):
    h = self.config.hidden_size
    self.start_dense.build((None, h))
    self.end_hidden.build((None, 2 * h))
    self.end_norm.build((None, h))
    self.end_dense.build((None, h))
    if self.answerable:
      self.answer_hidden.build((None, 2 * h if self.uses_start else h))
      self.answer_dense.build((None, h))
    self.built = True

  def _masked(self, logits, mask):
    return ops.where(mask, ops.cast(logits, "float32"), _MASKED)

  def end_log_probs(self, hidden, start_onehot, mask):
    """[B, k, T] end log-probs for k starts given as one-hots [B, k, T]."""
    h = self.config.hidden_size
    kernel = ops.cast(self.end_hidden.kernel, hidden.dtype)
    bias = ops.cast(self.end_hidden.bias, hidden.dtype)
    start_states = ops.einsum("bkt,bth->bkh", start_onehot, hidden)
    x = (ops.expand_dims(ops.matmul(hidden, kernel[:h]), 1) +
         ops.expand_dims(ops.matmul(start_states, kernel[h:]) + bias, 2))
    x = self.end_norm(self.act(x))
    logits = ops.squeeze(self.end_dense(x), -1)
    logits = self._masked(logits, ops.expand_dims(mask, 1))
    return ops.log_softmax(logits, axis=-1)

  def answerable_logit(self, hidden, start_logits, training):
    x = hidden[:, 0]
    if self.uses_start:
      p = ops.cast(ops.softmax(start_logits, axis=-1), hidden.dtype)
      x = ops.concatenate(
          [x, ops.einsum("bt,bth->bh", p, hidden)], axis=-1)
    x = self.answer_dropout(self.answer_hidden(x), training=training)
    return ops.cast(ops.squeeze(self.answer_dense(x), -1), "float32")

  def call(self, hidden, answer_mask, start_positions=None, training=None):
    seq_len = hidden.shape[1] or ops.shape(hidden)[1]
    mask = ops.not_equal(answer_mask, 0)
    start_logits = self._masked(
        ops.squeeze(self.start_dense(hidden), -1), mask)
    out = {"start_log_probs": ops.log_softmax(start_logits, axis=-1)}
    if start_positions is not None:
      gold = ops.one_hot(ops.expand_dims(start_positions, 1), seq_len,
                         dtype=hidden.dtype)
      out["end_log_probs"] = self.end_log_probs(hidden, gold, mask)[:, 0]
    if self.answerable:
      out["answerable_logit"] = self.answerable_logit(
          hidden, start_logits, training)
    if not training:
      out.update(self._beam(hidden, out["start_log_probs"], mask, seq_len))
    return out

  def _beam(self, hidden, start_lp, mask, seq_len):
    """Top-k starts, and for each the top-k ends given that start."""
    onehot = lambda i: ops.one_hot(i, seq_len, dtype=hidden.dtype)  # noqa
    k = self.beam_size
    if isinstance(hidden.shape[1], int):
      k = min(k, hidden.shape[1])
    start_top_lp, start_top = ops.top_k(start_lp, k)
    end_lp = self.end_log_probs(hidden, onehot(start_top), mask)
    end_top_lp, end_top = ops.top_k(end_lp, k)
    out = {"start_top_index": start_top, "start_top_log_probs": start_top_lp,
           "end_top_index": end_top, "end_top_log_probs": end_top_lp}
    if self.v2 and not self.answerable:
      cls = onehot(ops.zeros_like(start_top[:, :1]))
      out["cls_log_prob"] = (start_lp[:, 0] +
                             self.end_log_probs(hidden, cls, mask)[:, 0, 0])
    return out


def _sigmoid_ce(labels, logits):
  """Stable elementwise sigmoid cross-entropy."""
  return (ops.maximum(logits, 0.0) - logits * labels +
          ops.softplus(-ops.abs(logits)))


def _gather(log_probs, positions):
  """log_probs[b, positions[b]] for each row."""
  onehot = ops.one_hot(positions, ops.shape(log_probs)[-1], dtype="float32")
  return ops.sum(onehot * log_probs, axis=-1)


# -------------------------------------------------------------------- task

class QATask(task.Task):
  """SQuAD-format span extraction; `v2` adds unanswerable questions."""

  metric = "f1"
  v2 = False

  def __init__(self, config, tokenizer):
    super().__init__(config, tokenizer)
    self._examples = {}

  # -- examples

  def data_path(self, split):
    if not self.config.raw_data_dir:
      raise UserError("raw_data_dir is not set: pass --data-dir or "
                      "--raw-data-dir")
    return os.path.join(self.config.raw_data_dir, self.name, split + ".json")

  def get_examples(self, split):
    if split not in self._examples:
      path = self.data_path(split)
      limit = (self.config.train_examples_limit if split == "train" else
               self.config.eval_examples_limit)
      self._examples[split] = self._read_examples(
          read_squad_file(path), path, split == "train", limit)
    return self._examples[split]

  def _read_examples(self, articles, path, is_train, limit):
    examples = []
    for a, article in enumerate(articles):
      paragraphs = _field(article, "paragraphs", list, path,
                          f"article {a}")
      for p, paragraph in enumerate(paragraphs):
        where = f"article {a} paragraph {p}"
        self._add_paragraph(paragraph, path, where, is_train, examples)
        if limit and len(examples) >= limit:
          return examples[:limit]
    return examples

  def _add_paragraph(self, paragraph, path, where, is_train, examples):
    context = _field(paragraph, "context", str, path, where)
    doc_tokens, word_spans, char_to_word = split_context(context)
    for q, qa in enumerate(_field(paragraph, "qas", list, path, where)):
      qwhere = f"{where} question {q}"
      qid = str(_field(qa, "id", (str, int), path, qwhere))
      answers = qa.get("answers") or []
      if not isinstance(answers, list) or not all(
          isinstance(x, dict) and isinstance(x.get("text"), str)
          for x in answers):
        raise UserError(f'{path}: {qwhere} has a malformed "answers" list')
      impossible = bool(qa.get("is_impossible", False)) or (
          self.v2 and "is_impossible" not in qa and "answers" in qa and
          not answers)
      if impossible and not self.v2:
        continue  # a 2.0 question has no place in 1.1
      example = QAExample(
          guid=qid, qid=qid,
          question=_field(qa, "question", str, path, qwhere),
          context=context, doc_tokens=doc_tokens, word_spans=word_spans,
          answers=[] if impossible else [x["text"] for x in answers],
          is_impossible=impossible)
      if answers and not impossible:
        words = _answer_words(context, char_to_word, doc_tokens, answers[0])
        if words is None and is_train:
          continue  # unrecoverable annotation: BERT drops it too
        if words is not None:
          example.start_word, example.end_word = words
          example.answer_text = answers[0]["text"]
      examples.append(example)

  # -- features

  def featurize(self, examples, is_training):
    """Rows as described in the module docstring. Gold positions are
    filled whenever known (also at eval, for the eval loss)."""
    del is_training  # the same rows serve training and evaluation
    c, tok = self.config, self.tokenizer
    contexts = {}
    for ex in examples:
      contexts.setdefault(ex.context, ex)
    words = sorted({w for ex in contexts.values() for w in ex.doc_tokens})
    # Three batched calls: every distinct word, every question, answers.
    pieces = dict(zip(words, tok.tokenize_batch(words)))
    queries = tok.tokenize_batch([ex.question for ex in examples])
    answers = tok.tokenize_batch([ex.answer_text for ex in examples])
    docs = {text: _build_doc(tok, ex.doc_tokens, ex.word_spans, pieces)
            for text, ex in contexts.items()}
    rows = _Rows(c.max_seq_length, tok.special_ids)
    for i, ex in enumerate(examples):
      doc = docs[ex.context]
      query = queries[i][:c.max_query_length]
      spans = doc_spans(len(doc.ids), c.max_seq_length - len(query) - 3,
                        c.doc_stride)
      best = max_context_span(spans, len(doc.ids))
      answer = _answer_pieces(doc, ex, answers[i])
      for s, span in enumerate(spans):
        rows.add(doc, query, span, best == s, answer, i, ex.is_impossible)
    return rows.arrays()

  # -- model

  def build_head(self, encoder_config):
    c = self.config
    dropout = (c.hidden_dropout_prob if c.hidden_dropout_prob is not None
               else encoder_config.hidden_dropout_prob)
    return SQuADHead(
        encoder_config, c.beam_size, self.v2,
        answerable_classifier=c.answerable_classifier,
        answerable_uses_start_logits=c.answerable_uses_start_logits,
        dropout=dropout, name=f"{self.name}_head")

  def loss_and_outputs(self, head, hidden, features, training):
    """Per-row loss: (CE(start) + CE(end | gold start)) / 2, plus
    answerable_weight x sigmoid CE(is_impossible) with the 2.0 classifier.
    Outputs (inference only) are the head's beam and answerability."""
    starts = features.get("start_positions")
    if starts is not None:
      starts = ops.cast(starts, "int32")
    res = head(hidden, features["answer_mask"], start_positions=starts,
               training=training)
    if starts is None:
      loss = ops.zeros((ops.shape(hidden)[0],), "float32")
    else:
      ends = ops.cast(features["end_positions"], "int32")
      loss = -(_gather(res["start_log_probs"], starts) +
               _gather(res["end_log_probs"], ends)) / 2.0
      if "answerable_logit" in res:
        labels = ops.cast(features["is_impossible"], "float32")
        loss = loss + self.config.answerable_weight * _sigmoid_ce(
            labels, res["answerable_logit"])
    if training:
      return loss, {}
    keys = ("start_top_index", "start_top_log_probs", "end_top_index",
            "end_top_log_probs", "answerable_logit", "cls_log_prob")
    outputs = {k: res[k] for k in keys if k in res}
    outputs["example_index"] = features["example_index"]
    return loss, outputs

  def get_scorer(self, examples, features):
    return SQuADScorer(self.config, examples, features, self.v2)


class SQuADv1(QATask):
  name = "squadv1"
  v2 = False


class SQuAD(QATask):
  name = "squad"
  v2 = True


# ------------------------------------------------------------------ scorer

def _softmax(scores):
  if not scores:
    return []
  x = np.exp(np.asarray(scores, np.float64) - max(scores))
  return (x / x.sum()).tolist()


class SQuADScorer(task.Scorer):
  """n-best spans per example over all its rows, text, null score, EM/F1."""

  def __init__(self, config, examples, features, v2):
    super().__init__()
    self.config = config
    self.examples = examples
    self.v2 = v2
    self.meta = {k: features[k] for k in (
        "example_index", "_token_to_orig_map", "_token_is_max_context",
        "_token_char_start", "_token_char_end")}
    self._predictions = None

  def update(self, outputs):
    super().update(outputs)
    self._predictions = None

  def _rows(self):
    """Collected outputs, checked against the features' row order."""
    n = len(self.meta["example_index"])
    if not self.outputs:
      raise ValueError("the SQuAD scorer got no outputs")
    out = {k: v[:n] for k, v in self.collected().items()}
    got = out.get("example_index")
    if len(out["start_top_index"]) < n or (
        got is not None and np.any(got != self.meta["example_index"])):
      raise ValueError("SQuAD outputs do not match the feature rows: "
                       "rows must come in order, each exactly once")
    return out

  def _candidates(self, out, r):
    """Valid (score, row, start, end, start_lp, end_lp) spans of row r."""
    c, m = self.config, self.meta
    starts = np.broadcast_to(out["start_top_index"][r][:, None],
                             out["end_top_index"][r].shape)
    ends = out["end_top_index"][r]
    start_lp = np.broadcast_to(out["start_top_log_probs"][r][:, None],
                               ends.shape)
    end_lp = out["end_top_log_probs"][r]
    to_orig = m["_token_to_orig_map"][r]
    valid = ((to_orig[starts] >= 0) & (to_orig[ends] >= 0) &
             m["_token_is_max_context"][r][starts] & (ends >= starts) &
             (ends - starts < c.max_answer_length))
    return [(float(start_lp[i] + end_lp[i]), r, int(starts[i]), int(ends[i]),
             float(start_lp[i]), float(end_lp[i]))
            for i in zip(*np.nonzero(valid))]

  def _nbest(self, example, candidates):
    m, nbest, seen = self.meta, [], set()
    for score, r, s, e, slp, elp in sorted(candidates, key=lambda x: -x[0]):
      if len(nbest) >= self.config.n_best_size:
        break
      text = example.context[m["_token_char_start"][r][s]:
                             m["_token_char_end"][r][e]]
      if text in seen:
        continue
      seen.add(text)
      nbest.append({"text": text, "score": score, "start_log_prob": slp,
                    "end_log_prob": elp})
    for entry, p in zip(nbest, _softmax([x["score"] for x in nbest])):
      entry["probability"] = p
    return nbest

  def _null_score(self, out, rows, nbest):
    """Larger = more likely unanswerable; compared to qa_na_threshold."""
    if "answerable_logit" in out:
      return float(np.min(out["answerable_logit"][rows]))
    if not nbest:
      return math.inf
    return float(np.min(out["cls_log_prob"][rows])) - nbest[0]["score"]

  def predictions(self):
    """{"text": final, "best_text": best span, "null": score, "nbest"}
    per qid, computed once."""
    if self._predictions is not None:
      return self._predictions
    out = self._rows()
    rows_of = collections.defaultdict(list)
    for r, i in enumerate(self.meta["example_index"]):
      rows_of[int(i)].append(r)
    preds = {}
    for i, example in enumerate(self.examples):
      rows = rows_of.get(i, [])
      candidates = [x for r in rows for x in self._candidates(out, r)]
      nbest = self._nbest(example, candidates)
      best = nbest[0]["text"] if nbest else ""
      pred = {"text": best, "best_text": best, "nbest": nbest}
      if self.v2:
        pred["null"] = self._null_score(out, rows, nbest) if rows else (
            math.inf)
        if pred["null"] > self.config.qa_na_threshold:
          pred["text"] = ""
      preds[example.qid] = pred
    self._predictions = preds
    return preds

  def get_results(self):
    preds = self.predictions()
    if not self.v2:
      golds = {ex.qid: ex.answers for ex in self.examples if ex.answers}
      res = squad_eval.evaluate_v1(
          golds, {q: p["text"] for q, p in preds.items()})
      return {k: float(v) for k, v in res.items()}
    golds = {ex.qid: ex.answers for ex in self.examples}
    res = squad_eval.evaluate_v2(
        golds, {q: p["best_text"] for q, p in preds.items()},
        {q: p["null"] for q, p in preds.items()},
        self.config.qa_na_threshold)
    res["exact_match"] = res.pop("exact")
    return {k: float(v) for k, v in res.items()}

  def write_predictions(self, path):
    """path: {qid: text}; beside it <name>_nbest.json and, for 2.0,
    <name>_null_odds.json ({qid: null score})."""
    preds = self.predictions()
    root, ext = os.path.splitext(path)
    ext = ext or ".json"
    files = {path: {q: p["text"] for q, p in preds.items()},
             root + "_nbest" + ext: {q: p["nbest"] for q, p in preds.items()}}
    if self.v2:
      # Finite, so the file stays strict JSON.
      files[root + "_null_odds" + ext] = {q: min(p["null"], 1e30)
                                          for q, p in preds.items()}
    if os.path.dirname(path):
      storage.makedirs(os.path.dirname(path))
    for name, value in files.items():
      storage.write_text_atomic(name, json.dumps(value, indent=2) + "\n")
