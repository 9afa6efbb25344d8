"""Format-sniffing corpus readers: a file -> documents.

Every reader yields documents, each a list of non-empty paragraph strings.
Three formats are recognised per file:
  * plain text: one paragraph per line, blank lines between documents;
  * WikiExtractor: `<doc ...>` title-line paragraphs... `</doc>`;
  * JSON Lines: one object per line whose "text" field is a document.
Hostile input is never fatal: bytes that are not UTF-8 are dropped, control
characters are removed (see `dataset.text_lines`), lines or files that are
mostly binary and files that cannot be read are skipped. `ReadStats` counts
all of it so the builder can say what it left out and why.
"""

import dataclasses
import json
import sys

from dataset.text_lines import BinaryFile
from dataset.text_lines import clean_text
from dataset.text_lines import read_lines

PLAIN = "plain"
WIKIEXTRACTOR = "wikiextractor"
JSONL = "jsonl"

_MAX_PROBLEMS = 5  # unreadable paths remembered for messages


@dataclasses.dataclass
class ReadStats:
  """What reading yielded and what it skipped, with the reason."""
  docs: int = 0  # documents yielded
  skipped_docs: int = 0  # documents with no text at all
  bad_byte_lines: int = 0  # lines with undecodable bytes (bytes dropped)
  long_lines_cut: int = 0  # over text_lines._MAX_LINE_BYTES, cut up
  binary_lines: int = 0  # lines of mostly junk (bad bytes, controls)
  malformed_json_lines: int = 0  # JSON Lines lines that do not parse
  json_lines_without_text: int = 0  # not an object or no string "text"
  lines_outside_docs: int = 0  # WikiExtractor text outside <doc> blocks
  files_without_text: int = 0  # readable, but not one document in them
  binary_files: int = 0  # the file's head is mostly junk (or not UTF-8)
  unreadable_files: int = 0  # open/read/list failed, or not a regular file
  repeated_dirs: int = 0  # a directory reached again (symlink loop)
  problems: list = dataclasses.field(default_factory=list)  # "path: why"

  @property
  def skipped_lines(self):
    return (self.binary_lines + self.malformed_json_lines +
            self.json_lines_without_text + self.lines_outside_docs)

  def note_problem(self, path, error):
    if len(self.problems) < _MAX_PROBLEMS:
      self.problems.append(f"{path}: {_error_line(error)}")

  def add(self, other):
    for f in dataclasses.fields(self):
      value = getattr(self, f.name) + getattr(other, f.name)
      if f.name == "problems":
        value = value[:_MAX_PROBLEMS]
      setattr(self, f.name, value)


def _error_line(error):
  text = str(getattr(error, "message", "") or error).strip()
  return text.splitlines()[0] if text else type(error).__name__


def io_errors():
  """Exceptions that mean "this path cannot be read": OSError, plus TF's
  OpError when TF is loaded (storage then goes through tf.io.gfile)."""
  tf = sys.modules.get("tensorflow")
  op_error = getattr(getattr(tf, "errors", None), "OpError", None)
  return (OSError, op_error) if op_error else (OSError,)


def _first_lines(path, count=8):
  """Up to `count` first non-blank lines (as text) of a file."""
  lines = []
  try:
    for line in read_lines(path, ReadStats()):
      if line and line.strip():
        lines.append(line.strip())
        if len(lines) == count:
          break
  except BinaryFile:
    pass  # the reader will say so
  return lines


def _parse_json(line):
  """The JSON value of a line, or raises ValueError."""
  try:
    return json.loads(line)
  except RecursionError:  # "[[[[..." nested deeper than Python's stack
    raise ValueError("JSON nested too deeply") from None


def detect_format(path):
  name = path.lower()
  if name.endswith(".jsonl") or name.endswith(".json"):
    return JSONL
  lines = _first_lines(path)
  # Not just the first line: stray text may precede the first <doc>.
  if any(l.startswith("<doc ") or l == "<doc>" for l in lines):
    return WIKIEXTRACTOR
  first = lines[0] if lines else ""
  if first.startswith("{"):
    try:
      obj = _parse_json(first)
    except ValueError:
      obj = None
    if isinstance(obj, dict) and "text" in obj:
      return JSONL
  return PLAIN


def _paragraphs(text):
  return [p.strip() for p in text.split("\n") if p.strip()]


def _read_plain(path, stats):
  doc = []
  junk = False  # lines without usable text since the last document
  for line in read_lines(path, stats):
    if line is None:
      junk = True
      continue
    line = line.strip()
    if line:
      doc.append(line)
    elif doc:
      yield doc
      doc, junk = [], False
    elif junk:
      stats.skipped_docs += 1  # a "document" of junk lines only
      junk = False
  if doc:
    yield doc
  elif junk:
    stats.skipped_docs += 1


def _read_wikiextractor(path, stats):
  doc = None
  title_pending = False
  for line in read_lines(path, stats):
    stripped = line.strip() if line is not None else None
    if stripped is not None and (stripped.startswith("<doc ") or
                                 stripped == "<doc>"):
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
        stats.lines_outside_docs += 1
    elif title_pending:
      # The line right after <doc> repeats the title: not body text.
      title_pending = False
    elif stripped:
      doc.append(stripped)
  if doc:
    yield doc
  elif doc is not None:
    stats.skipped_docs += 1  # an unterminated, empty <doc> at the end


def _read_jsonl(path, stats):
  for line in read_lines(path, stats):
    if line is None or not line.strip():  # junk lines are counted already
      continue
    try:
      obj = _parse_json(line)
    except ValueError:
      stats.malformed_json_lines += 1
      continue
    text = obj.get("text") if isinstance(obj, dict) else None
    if not isinstance(text, str):
      stats.json_lines_without_text += 1
      continue
    # JSON escapes can carry any character: clean like file text.
    doc = _paragraphs(clean_text(text))
    if doc:
      yield doc
    else:
      stats.skipped_docs += 1


_READERS = {PLAIN: _read_plain, WIKIEXTRACTOR: _read_wikiextractor,
            JSONL: _read_jsonl}


def read_documents(path, stats=None, fmt=None):
  """Yields documents (lists of paragraphs) from one file of any format.

  Never raises for what the file holds or for I/O errors: a file that
  cannot be read, or stops being readable, ends early and is counted.
  """
  stats = stats if stats is not None else ReadStats()
  yielded = False
  try:
    for doc in _READERS[fmt or detect_format(path)](path, stats):
      stats.docs += 1
      yielded = True
      yield doc
  except BinaryFile:
    stats.binary_files += 1
    return
  except io_errors() as e:
    stats.unreadable_files += 1
    stats.note_problem(path, e)
    return
  if not yielded:
    stats.files_without_text += 1
