"""A corpus file as cleaned lines of text, whatever bytes it holds.

Reads in large chunks (a huge file never sits whole in memory, and a huge
line is cut into pieces), decodes UTF-8 dropping what does not decode,
removes control and invisible characters (`clean_text`), and tells binary
files and junk lines from text. The format readers of `dataset.corpus`
read every file through `read_lines`.
"""

import re

from util import storage

_READ_CHUNK = 8 << 20  # bytes per read: large files never sit whole in RAM
# A "line" without a newline is cut here (at a space if it can be), so one
# huge line never needs more memory than this. Long enough for a book-sized
# JSON Lines record.
_MAX_LINE_BYTES = 64 << 20
_SNIFF_BYTES = 8192  # head of a file looked at to tell binary from text
# Lines (and file heads) with more than this share of undecodable bytes or
# control characters are binary, not text with a few bad bytes.
_MAX_JUNK_SHARE = 0.25

# Undecodable bytes (already U+FFFD), C0/C1 controls other than whitespace,
# and lone surrogates (from JSON "\ud800" escapes; TF cannot encode them).
# BERT's basic tokenizer drops these too.
_JUNK = "\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufffd"
_JUNK_RE = re.compile(f"[{_JUNK}]")
# Invisible format characters (soft hyphen, zero-width space, bidi marks,
# word joiner, BOM): dropped too. ZWJ/ZWNJ stay: emoji sequences and some
# scripts need them.
_INVISIBLE = ("\u00ad\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064"
              "\u2066-\u2069\ufeff")
_DROP_RE = re.compile(f"[{_JUNK}{_INVISIBLE}]+")
# Whitespace other than " " and "\n" (tab, VT, FF, CR, NEL, line and
# paragraph separators) becomes a space: tokenizers disagree on these.
_SPACE_RE = re.compile("[\t\x0b\x0c\r\x85\u2028\u2029]")
_ODD_RE = re.compile(f"[{_JUNK}{_INVISIBLE}\t\x0b\x0c\r\x85\u2028\u2029]")


def _cut_point(data, limit):
  """Where to cut a too-long line: after the last space before `limit`,
  else at a UTF-8 character boundary (never inside a character)."""
  cut = data.rfind(b" ", limit // 2, limit)
  if cut >= 0:
    return cut + 1
  cut = limit
  while cut > limit - 4 and (data[cut] & 0xC0) == 0x80:
    cut -= 1
  return cut


def _open(path):
  # Local files through Python: tf.io.gfile rejects names that are not
  # UTF-8 (they arrive here surrogate-escaped).
  return storage.open_file(path, "rb") if "://" in path else open(path, "rb")


class BinaryFile(Exception):
  """Raised on the first read of a file that is not text."""


def _byte_lines(path, stats):
  """Yields the lines of a file as bytes, reading in large chunks."""
  with _open(path) as f:
    parts, size = [], 0  # the unfinished line
    first = True
    while True:
      chunk = f.read(_READ_CHUNK)
      if not chunk:
        break
      if first and is_binary(chunk[:_SNIFF_BYTES]):
        raise BinaryFile(path)
      first = False
      newline = chunk.find(b"\n")
      if newline >= 0:
        parts.append(chunk[:newline])
        yield b"".join(parts)
        lines = chunk[newline + 1:].split(b"\n")
        rest = lines.pop()
        yield from lines
        parts, size = [rest], len(rest)
      else:
        # Joined only once a newline comes: no quadratic copying.
        parts.append(chunk)
        size += len(chunk)
      if size > _MAX_LINE_BYTES:
        line = b"".join(parts)
        while len(line) > _MAX_LINE_BYTES:
          cut = _cut_point(line, _MAX_LINE_BYTES)
          stats.long_lines_cut += 1
          yield line[:cut]
          line = line[cut:]
        parts, size = [line], len(line)
    if size:
      yield b"".join(parts)


def _junk_share(text):
  """Share of undecodable / control characters among the visible ones."""
  visible = len(text) - sum(text.count(c) for c in " \t\r")
  junk = len(text) - len(_JUNK_RE.sub("", text))
  return junk / max(visible, 1)


def clean_text(text):
  """Drops control, undecodable and invisible characters and turns odd
  whitespace into spaces; keeps newlines. Cheap for ordinary text."""
  if not _ODD_RE.search(text):
    return text
  return _SPACE_RE.sub(" ", _DROP_RE.sub("", text))


def read_lines(path, stats):
  """Cleaned lines of a file; None for a dropped junk line (mostly
  undecodable bytes or control characters), counted as a binary line."""
  for raw in _byte_lines(path, stats):
    try:
      line = raw.decode("utf-8")
    except UnicodeDecodeError:
      stats.bad_byte_lines += 1
      line = raw.decode("utf-8", errors="replace")
    cleaned = clean_text(line)
    if cleaned is line:  # the common case: nothing odd in it
      yield line
    elif not cleaned.strip():
      if _JUNK_RE.search(line):
        stats.binary_lines += 1
        yield None
      else:  # only spaces or invisible characters: still a blank line
        yield ""
    elif _junk_share(line) > _MAX_JUNK_SHARE:
      stats.binary_lines += 1
      yield None
    else:
      yield cleaned


def is_binary(head):
  """Whether the first bytes of a file look like binary data, not text."""
  if not head:
    return False
  # A cut multi-byte character at the end is not junk.
  text = head.decode("utf-8", errors="replace").rstrip("\ufffd")
  return _junk_share(text) > _MAX_JUNK_SHARE


