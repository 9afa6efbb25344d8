"""Batched WordPiece / SentencePiece tokenizers built on tensorflow_text.

Both kinds expose the same small surface: `tokenize_batch(lines)` returns one
list of ids per line, plus `vocab_size`, `special_ids` and `do_lower_case`.
Lines are tokenized in large eager batches and the RaggedTensor is unpacked
through its flat values and row splits: converting row by row is the slow
part otherwise.

Special tokens typed in the text ("[SEP]", "[MASK]", ...: the vocabulary's
own strings, case-sensitive) become their ids, as transformers' tokenizers
do, on every path: tokenize_batch, the graph op a SavedModel's serve_text
runs (tokenize_tensor), and so the exported vocabularies agree.
"""

import dataclasses
import io
import itertools
import operator
import re

from util import storage
from util import text_files
from util.errors import UserError

WORDPIECE = "wordpiece"
SENTENCEPIECE = "sentencepiece"
# BERT-style reserved tokens; [PAD] first so that padding is id 0 in built
# vocabularies.
RESERVED_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
_SPECIAL_NAMES = {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]",
                  "sep": "[SEP]", "mask": "[MASK]"}
# Lines per TF call inside tokenize_batch; big enough to amortize op overhead.
_CHUNK = 8192


@dataclasses.dataclass
class VocabSource:
  """The raw bytes of a vocabulary and which tokenizer reads them."""
  kind: str  # WORDPIECE or SENTENCEPIECE
  data: bytes
  name: str  # file name to use for a copy next to a dataset


def _tf():
  # Local import: the corpus/packing code stays importable without TF.
  from util.tf_quiet import import_tensorflow
  tf = import_tensorflow(with_text=True)
  import tensorflow_text as tf_text
  return tf, tf_text


def _looks_like_sentencepiece(path, data):
  if path.endswith(".model"):
    return True
  if path.endswith(".txt"):
    return False
  # A SentencePiece model is a binary protobuf; a vocab.txt is UTF-8 text.
  if b"\x00" in data[:4096]:
    return True
  try:
    data[:4096].decode("utf-8")
  except UnicodeDecodeError:
    return True
  return False


def read_vocab_source(vocab_file):
  """Reads `vocab_file` and detects its kind by extension, then content."""
  if not vocab_file:
    raise UserError("no vocabulary given: pass --vocab-file (vocab.txt or a "
                    "SentencePiece .model) or --build-vocab SIZE")
  if not storage.exists(vocab_file) or storage.isdir(vocab_file):
    raise UserError(f"vocab file not found: {vocab_file}")
  with storage.open_file(vocab_file, "rb") as f:
    data = f.read()
  if not data.strip():
    raise UserError(f"vocab file is empty: {vocab_file}")
  if _is_utf16(data):
    raise UserError(f"vocab file {vocab_file} is UTF-16 text, not UTF-8: "
                    "save it as UTF-8 (one token a line)")
  if _looks_like_sentencepiece(vocab_file, data):
    base = vocab_file.rstrip("/").split("/")[-1]
    name = base if base.endswith(".model") else "sentencepiece.model"
    return VocabSource(SENTENCEPIECE, data, name)
  # A vocab.txt decoded loosely would turn bad bytes into tokens such as
  # '\ufffd': strictly, or one line naming the first bad byte.
  text_files.read_stream(io.BytesIO(data), f"vocab file {vocab_file}")
  return VocabSource(WORDPIECE, data, "vocab.txt")


def _is_utf16(data):
  """A UTF-16 byte-order mark, or ASCII text as UTF-16 (every other byte
  NUL), as editors on Windows save "Unicode" text."""
  if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
    return True
  head = data[:4096]
  for zeros, text in ((head[1::2], head[0::2]), (head[0::2], head[1::2])):
    if len(zeros) >= 4 and zeros.count(0) >= 0.9 * len(zeros) and \
        text.count(0) == 0:
      return True
  return False


def _utf8(line):
  return line.encode("utf-8", "replace") if isinstance(line, str) else line


def _ragged_to_lists(rt):
  """[batch, (tokens)] RaggedTensor -> list of Python int lists, fast."""
  flat = rt.flat_values.numpy().tolist()
  splits = rt.row_splits.numpy().tolist()
  return [flat[splits[i]:splits[i + 1]] for i in range(len(splits) - 1)]


class Tokenizer:
  """Common batching logic; subclasses implement `_tokenize(tensor)`."""

  kind = None

  def __init__(self, vocab_size, special_ids, do_lower_case, strip_accents,
               special_tokens):
    self.vocab_size = vocab_size
    self.special_ids = special_ids
    self.do_lower_case = do_lower_case
    self.strip_accents = strip_accents
    self.special_tokens = special_tokens  # {string typed in text: id}
    # Longest first, so that no token's prefix wins.
    self._special_pattern = "|".join(
        re.escape(t) for t in sorted(special_tokens, key=len, reverse=True))

  def tokenize_batch(self, lines):
    """Returns a list of token-id lists, one per input string."""
    tf, _ = _tf()
    out = []
    for start in range(0, len(lines), _CHUNK):
      part = lines[start:start + _CHUNK]
      # Encoded here: TF cannot convert a str with a lone surrogate (e.g.
      # from a JSON "\\ud800" escape); "replace" makes it a "?".
      chunk = tf.constant([_utf8(l) for l in part], dtype=tf.string)
      # The split is only paid for where a special token is typed.
      tokenize = (self.tokenize_tensor if self._types_special(part) else
                  self._tokenize)
      out.extend(_ragged_to_lists(tokenize(chunk)))
    return out

  def _types_special(self, lines):
    """Whether any line holds a special token: lines with the tokens'
    first characters, then those for the tokens (C-level scans, ~1% of
    tokenizing)."""
    try:
      for first in {t[0] for t in self.special_tokens}:
        some = list(itertools.compress(lines, map(
            operator.contains, lines, itertools.repeat(first))))
        if some and any(any(map(operator.contains, some,
                                itertools.repeat(t)))
                        for t in self.special_tokens if t[0] == first):
          return True
      return False
    except TypeError:  # bytes lines: take the path that always works
      return True

  def _tokenize(self, strings):
    raise NotImplementedError

  def tokenize_tensor(self, strings):
    """tf.string [B] -> int32 RaggedTensor [B, (tokens)]; graph-safe, so a
    SavedModel can tokenize as tokenize_batch does. Typed special tokens
    are cut out and given their ids; the text between them is tokenized
    as usual (WordPiece splits at their brackets anyway)."""
    tf, tf_text = _tf()
    pattern = self._special_pattern
    pieces = tf_text.regex_split(strings, pattern,
                                 keep_delim_regex_pattern=pattern)
    flat = pieces.flat_values  # [P]: text pieces and special tokens
    is_special = tf.strings.regex_full_match(flat, pattern)
    plain = self._tokenize(tf.where(is_special, "", flat))  # [P, (tokens)]
    ids = tf.zeros_like(flat, tf.int32)
    for token, token_id in self.special_tokens.items():
      ids = tf.where(tf.equal(flat, token), token_id, ids)
    special = tf.RaggedTensor.from_row_lengths(
        tf.boolean_mask(ids, is_special), tf.cast(is_special, tf.int64))
    tokens = tf.concat([plain, special], axis=1)  # one of the two is empty
    return tf.RaggedTensor.from_row_splits(
        tokens, pieces.row_splits).merge_dims(1, 2)

  @property
  def tf_module(self):
    """The tensorflow_text tokenizer (a tf.Module holding the vocab)."""
    return self._tok


# The original release's BasicTokenizer._clean_text: drop NUL, U+FFFD and
# every "C*" character except \t\n\r, which become spaces like "Zs" ones.
# U+2028/U+2029 also go to spaces: its str.split() cuts at them. "Zs" is
# spelled out without " " (replacing every space with itself is slow).
_WHITESPACE = (r"[\t\n\r\x{a0}\x{1680}\x{2000}-\x{200a}\x{202f}\x{205f}"
               r"\x{3000}\x{2028}\x{2029}]")
_DROPPED = r"[\x{fffd}\p{Cc}\p{Cf}\p{Co}]"
# What FastBertTokenizer does on its own (normalization="nfkc_casefold").
NORMALIZATIONS = ("original", "nfkc_casefold")


def _normalize(strings, do_lower_case, strip_accents, case_fold=False,
               clean=True):
  """The original's text normalization in TF ops: clean as _clean_text,
  then Python-style lower-casing (tf.strings.lower on UTF-8 follows the
  same Unicode mappings: ß and final ς stay; no NFKC, so ½ and … stay one
  character), then NFD and drop combining marks (Mn)."""
  tf, tf_text = _tf()
  if clean:
    strings = tf.strings.regex_replace(strings, _WHITESPACE, " ")
    strings = tf.strings.regex_replace(strings, _DROPPED, "")
  if do_lower_case:
    strings = (tf_text.case_fold_utf8(strings) if case_fold else
               tf.strings.lower(strings, encoding="utf-8"))
  if strip_accents:
    strings = tf_text.normalize_utf8(strings, "NFD")
    strings = tf.strings.regex_replace(strings, r"\p{Mn}", "")
  return strings


class WordPieceTokenizer(Tokenizer):
  """BERT WordPiece with the original release's normalization by default
  (_normalize, then FastBertTokenizer with its own normalizer off).
  normalization="nfkc_casefold" is FastBertTokenizer's built-in one
  (NFKC case folding: ½ -> 1⁄2, ß -> ss, ς -> σ), which this class used
  before issue 37; it needs do_lower_case == strip_accents."""

  kind = WORDPIECE

  def __init__(self, vocab, do_lower_case=True, strip_accents=None,
               normalization="original"):
    if strip_accents is None:
      strip_accents = do_lower_case
    if normalization not in NORMALIZATIONS:
      raise UserError(f"unknown WordPiece normalization {normalization!r}; "
                      f"one of {', '.join(NORMALIZATIONS)}")
    if normalization == "nfkc_casefold" and do_lower_case != strip_accents:
      raise UserError("normalization nfkc_casefold lower-cases and strips "
                      "accents together")
    index = {}
    for i, token in enumerate(vocab):
      index.setdefault(token, i)
    missing = [t for t in RESERVED_TOKENS if t not in index]
    if missing:
      raise UserError(f"WordPiece vocabulary lacks special token(s) "
                      f"{', '.join(missing)}")
    special_ids = {k: index[v] for k, v in _SPECIAL_NAMES.items()}
    super().__init__(len(vocab), special_ids, do_lower_case, strip_accents,
                     {v: index[v] for v in _SPECIAL_NAMES.values()})
    self.vocab = list(vocab)
    self.normalization = normalization
    tf, tf_text = _tf()
    # The original sends a word of more than 200 characters to [UNK]; this
    # counts bytes, the same for ASCII (what accent stripping leaves of
    # most Latin text).
    self._tok = tf_text.FastBertTokenizer(
        vocab=self.vocab, token_out_type=tf.int32, unknown_token="[UNK]",
        max_bytes_per_word=200,
        lower_case_nfd_strip_accents=(normalization == "nfkc_casefold" and
                                      do_lower_case))

  def _tokenize(self, strings):
    if self.normalization == "original":
      strings = self._normalize_original(strings)
    return self._tok.tokenize(strings)

  def _normalize_original(self, strings):
    """_normalize, paid only by lines with a character outside printable
    ASCII; the others need at most ASCII lower-casing."""
    tf, _ = _tf()
    plain = tf.cast(tf.strings.regex_full_match(strings, "[ -~]*"), tf.int32)
    parts = tf.dynamic_partition(strings, plain, 2)
    where = tf.dynamic_partition(tf.range(tf.size(strings)), plain, 2)
    other = _normalize(parts[0], self.do_lower_case, self.strip_accents)
    ascii_ = tf.strings.lower(parts[1]) if self.do_lower_case else parts[1]
    return tf.dynamic_stitch(where, [other, ascii_])


class SentencePieceTokenizer(Tokenizer):
  """A SentencePiece model that carries BERT's special pieces."""

  kind = SENTENCEPIECE

  def __init__(self, model_proto, do_lower_case=False, strip_accents=None):
    if strip_accents is None:
      strip_accents = do_lower_case
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor()
    try:
      sp.LoadFromSerializedProto(model_proto)
    except Exception as e:  # sentencepiece raises plain RuntimeError/OSError
      raise UserError(f"could not read SentencePiece model ({e})") from None
    pieces = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    special_ids = {"unk": sp.unk_id()}
    missing = []
    for key in ("cls", "sep", "mask"):
      name = _SPECIAL_NAMES[key]
      if name in pieces:
        special_ids[key] = pieces[name]
      else:
        missing.append(name)
    # Padding: a [PAD] piece, else the model's own pad id (e.g. "<pad>").
    if "[PAD]" in pieces:
      special_ids["pad"] = pieces["[PAD]"]
    elif sp.pad_id() >= 0:
      special_ids["pad"] = sp.pad_id()
    else:
      missing.append("[PAD] (or a pad id)")
    if missing:
      raise UserError(f"the SentencePiece model lacks the piece(s) "
                      f"{', '.join(missing)}; train it with "
                      f"user_defined_symbols=[CLS],[SEP],[MASK] and a pad id")
    super().__init__(sp.get_piece_size(), special_ids, do_lower_case,
                     strip_accents,
                     {sp.id_to_piece(i): i for i in special_ids.values()})
    tf, tf_text = _tf()
    self._tok = tf_text.SentencepieceTokenizer(model=model_proto,
                                               out_type=tf.int32)

  def _tokenize(self, strings):
    if self.do_lower_case or self.strip_accents:
      # SentencePiece models normalize on their own; this keeps the case
      # folding they were used with here.
      strings = _normalize(strings, self.do_lower_case, self.strip_accents,
                           case_fold=True, clean=False)
    return self._tok.tokenize(strings)


def parse_wordpiece_vocab(data):
  """vocab.txt bytes -> token list; line i is id i, as in BERT."""
  text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
  # A blank line still takes an id; give it a name no text can produce.
  tokens = [line.strip() or f"<blank line {i + 1}>"
            for i, line in enumerate(text.splitlines())]
  seen = set()
  for token in tokens:
    if token in seen:
      raise UserError(f"WordPiece vocabulary has the token {token!r} twice")
    seen.add(token)
  return tokens


def tokenizer_from_source(source, do_lower_case=True, strip_accents=None,
                          normalization="original"):
  """normalization: WordPiece text normalization ("original", the
  release's; "nfkc_casefold", FastBertTokenizer's); SentencePiece ignores
  it."""
  if source.kind == SENTENCEPIECE:
    return SentencePieceTokenizer(source.data, do_lower_case, strip_accents)
  return WordPieceTokenizer(parse_wordpiece_vocab(source.data), do_lower_case,
                            strip_accents, normalization)


def load_tokenizer(vocab_file, do_lower_case=True, strip_accents=None,
                   normalization="original"):
  """Builds the right tokenizer for a vocab.txt or SentencePiece .model."""
  return tokenizer_from_source(read_vocab_source(vocab_file), do_lower_case,
                               strip_accents, normalization)


def build_wordpiece_vocab(lines, size, lower_case=True, batch_size=1024):
  """Learns a WordPiece vocabulary of at most `size` tokens from `lines`.

  The reserved tokens come first, so [PAD] is id 0. Pure-Python learning:
  about a minute for ~10 MB of text and a 30k vocabulary.
  """
  tf, _ = _tf()
  from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset
  lines = [l for l in lines if l.strip()]
  if not lines:
    raise UserError("cannot build a vocabulary: the corpus sample has no text")
  dataset = tf.data.Dataset.from_tensor_slices(
      tf.constant(lines, dtype=tf.string)).batch(batch_size)
  vocab = bert_vocab_from_dataset.bert_vocab_from_dataset(
      dataset, vocab_size=size, reserved_tokens=RESERVED_TOKENS,
      bert_tokenizer_params={"lower_case": lower_case},
      learn_params={
          # Small corpora: let rare words in rather than ending up tiny.
          "lower_thresh": 2,
          # The learner is pure Python and its time grows with the number of
          # distinct words; the rarest ones only matter for huge vocabs.
          "max_input_tokens": max(4 * size, 20000)})
  return list(vocab)
