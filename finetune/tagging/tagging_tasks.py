"""CoNLL-2000 chunking: a per-token linear tagger on the encoder.

Files: RAW_DATA_DIR/chunk/train.txt, dev.txt and test.txt, `WORD POS CHUNK`
per line and a blank line between sentences. ELECTRA reports chunk F1 on
the official test set, so that file goes in as dev.txt.

Words are tagged at their first subword ([CLS] subwords [SEP]); the other
subwords, [CLS], [SEP] and padding carry label weight 0.
"""

import dataclasses
import os

import numpy as np
from keras import ops

from finetune.heads import LinearHead
from finetune.tagging import tagging_metrics
from finetune.tagging import tagging_utils
from finetune.task import Example
from finetune.task import Task
from util import outputs
from util import storage
from util import text_files
from util.errors import UserError

SPLITS = ("train", "dev", "test")


@dataclasses.dataclass
class TaggingExample(Example):
  words: list = dataclasses.field(default_factory=list)
  tags: list = dataclasses.field(default_factory=list)  # BIOES


@dataclasses.dataclass
class Sentence:
  """A sentence as read, with each word's line for error messages."""
  words: list
  tags: list  # as in the file (IOB2)
  lines: list


# ------------------------------------------------------------ reading
def read_conll(path):
  """Sentences of a CoNLL file: first column the word, last the tag."""
  if not storage.exists(path):
    raise UserError(f"chunk: {path} not found (CoNLL-2000 files go in "
                    "DATA_DIR/finetuning_data/chunk/ as train.txt, dev.txt, "
                    "test.txt)")
  sentences, current = [], Sentence([], [], [])
  for number, line in enumerate(text_files.read_lines(path), 1):
    fields = line.split()
    if not fields or fields[0] == "-DOCSTART-":
      if current.words:
        sentences.append(current)
      current = Sentence([], [], [])
      continue
    _check_line(path, number, line, fields)
    current.words.append(fields[0])
    current.tags.append(fields[-1])
    current.lines.append(number)
  if current.words:
    sentences.append(current)
  if not sentences:
    raise UserError(f"{path} has no sentences")
  return sentences


def _check_line(path, number, line, fields):
  if len(fields) < 2:
    raise UserError(f"{path} line {number}: expected 'WORD POS CHUNK', got "
                    f"{line.strip()[:60]!r}")
  try:
    tagging_utils.split_tag(fields[-1])
  except ValueError:
    raise UserError(f"{path} line {number}: malformed chunk tag "
                    f"'{fields[-1][:40]}' (expected O or B-, I-, E-, S-TYPE)") \
        from None


# ---------------------------------------------------------- features
def pack_words(word_pieces, budget, unk_id):
  """Subword ids of whole words while they fit in `budget`, and each kept
  word's first-subword offset. A first word longer than the budget keeps
  its head, so every row tags at least one word."""
  tokens, starts = [], []
  for pieces in word_pieces:
    pieces = pieces or [unk_id]  # a word with no subwords still gets a tag
    if len(tokens) + len(pieces) > budget:
      if not starts:
        starts, tokens = [0], pieces[:budget]
      break
    starts.append(len(tokens))
    tokens.extend(pieces)
  return tokens, starts


class Chunking(Task):
  """CoNLL-2000 chunking, BIOES tags, scored by conlleval's chunk F1."""

  name = "chunk"
  metric = "f1"
  predictions_ext = ".txt"

  def __init__(self, config, tokenizer):
    super().__init__(config, tokenizer)
    self._labels = None
    self.truncated_sentences = 0  # from the last featurize call
    self.truncated_words = 0

  # ------------------------------------------------------------ examples
  def path(self, split):
    return os.path.join(self.config.raw_data_dir, self.name, f"{split}.txt")

  def labels_path(self):
    """Where the tag set is saved; "" when there is no output_dir."""
    if not self.config.output_dir:
      return ""
    return os.path.join(self.config.output_dir, f"{self.name}_labels.txt")

  def get_examples(self, split):
    if split not in SPLITS:
      raise UserError(f"chunk: unknown split '{split}' (choose from "
                      f"{', '.join(SPLITS)})")
    path = self.path(split)
    sentences = read_conll(path)
    if split == "train" and self._labels is None:
      self._labels = self._load_or_build_labels(sentences)
    self._check_known(path, sentences)
    return [TaggingExample(guid=f"{split}-{i}", words=s.words,
                           tags=tagging_utils.iob2_to_bioes(s.tags))
            for i, s in enumerate(sentences)]

  @property
  def label_list(self):
    """The sorted tag set: O plus B/I/E/S of each chunk type in train."""
    if self._labels is None:
      self._labels = self._load_or_build_labels(None)
    return self._labels

  def _load_or_build_labels(self, train_sentences):
    saved = self.labels_path()
    if saved and storage.exists(saved):
      labels = storage.read_text(saved).split()
      if not labels:
        raise UserError(f"{saved} is empty; delete it to rebuild the tag set")
      return labels
    if train_sentences is None:
      train_sentences = read_conll(self.path("train"))
    # Every prefix of each type: a test chunk may be longer (or shorter)
    # than any train chunk of its type (CoNLL-2000 test has a two-word LST
    # chunk; train only one-word ones).
    kinds = {tagging_utils.split_tag(t)[1] for s in train_sentences
             for t in s.tags} - {""}
    labels = tagging_utils.bioes_tag_set(kinds)
    if saved:
      storage.makedirs(self.config.output_dir)
      outputs.write_text(saved, "\n".join(labels) + "\n")
    return labels

  def _check_known(self, path, sentences):
    known = set(self.label_list)
    for s in sentences:
      for tag, number in zip(s.tags, s.lines):
        kind = tagging_utils.split_tag(tag)[1]
        if kind and f"B-{kind}" not in known:
          source = self.labels_path() or self.path("train")
          raise UserError(f"{path} line {number}: chunk tag '{tag}' has a "
                          f"type the training data lacks (tag set from "
                          f"{source})")

  # ------------------------------------------------------------ features
  def featurize(self, examples, is_training):
    del is_training  # the same rows either way
    seq_len = self.config.max_seq_length
    special = self.tokenizer.special_ids
    label_ids = self._label_index(examples)
    pieces = iter(self.tokenizer.tokenize_batch(
        [w for e in examples for w in e.words]))
    n = len(examples)
    features = {
        "input_ids": np.full((n, seq_len), special["pad"], np.int32),
        "input_mask": np.zeros((n, seq_len), np.int32),
        "segment_ids": np.zeros((n, seq_len), np.int32),
        "example_index": np.arange(n, dtype=np.int32),
        "label_ids": np.zeros((n, seq_len), np.int32),
        "label_weights": np.zeros((n, seq_len), np.float32),
    }
    self.truncated_sentences = self.truncated_words = 0
    for row, (example, ids) in enumerate(zip(examples, label_ids)):
      word_pieces = [next(pieces) for _ in example.words]
      tokens, starts = pack_words(word_pieces, seq_len - 2, special["unk"])
      self._fill_row(features, row, tokens, starts, ids, special)
      cut = len(example.words) - len(starts)
      self.truncated_sentences += cut > 0
      self.truncated_words += cut
    if self.truncated_words:
      print(f"chunk: {self.truncated_sentences} sentence(s) longer than "
            f"max_seq_length {seq_len}: {self.truncated_words} word(s) cut "
            "(scored as O)", flush=True)
    return features

  @staticmethod
  def _fill_row(features, row, tokens, starts, label_ids, special):
    tokens = [special["cls"]] + tokens + [special["sep"]]
    features["input_ids"][row, :len(tokens)] = tokens
    features["input_mask"][row, :len(tokens)] = 1
    positions = np.asarray(starts, np.int64) + 1  # after [CLS]
    features["label_ids"][row, positions] = label_ids[:len(starts)]
    features["label_weights"][row, positions] = 1.0

  def _label_index(self, examples):
    index = {tag: i for i, tag in enumerate(self.label_list)}
    out = []
    for example in examples:
      unknown = [t for t in example.tags if t not in index]
      if unknown:
        raise UserError(f"chunk example {example.guid}: tag '{unknown[0]}' "
                        "is not in the training data's tag set")
      out.append([index[t] for t in example.tags])
    return out

  # ---------------------------------------------------------- head, loss
  def build_head(self, encoder_config):
    return LinearHead(encoder_config, len(self.label_list),
                      name=f"{self.name}_head")

  def loss_and_outputs(self, head, hidden, features, training):
    """Per row: the mean cross-entropy over its tagged (first) subwords."""
    logits = ops.cast(head(hidden, training=training), "float32")
    log_probs = ops.log_softmax(logits, axis=-1)
    labels = ops.cast(features["label_ids"], "int32")
    weights = ops.cast(features["label_weights"], "float32")
    nll = -ops.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]
    loss = (ops.sum(nll * weights, axis=-1) /
            ops.maximum(ops.sum(weights, axis=-1), 1.0))
    return loss, {"predictions": ops.argmax(logits, axis=-1),
                  "label_weights": weights}

  def get_scorer(self, examples, features):
    return tagging_metrics.ChunkingScorer(examples, features,
                                          self.label_list)
