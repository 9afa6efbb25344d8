"""Output paths checked before any work, and files (folders: write_dir)
written whole or not at all: to a hidden temporary file beside the
target, renamed when complete. Nothing the user already has is replaced
without `overwrite`.

Remote paths (gs://...) skip the local checks; their writes go through
util/storage.py.
"""

import os
import shutil
import tempfile

from util import storage
from util.errors import UserError


def _local(path):
  return "://" not in str(path)


def _reason(error):
  return error.strerror or str(error)


def _check_existing_folder(folder, name, path):
  """`folder` (`path` or an ancestor of it) exists: it must be a folder we
  may create files in."""
  what = (f"{name} {path}" if folder == os.path.abspath(path) else
          f"{name} {path}: {folder}")
  if not os.path.exists(folder):  # lexists but not exists: a dead link
    raise UserError(f"{what} is a broken symlink or a symlink loop")
  if not os.path.isdir(folder):
    raise UserError(f"{what} is a file, not a folder")
  if not os.access(folder, os.W_OK | os.X_OK):
    raise UserError(f"cannot write to {what}: {_why_not_writable(folder)}")


def _why_not_writable(folder):
  try:
    if os.statvfs(folder).f_flag & os.ST_RDONLY:
      return "read-only file system"
  except OSError:
    pass
  return "permission denied"


def check_output_dir(path, name="output_dir"):
  """A folder this run may write in: an existing one, or one it can make
  (its nearest existing ancestor is a writable folder)."""
  if not path or not _local(path):
    return
  folder = os.path.abspath(path)
  while not os.path.lexists(folder):
    folder = os.path.dirname(folder)
  _check_existing_folder(folder, name, path)


def check_new_file(path, name, overwrite=False):
  """An output file that may be written: absent (in an existing writable
  folder) or, with `overwrite`, a regular file."""
  if not path or not _local(path):
    return
  if os.path.lexists(path):
    if not os.path.exists(path):
      raise UserError(f"{name} {path} is a broken symlink or a symlink loop")
    if os.path.isdir(path):
      raise UserError(f"{name} {path} is a folder, not a file")
    if not os.path.isfile(path):
      raise UserError(f"{name} {path} is not a regular file")
    if not overwrite:
      raise UserError(f"{name} {path} already exists: pass --overwrite to "
                      "replace it (nothing was written)")
  parent = os.path.dirname(os.path.abspath(path))
  if not os.path.lexists(parent):
    raise UserError(f"{name}: folder {os.path.dirname(path) or parent} "
                    "does not exist")
  _check_existing_folder(parent, name, path)


def same_file(a, b):
  """Whether two paths name the same existing file."""
  try:
    return bool(a and b) and os.path.samefile(a, b)
  except OSError:
    return False


def give_usual_mode(path):
  """mkstemp / mkdtemp make private files; an output gets the mode a plain
  open() or mkdir() would give it."""
  mask = os.umask(0)
  os.umask(mask)
  os.chmod(path, (0o777 if os.path.isdir(path) else 0o666) & ~mask)


def give_usual_modes(folder):
  """give_usual_mode for `folder` and everything in it: some writers
  (safetensors) make their files private too."""
  for root, dirs, files in os.walk(folder):
    for name in dirs + files:
      if not os.path.islink(os.path.join(root, name)):
        give_usual_mode(os.path.join(root, name))
  give_usual_mode(folder)


def write_atomic(path, write, binary=False):
  """Calls write(f) on a temporary file beside `path` (text, or bytes
  with `binary`), then renames it to `path`: a reader (or a crash) never
  sees half a file, and a failure leaves any previous `path` as it was."""
  if not _local(path):
    with storage.open_file(path + ".tmp", "wb" if binary else "w") as f:
      write(f)
    storage.rename(path + ".tmp", path, overwrite=True)
    return
  folder = os.path.dirname(os.path.abspath(path))
  try:
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.",
                               suffix=".incomplete", dir=folder)
  except OSError as e:
    raise UserError(f"cannot write {path}: {_reason(e)}") from None
  try:
    # "replace": a lone surrogate (from a JSON escape) cannot be UTF-8.
    with (os.fdopen(fd, "wb") if binary else
          os.fdopen(fd, "w", encoding="utf-8", errors="replace")) as f:
      write(f)
    give_usual_mode(tmp)
    os.replace(tmp, path)
  except BaseException as e:
    try:
      os.remove(tmp)
    except OSError:
      pass
    if isinstance(e, OSError):
      raise UserError(f"cannot write {path}: {_reason(e)}") from None
    raise


def write_text(path, text):
  """`text` to `path` as UTF-8, whole or not at all (write_atomic)."""
  write_atomic(path, lambda f: f.write(text))


def write_dir(path, write, overwrite=False):
  """Calls write(folder) on a hidden folder beside `path`, then moves it to
  `path`, so that a reader (or a crash) sees the old folder or the new one
  whole, never a mix. An existing `path` is replaced only with
  `overwrite` (it is moved aside first and removed once the new one is in
  place). Remote paths are written locally first, then copied."""
  if not _local(path):
    local = tempfile.mkdtemp(suffix=".incomplete")
    try:
      write(local)
      if storage.exists(path):
        if not overwrite:
          raise UserError(f"{path} already exists: pass --overwrite to "
                          "replace it")
        storage.rmtree(path)
      storage.makedirs(path)
      for name in os.listdir(local):
        with open(os.path.join(local, name), "rb") as src, \
            storage.open_file(storage.join(path, name), "wb") as dst:
          dst.write(src.read())
    finally:
      shutil.rmtree(local, ignore_errors=True)
    return
  path = os.path.abspath(path)
  if os.path.lexists(path) and not overwrite:
    raise UserError(f"{path} already exists: pass --overwrite to replace "
                    "it (nothing was written)")
  parent = os.path.dirname(path)
  try:
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.",
                               suffix=".incomplete", dir=parent)
  except OSError as e:
    raise UserError(f"cannot write {path}: {_reason(e)}") from None
  old = None
  try:
    write(staging)
    give_usual_modes(staging)
    if os.path.lexists(path):
      old = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.",
                             suffix=".old", dir=parent)
      os.replace(path, os.path.join(old, "previous"))
    os.replace(staging, path)
  except BaseException as e:
    if old and not os.path.lexists(path):  # put the previous one back
      os.replace(os.path.join(old, "previous"), path)
    shutil.rmtree(staging, ignore_errors=True)
    if old:
      shutil.rmtree(old, ignore_errors=True)
    if isinstance(e, OSError):
      raise UserError(f"cannot write {path}: {_reason(e)}") from None
    raise
  if old:
    shutil.rmtree(old, ignore_errors=True)
