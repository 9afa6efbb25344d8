"""All file I/O goes through here so `gs://` paths work like local ones.

Uses `tf.io.gfile` for remote paths (`gs://`, ...) when TensorFlow is
importable, and the local filesystem directly for local paths: that is the
same thing, and checking a local path never waits for TensorFlow to import
(the GPU machines carry JAX but no TensorFlow).
"""

import functools
import glob as _glob
import os
import shutil

def _gfile(path):
  """tf.io.gfile for a remote path (imported on first use), else None."""
  return _tf_gfile() if "://" in str(path) else None


@functools.cache
def _tf_gfile():
  """tf.io.gfile, imported quietly, or None without TF."""
  try:
    from util.tf_quiet import import_tensorflow
    return import_tensorflow().io.gfile
  except ImportError:  # TF-free machines (the GPU boxes carry only JAX)
    return None


def exists(path):
  gfile = _gfile(path)
  return gfile.exists(path) if gfile else os.path.exists(path)


def isdir(path):
  gfile = _gfile(path)
  return gfile.isdir(path) if gfile else os.path.isdir(path)


def makedirs(path):
  gfile = _gfile(path)
  if gfile:
    gfile.makedirs(path)
  else:
    os.makedirs(path, exist_ok=True)


def listdir(path):
  gfile = _gfile(path)
  return sorted(gfile.listdir(path) if gfile else os.listdir(path))


def glob(pattern):
  gfile = _gfile(pattern)
  return sorted(gfile.glob(pattern) if gfile else _glob.glob(pattern))


def open_file(path, mode="r"):
  gfile = _gfile(path)
  if gfile:
    return gfile.GFile(path, mode)
  return open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"}))


def read_text(path):
  with open_file(path, "r") as f:
    return f.read()


def read_bytes(path):
  with open_file(path, "rb") as f:
    return f.read()


def write_text_atomic(path, text):
  """Writes to a temporary name, then renames: readers never see half."""
  tmp = path + ".tmp"
  try:
    with open_file(tmp, "w") as f:
      f.write(text)
  except BaseException:  # a full disk: the old file stays, no half copy
    if exists(tmp):
      remove(tmp)
    raise
  rename(tmp, path, overwrite=True)


def rename(src, dst, overwrite=False):
  gfile = _gfile(src)
  if gfile:
    gfile.rename(src, dst, overwrite=overwrite)
  else:
    if not overwrite and os.path.exists(dst):
      raise FileExistsError(dst)
    os.replace(src, dst)


def remove(path):
  gfile = _gfile(path)
  if gfile:
    gfile.remove(path)
  else:
    os.remove(path)


def rmtree(path):
  gfile = _gfile(path)
  if gfile:
    gfile.rmtree(path)
  else:
    shutil.rmtree(path)


def size(path):
  gfile = _gfile(path)
  return gfile.stat(path).length if gfile else os.path.getsize(path)


def join(*parts):
  return os.path.join(*parts)
