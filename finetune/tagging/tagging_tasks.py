"""Word taggers on the encoder: CoNLL-2000 chunking and POS tagging.

Chunking files: RAW_DATA_DIR/chunk/train.txt, dev.txt and test.txt, `WORD
POS CHUNK` per line and a blank line between sentences. ELECTRA reports
chunk F1 on the official test set: CoNLL-2000 as distributed (train.txt,
test.txt) is read with test.txt as dev (finetune/data_layout.py).

POS files: RAW_DATA_DIR/pos/<split>.txt, the same CoNLL-2000 files (the
POS column is the second) or the usual Penn Treebank layouts: `word TAG`
per line (a tab or spaces between) with a blank line between sentences,
or `word/TAG word/TAG ...` one sentence per line (a slash inside a word
escaped as backslash-slash). The layout is read off the file's first line.

Words are tagged at their first subword ([CLS] subwords [SEP]); the other
subwords, [CLS], [SEP] and padding carry label weight 0. The output layer
is a per-token softmax, or a linear-chain CRF over the words with
`tagging_crf` (finetune/tagging/crf.py).
"""

import dataclasses
import os

import numpy as np
from keras import ops

from finetune import data_layout
from finetune.heads import LinearHead
from finetune.tagging import crf
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
COLUMNS = "columns"  # WORD ... per line, a blank line between sentences
SLASH = "word/TAG"  # word/TAG word/TAG ... one sentence per line


def read_conll(path, tag_column=-1, layouts=(COLUMNS,),
               expected="'WORD POS CHUNK'", same_columns=False,
               check_tag=None):
  """Sentences of a tagged file. In the column layout the first column is
  the word and `tag_column` the tag (`same_columns`: every line has as
  many columns as the first); SLASH among `layouts` also reads word/TAG
  tokens, when the file's first line is all word/TAG tokens.
  `check_tag(path, line_number, tag)` raises on a malformed tag."""
  lines = text_files.read_lines(path)
  first = next((i for i, line in enumerate(lines)
                if line.split() and line.split()[0] != "-DOCSTART-"), None)
  if first is None:
    raise UserError(f"{path} has no sentences")
  if SLASH in layouts and all(_slash_token(t) for t in lines[first].split()):
    return _read_slash(path, lines, first + 1, check_tag)
  sentences, current = [], Sentence([], [], [])
  width = len(lines[first].split())
  for number, line in enumerate(lines, 1):
    fields = line.split()
    if not fields or fields[0] == "-DOCSTART-":
      if current.words:
        sentences.append(current)
      current = Sentence([], [], [])
      continue
    if len(fields) < 2:
      raise UserError(f"{path} line {number}: expected {expected}, got "
                      f"{line.strip()[:60]!r}")
    if same_columns and len(fields) != width:
      raise UserError(f"{path} line {number}: {len(fields)} columns, but "
                      f"line {first + 1} has {width} (expected {expected}; "
                      f"a space inside a word?): {line.strip()[:60]!r}")
    if check_tag:
      check_tag(path, number, fields[tag_column])
    current.words.append(fields[0])
    current.tags.append(fields[tag_column])
    current.lines.append(number)
  if current.words:
    sentences.append(current)
  return sentences


def _slash_token(token):
  """(word, tag) of a `word/TAG` token (an escaped slash stays in the
  word), or None when it is not one."""
  word, slash, tag = token.rpartition("/")
  if not slash or not word or not tag or word.endswith("\\"):
    return None
  return word.replace("\\/", "/"), tag


def _read_slash(path, lines, layout_line, check_tag):
  sentences = []
  for number, line in enumerate(lines, 1):
    tokens = line.split()
    if not tokens:
      continue
    sentence = Sentence([], [], [])
    for token in tokens:
      pair = _slash_token(token)
      if pair is None:
        raise UserError(f"{path} line {number}: {token[:40]!r} is not a "
                        "word/TAG token (the file is in the word/TAG "
                        f"layout, as its line {layout_line} is)")
      if check_tag:
        check_tag(path, number, pair[1])
      sentence.words.append(pair[0])
      sentence.tags.append(pair[1])
      sentence.lines.append(number)
    sentences.append(sentence)
  return sentences


def check_chunk_tag(path, number, tag):
  try:
    tagging_utils.split_tag(tag)
  except ValueError:
    raise UserError(f"{path} line {number}: malformed chunk tag "
                    f"'{tag[:40]}' (expected O or B-, I-, E-, S-TYPE)") \
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


class TaggingTask(Task):
  """A word tagger: a tag per word at its first subword, a softmax (or,
  with tagging_crf, a CRF) over a linear layer on the encoder. Subclasses
  say how to read a file (`read`), which tags a training set gives
  (`tag_set`), which tags they model (`model_tags`) and how to score."""

  name = ""
  predictions_ext = ".txt"
  kind = "tag"  # in messages: "chunk tag 'X'", "POS tag 'X'"
  cut_words = ""  # how a word cut by truncation is scored
  # A dev/test tag the training data lacks: an error, or (True) a word
  # scored as wrong (its loss term is against tag 0).
  unseen_tags_ok = False

  def __init__(self, config, tokenizer):
    super().__init__(config, tokenizer)
    self._labels = None
    self._said = False  # the note that test.txt is the dev set
    self.truncated_sentences = 0  # from the last featurize call
    self.truncated_words = 0

  # ------------------------------------------------------------ examples
  def path(self, split):
    """RAW_DATA_DIR/<task>/<split>.txt; chunking's dev, without dev.txt,
    is CoNLL-2000's test.txt (finetune/data_layout.py), said once."""
    path = data_layout.require(self.config.raw_data_dir, self.name, split)
    if split == "dev" and data_layout.dev_is_test(path) and not self._said:
      self._said = True
      print(f"{self.name}: no dev.txt in {os.path.dirname(path)}: its "
            "test.txt is the dev set (CoNLL-2000 as distributed; ELECTRA "
            "reports test F1)", flush=True)
    return path

  def labels_path(self):
    """Where the tag set is saved; "" when there is no output_dir."""
    if not self.config.output_dir:
      return ""
    return os.path.join(self.config.output_dir, f"{self.name}_labels.txt")

  def read(self, path):
    """[Sentence] of an existing file."""
    raise NotImplementedError

  def tag_set(self, train_sentences):
    """The sorted tags the model predicts, from the training sentences."""
    raise NotImplementedError

  def model_tags(self, tags):
    """A sentence's tags as the model predicts them (chunking: BIOES)."""
    return tags

  def unknown_tag(self, tag, known):
    """Why `tag` cannot be scored with the tag set `known`, or ""."""
    return "" if tag in known else (
        f"{self.kind} tag '{tag[:40]}' is not in the training data's tag set")

  def get_examples(self, split):
    if split not in SPLITS:
      raise UserError(f"{self.name}: unknown split '{split}' (choose from "
                      f"{', '.join(SPLITS)})")
    path = self.path(split)
    sentences = self.read(path)
    if split == "train" and self._labels is None:
      self._labels = self._load_or_build_labels(sentences)
    self._check_known(path, sentences, split)
    return [TaggingExample(guid=f"{split}-{i}", words=s.words,
                           tags=self.model_tags(s.tags))
            for i, s in enumerate(sentences)]

  def read_file(self, path):
    """Any file in the task's layout (tagged: the scorer writes each word's
    gold and predicted tag, as for dev)."""
    sentences = self.read(path)
    self._check_known(path, sentences, "dev")
    return [TaggingExample(guid=f"predict-{i}", words=s.words,
                           tags=self.model_tags(s.tags))
            for i, s in enumerate(sentences)], True

  # ------------------------------------------------- a fine-tuned model
  @property
  def head_kind(self):
    return "tagging_crf" if self.config.tagging_crf else "tagging"

  def head_labels(self):
    return list(self.label_list)

  def restore_labels(self, labels):
    """A fine-tuned model's tag set, instead of the training data's."""
    self._labels = list(labels)

  @property
  def label_list(self):
    """The sorted tag set, from train (or as saved by an earlier run)."""
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
      train_sentences = self.read(self.path("train"))
    labels = self.tag_set(train_sentences)
    if saved:
      storage.makedirs(self.config.output_dir)
      outputs.write_text(saved, "\n".join(labels) + "\n")
    return labels

  def _check_known(self, path, sentences, split):
    known = set(self.label_list)
    unseen = {}
    for s in sentences:
      for tag, number in zip(s.tags, s.lines):
        why = self.unknown_tag(tag, known)
        if why and self.unseen_tags_ok and split != "train":
          unseen[tag] = unseen.get(tag, 0) + 1
        elif why:
          source = self.labels_path() or self.path("train")
          raise UserError(f"{path} line {number}: {why} (tag set from "
                          f"{source})")
    if unseen:
      print(f"{self.name}: {path}: {sum(unseen.values())} word(s) with tags "
            f"the training data lacks ({', '.join(sorted(unseen))}), "
            "scored as wrong", flush=True)

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
      print(f"{self.name}: {self.truncated_sentences} sentence(s) longer "
            f"than max_seq_length {seq_len}: {self.truncated_words} word(s) "
            f"cut ({self.cut_words})", flush=True)
    return features

  @staticmethod
  def _fill_row(features, row, tokens, starts, label_ids, special):
    tokens = [special["cls"]] + tokens + [special["sep"]]
    features["input_ids"][row, :len(tokens)] = tokens
    features["input_mask"][row, :len(tokens)] = 1
    # Segment 1 at every real token, [CLS] and [SEP] too, as the original
    # release's tagging featurize (its embeddings learned it so).
    features["segment_ids"][row, :len(tokens)] = 1
    positions = np.asarray(starts, np.int64) + 1  # after [CLS]
    features["label_ids"][row, positions] = label_ids[:len(starts)]
    features["label_weights"][row, positions] = 1.0

  def _label_index(self, examples):
    index = {tag: i for i, tag in enumerate(self.label_list)}
    out = []
    for example in examples:
      unknown = [t for t in example.tags if t not in index]
      if unknown and self.unseen_tags_ok:
        out.append([index.get(t, 0) for t in example.tags])
        continue
      if unknown:
        raise UserError(f"{self.name} example {example.guid}: tag "
                        f"'{unknown[0]}' is not in the training data's tag "
                        "set")
      out.append([index[t] for t in example.tags])
    return out

  # ---------------------------------------------------------- head, loss
  per_token_outputs = ("predictions", "label_weights")

  @property
  def static_length(self):  # keras' scan on TensorFlow: a known length
    return self.config.tagging_crf

  def build_head(self, model_config):
    if self.config.tagging_crf:
      return crf.CRFHead(model_config, len(self.label_list),
                         name=f"{self.name}_head")
    return LinearHead(model_config, len(self.label_list),
                      name=f"{self.name}_head")

  def loss_and_outputs(self, head, hidden, features, training):
    """Per row: the mean cross-entropy over its tagged (first) subwords;
    with a CRF, its sentence NLL divided by its number of tagged words
    (the same per-word scale), and Viterbi predictions."""
    logits = ops.cast(head(hidden, training=training), "float32")
    labels = ops.cast(features["label_ids"], "int32")
    weights = ops.cast(features["label_weights"], "float32")
    words = ops.maximum(ops.sum(weights, axis=-1), 1.0)
    if self.config.tagging_crf:
      loss = head.crf.negative_log_likelihood(logits, labels, weights) / words
      return loss, {"predictions": head.crf.decode(logits, weights),
                    "label_weights": weights}
    log_probs = ops.log_softmax(logits, axis=-1)
    nll = -ops.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]
    loss = ops.sum(nll * weights, axis=-1) / words
    return loss, {"predictions": ops.argmax(logits, axis=-1),
                  "label_weights": weights}


class Chunking(TaggingTask):
  """CoNLL-2000 chunking, BIOES tags, scored by conlleval's chunk F1."""

  name = "chunk"
  metric = "f1"
  kind = "chunk"
  cut_words = "scored as O"

  def read(self, path):
    return read_conll(path, check_tag=check_chunk_tag)

  def model_tags(self, tags):
    return tagging_utils.iob2_to_bioes(tags)

  def tag_set(self, train_sentences):
    """O plus B/I/E/S of each chunk type in train."""
    # Every prefix of each type: a test chunk may be longer (or shorter)
    # than any train chunk of its type (CoNLL-2000 test has a two-word LST
    # chunk; train only one-word ones).
    kinds = {tagging_utils.split_tag(t)[1] for s in train_sentences
             for t in s.tags} - {""}
    return tagging_utils.bioes_tag_set(kinds)

  def unknown_tag(self, tag, known):
    kind = tagging_utils.split_tag(tag)[1]
    if kind and f"B-{kind}" not in known:
      return f"chunk tag '{tag}' has a type the training data lacks"
    return ""

  def get_scorer(self, examples, features):
    return tagging_metrics.ChunkingScorer(examples, features,
                                          self.label_list)


class POSTagging(TaggingTask):
  """Part-of-speech tagging (Penn Treebank tags), scored by word accuracy:
  the POS column of CoNLL-2000 files, or `word TAG` / `word/TAG` files."""

  name = "pos"
  metric = "accuracy"
  kind = "POS"
  cut_words = "scored as wrong"
  unseen_tags_ok = True  # a rare tag (UH, LS) may be missing from train

  def read(self, path):
    return read_conll(path, tag_column=1, layouts=(COLUMNS, SLASH),
                      expected="'WORD TAG' or 'WORD POS CHUNK' columns",
                      same_columns=True)

  def tag_set(self, train_sentences):
    return sorted({t for s in train_sentences for t in s.tags})

  def get_scorer(self, examples, features):
    return tagging_metrics.AccuracyScorer(examples, features,
                                          self.label_list)
