"""Input text read strictly: UTF-8 or one clear error naming the file and
line, never a traceback and never text silently changed. Reads in chunks,
so binary input (even an endless one) fails at its first bad byte."""

import codecs
import json
import os

from util import storage
from util.errors import UserError

_CHUNK = 1 << 20


def read_stream(stream, where):
  """A binary stream's text; `where` names it (a path or "stdin")."""
  decoder = codecs.getincrementaldecoder("utf-8")()
  parts, lines = [], 0
  while True:
    data = stream.read(_CHUNK)
    try:
      text = decoder.decode(data, final=not data)
    except UnicodeDecodeError as e:
      line = lines + data.count(b"\n", 0, max(e.start, 0)) + 1
      bad = data[e.start:e.start + 1]
      what = f"byte 0x{bad.hex()}" if bad else "it ends inside a character"
      raise UserError(f"{where} line {line}: not UTF-8 text ({what}); save "
                      "it as UTF-8") from None
    if "\x00" in text:  # valid UTF-8, but binary data
      line = lines + text.count("\n", 0, text.index("\x00")) + 1
      raise UserError(f"{where} line {line}: binary data (a NUL byte), "
                      "not text")
    lines += text.count("\n")
    parts.append(text)
    if not data:
      break
  text = "".join(parts)
  return text[1:] if text.startswith("\ufeff") else text


def read_text(path):
  """A UTF-8 text file's contents (a leading BOM dropped)."""
  if not storage.exists(path):
    raise UserError(f"{path} not found")
  if storage.isdir(path):
    raise UserError(f"{path} is a folder, not a file")
  if "://" not in path and not os.path.isfile(path):
    raise UserError(f"{path} is not a regular file (a device or a pipe)")
  try:
    with storage.open_file(path, "rb") as f:
      return read_stream(f, path)
  except OSError as e:
    raise UserError(f"cannot read {path}: {e.strerror or e}") from None


def split_lines(text):
  """Lines as a file opened in text mode gives them (\\n, \\r\\n or \\r
  ends a line; other separators such as U+2028 stay inside it)."""
  lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
  return lines[:-1] if lines[-1] == "" else lines


def read_lines(path):
  return split_lines(read_text(path))


def parse_json(text, where):
  """JSON text's value; one clear error when it is not JSON."""
  try:
    return json.loads(text)
  except json.JSONDecodeError as e:
    raise UserError(f"{where} is not valid JSON: {e.msg} at line "
                    f"{e.lineno} column {e.colno}") from None
  except (ValueError, RecursionError) as e:  # huge numbers, deep nesting
    raise UserError(f"{where} is not usable JSON ({str(e)[:80]})") from None


def read_json(path):
  return parse_json(read_text(path), path)
