"""SQuAD examples and features: reading the JSON, sliding-window rows.

Data: RAW_DATA_DIR/<task>/{train,dev,test}.json in the official layout.

Features (one row per sliding window over a context):
  input_ids, input_mask, segment_ids [N, T]: [CLS] question [SEP] context
      [SEP], segment 1 from the first context token to the last [SEP];
  answer_mask [N, T]: 1 at [CLS], the row's context tokens and its final
      [SEP] (where the head lets a span start or end, as the original
      release; [CLS] is the "no answer in this row" target);
  start_positions, end_positions [N]: the answer's sub-tokens in the row,
      0/0 ([CLS]) for an unanswerable question or an answer outside it;
  is_impossible [N] float, example_index [N];
  and for the scorer only (leading "_", never fed to the model):
  _token_to_orig_map [N, T] (context word of each token, -1 elsewhere),
  _token_is_max_context [N, T] (the row where the token has most context),
  _token_char_start / _token_char_end [N, T] (its characters in the context),
  _span_start [N] (the window's first sub-token within the context).

Answer text: the context's characters from the start sub-token's first to
the end sub-token's last. Sub-token character offsets come from WordPiece
pieces when they spell out their word's length exactly (the length check of
BERT's get_final_text; so "Smith's" can yield "Smith"); otherwise, and for
SentencePiece, a sub-token stands for its whole whitespace word.
"""

import dataclasses

import numpy as np

from finetune import task
from util import storage
from util import text_files
from util.errors import UserError


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
    raise UserError(f"SQuAD file not found: {path} (SQuAD files go in "
                    "DATA_DIR/finetuning_data/<task>/ as train.json, "
                    "dev.json)")
  data = text_files.read_json(path)
  if not isinstance(data, dict) or not isinstance(data.get("data"), list):
    raise UserError(f"{path} is not in the SQuAD layout: it needs a "
                    f'top-level object with a "data" list')
  return data["data"]


def field(obj, key, kind, path, where):
  if not isinstance(obj, dict) or not isinstance(obj.get(key), kind):
    raise UserError(f'{path}: {where} lacks a valid "{key}" field')
  return obj[key]


def answer_words(context, char_to_word, doc_tokens, answer):
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
class Doc:
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


def build_doc(tokenizer, doc_tokens, word_spans, pieces):
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
  return Doc(as_array(ids), as_array(to_word), as_array(starts),
              as_array(ends), as_array(word_start))


def answer_pieces(doc, example, answer_ids):
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


class Rows:
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
    # [CLS] and segment 1 (the context and its [SEP]), as the original's
    # input_mask * segment_ids + one_hot(0); the scorer never picks [SEP].
    row["answer_mask"][0] = 1
    row["answer_mask"][off:end + 1] = 1
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
