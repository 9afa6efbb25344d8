"""Corpus discovery, format-sniffing readers and a light sentence splitter.

Every reader yields documents, each a list of non-empty paragraph strings.
Three formats are recognised per file:
  * plain text: one paragraph per line, blank lines between documents;
  * WikiExtractor: `<doc ...>` title-line paragraphs... `</doc>`;
  * JSON Lines: one object per line whose "text" field is a document.
Bytes that are not UTF-8 are replaced, never fatal; `ReadStats` counts them
along with skipped documents and malformed lines.
"""

import dataclasses
import json
import os
import re

from util import storage
from util.errors import UserError

PLAIN = "plain"
WIKIEXTRACTOR = "wikiextractor"
JSONL = "jsonl"

_READ_CHUNK = 8 << 20  # bytes per read: large files never sit whole in RAM
_GLOB_CHARS = "*?["


@dataclasses.dataclass
class ReadStats:
  docs: int = 0  # documents yielded
  skipped_docs: int = 0  # documents with no text at all
  skipped_lines: int = 0  # malformed JSON lines, text outside <doc> blocks
  bad_byte_lines: int = 0  # lines with undecodable bytes (replaced)

  def add(self, other):
    for f in dataclasses.fields(self):
      setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


def _walk(path):
  """All files under `path`, recursively; skips hidden entries."""
  out = []
  for name in storage.listdir(path):
    if name.startswith("."):
      continue
    child = storage.join(path, name.rstrip("/"))
    # gs:// listings mark directories with a trailing slash.
    if name.endswith("/") or storage.isdir(child):
      out.extend(_walk(child))
    else:
      out.append(child)
  return out


def _absolute(path):
  return path if "://" in path else os.path.abspath(path)


def find_files(corpus, exclude_dir=None):
  """Sorted corpus files: a directory (recursive) or a glob pattern."""
  if not corpus:
    raise UserError("no corpus given: pass --corpus-dir (a directory or a "
                    "glob pattern)")
  if any(c in corpus for c in _GLOB_CHARS):
    files = []
    for match in storage.glob(corpus):
      files.extend(_walk(match) if storage.isdir(match) else [match])
  elif storage.isdir(corpus):
    files = _walk(corpus)
  elif storage.exists(corpus):
    files = [corpus]
  else:
    raise UserError(f"corpus not found: {corpus}")
  if exclude_dir:
    # Never read our own output when it sits inside the corpus directory.
    prefix = _absolute(exclude_dir).rstrip("/") + "/"
    files = [f for f in files if not _absolute(f).startswith(prefix)]
  files = sorted(set(files))
  if not files:
    raise UserError(f"corpus has no files: {corpus}")
  return files


def _byte_lines(path):
  """Yields the lines of a file as bytes, reading in large chunks."""
  with storage.open_file(path, "rb") as f:
    rest = b""
    while True:
      chunk = f.read(_READ_CHUNK)
      if not chunk:
        break
      lines = (rest + chunk).split(b"\n")
      rest = lines.pop()
      yield from lines
    if rest:
      yield rest


def _text_lines(path, stats):
  for raw in _byte_lines(path):
    try:
      line = raw.decode("utf-8")
    except UnicodeDecodeError:
      stats.bad_byte_lines += 1
      line = raw.decode("utf-8", errors="replace")
    yield line.rstrip("\r")


def _first_line(path):
  """The first non-blank line (as text) of a file, or ''."""
  for raw in _byte_lines(path):
    if raw.strip():
      return raw.decode("utf-8", errors="replace").strip()
  return ""


def detect_format(path):
  name = path.lower()
  if name.endswith(".jsonl") or name.endswith(".json"):
    return JSONL
  first = _first_line(path)
  if first.startswith("<doc ") or first == "<doc>":
    return WIKIEXTRACTOR
  if first.startswith("{"):
    try:
      obj = json.loads(first)
    except ValueError:
      obj = None
    if isinstance(obj, dict) and "text" in obj:
      return JSONL
  return PLAIN


def _paragraphs(text):
  return [p.strip() for p in text.split("\n") if p.strip()]


def _read_plain(path, stats):
  doc = []
  for line in _text_lines(path, stats):
    line = line.strip()
    if line:
      doc.append(line)
    elif doc:
      yield doc
      doc = []
  if doc:
    yield doc


def _read_wikiextractor(path, stats):
  doc = None
  title_pending = False
  for line in _text_lines(path, stats):
    stripped = line.strip()
    if stripped.startswith("<doc ") or stripped == "<doc>":
      if doc:  # an unterminated <doc>: keep what it had
        yield doc
      elif doc is not None:
        stats.skipped_docs += 1
      doc, title_pending = [], True
    elif stripped == "</doc>":
      if doc:
        yield doc
      elif doc is not None:
        stats.skipped_docs += 1
      doc = None
    elif doc is None:
      if stripped:
        stats.skipped_lines += 1
    elif title_pending:
      # The line right after <doc> repeats the title: not body text.
      title_pending = False
    elif stripped:
      doc.append(stripped)
  if doc:
    yield doc


def _read_jsonl(path, stats):
  for line in _text_lines(path, stats):
    if not line.strip():
      continue
    try:
      obj = json.loads(line)
    except ValueError:
      stats.skipped_lines += 1
      continue
    text = obj.get("text") if isinstance(obj, dict) else None
    if not isinstance(text, str):
      stats.skipped_lines += 1
      continue
    doc = _paragraphs(text)
    if doc:
      yield doc
    else:
      stats.skipped_docs += 1


_READERS = {PLAIN: _read_plain, WIKIEXTRACTOR: _read_wikiextractor,
            JSONL: _read_jsonl}


def read_documents(path, stats=None, fmt=None):
  """Yields documents (lists of paragraphs) from one file of any format."""
  stats = stats if stats is not None else ReadStats()
  for doc in _READERS[fmt or detect_format(path)](path, stats):
    stats.docs += 1
    yield doc


# A sentence ends at . ! or ? (plus closing quotes/brackets), then whitespace,
# then something that can open a sentence: an upper-case letter, a digit or an
# opening quote/bracket.
_BOUNDARY = re.compile(r"([.!?][\"'\u201d\u2019)\]]*)\s+"
                       r"(?=[\"'\u201c\u2018(\[]?[A-Z0-9\u00c0-\u00de])")
# Words whose trailing period rarely ends a sentence.
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof st jr sr vs etc e.g i.e no vol fig approx ca c "
    "inc ltd co corp gen col lt sgt capt rev hon gov sen rep pres mt ft "
    "jan feb mar apr jun jul aug sep sept oct nov dec".split())


def _ends_with_abbreviation(paragraph, start, end):
  """Whether the word just before paragraph[end] (a period) is an
  abbreviation or an initial, so the period does not end a sentence."""
  # rfind, not a regex: this runs for every candidate boundary.
  cut = max(paragraph.rfind(" ", start, end), start - 1) + 1
  word = paragraph[cut:end].lstrip("\"'(\u201c[").rstrip(".").lower()
  # Single letters are initials ("J. R. R. Tolkien").
  return (len(word) == 1 and word.isalpha()) or word in _ABBREVIATIONS


def split_sentences(paragraph):
  """Splits a paragraph into sentences with a light regex heuristic."""
  sentences = []
  start = 0
  for match in _BOUNDARY.finditer(paragraph):
    end = match.end(1)
    if (match.group(1)[0] == "." and
        _ends_with_abbreviation(paragraph, start, match.start(1) + 1)):
      continue
    sentence = paragraph[start:end].strip()
    if sentence:
      sentences.append(sentence)
    start = match.end()
  tail = paragraph[start:].strip()
  if tail:
    sentences.append(tail)
  return sentences
