"""Finding a corpus's files: a directory (searched recursively) or a glob.

Hidden entries are left out; a directory reached twice (a symlink loop),
a path that cannot be listed or stat'ed and a special file (a FIFO would
block) are counted in the `dataset.corpus.ReadStats` the builder reports,
not fatal.
"""

import os
import stat

from dataset.corpus import ReadStats
from dataset.corpus import io_errors
from util import storage
from util.errors import UserError

GLOB_CHARS = "*?["


def _walk_remote(path, stats):
  """All files under a gs:// (or similar) path, without recursion."""
  out, pending = [], [path]
  while pending:
    top = pending.pop()
    try:
      names = storage.listdir(top)
    except io_errors() as e:
      stats.unreadable_files += 1
      stats.note_problem(top, e)
      continue
    for name in names:
      if name.startswith("."):
        continue
      child = storage.join(top, name.rstrip("/"))
      # gs:// listings mark directories with a trailing slash.
      if name.endswith("/") or storage.isdir(child):
        pending.append(child)
      else:
        out.append(child)
  return out


def _walk(path, stats):
  """All regular files under a local `path`; skips hidden entries.

  Iterative (deep trees cannot overflow the stack) and each directory is
  entered once, known by device and inode (symlink loops end). Entries that
  cannot be listed or stat'ed and special files (FIFOs would block) are
  counted and left out.
  """
  out, pending, seen = [], [path], set()
  while pending:
    top = pending.pop()
    try:
      info = os.stat(top)
      if (info.st_dev, info.st_ino) in seen:
        stats.repeated_dirs += 1
        continue
      seen.add((info.st_dev, info.st_ino))
      names = os.listdir(top)
    except OSError as e:
      stats.unreadable_files += 1
      stats.note_problem(top, e)
      continue
    for name in sorted(names, reverse=True):
      if name.startswith("."):
        continue
      child = os.path.join(top, name)
      try:
        mode = os.stat(child).st_mode  # follows symlinks
      except OSError as e:  # broken symlink, symlink loop, permissions
        stats.unreadable_files += 1
        stats.note_problem(child, e)
        continue
      if stat.S_ISDIR(mode):
        pending.append(child)
      elif stat.S_ISREG(mode):
        out.append(child)
      else:
        stats.unreadable_files += 1
        stats.note_problem(child, "not a regular file")
  return out


def _expand(path, stats):
  """The files a corpus path or glob match stands for."""
  if "://" in path:
    return _walk_remote(path, stats) if storage.isdir(path) else [path]
  try:
    mode = os.stat(path).st_mode
  except OSError as e:
    stats.unreadable_files += 1
    stats.note_problem(path, e)
    return []
  if stat.S_ISDIR(mode):
    return _walk(path, stats)
  if stat.S_ISREG(mode):
    return [path]
  stats.unreadable_files += 1
  stats.note_problem(path, "not a regular file")
  return []


def find_files(corpus, stats=None):
  """Sorted corpus files: a directory (recursive) or a glob pattern.

  Entries that cannot be used are counted in `stats` (a ReadStats).
  """
  stats = stats if stats is not None else ReadStats()
  if not corpus:
    raise UserError("no corpus given: pass --corpus-dir (a directory or a "
                    "glob pattern)")
  if any(c in corpus for c in GLOB_CHARS):
    files = []
    for match in storage.glob(corpus):
      files.extend(_expand(match, stats))
  elif storage.exists(corpus):
    files = _expand(corpus, stats)
  else:
    raise UserError(f"corpus not found: {corpus}")
  files = sorted(set(files))
  if not files:
    raise UserError(f"corpus has no files: {corpus}" + (
        f" ({describe_skipped(stats)})" if stats.unreadable_files +
        stats.repeated_dirs else ""))
  return files


def describe_skipped(stats):
  """A short account of the unusable files of `stats`, for messages."""
  parts = [(stats.files_without_text, "without text"),
           (stats.binary_files, "binary/non-UTF-8"),
           (stats.unreadable_files, "unreadable")]
  text = ", ".join(f"{n} {what}" for n, what in parts if n)
  if stats.repeated_dirs:
    text += (", " if text else "") + (
        f"{stats.repeated_dirs} repeated directory link(s)")
  return text or "no usable files"
