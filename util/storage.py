"""All file I/O goes through here so `gs://` paths work like local ones.

Uses `tf.io.gfile` when TensorFlow is importable, else the local filesystem
(the GPU machines carry JAX but no TensorFlow).
"""

import glob as _glob
import os
import shutil

try:
  from tensorflow.io import gfile as _gfile
except ImportError:  # pragma: no cover - exercised on TF-free machines
  _gfile = None


def exists(path):
  return _gfile.exists(path) if _gfile else os.path.exists(path)


def isdir(path):
  return _gfile.isdir(path) if _gfile else os.path.isdir(path)


def makedirs(path):
  if _gfile:
    _gfile.makedirs(path)
  else:
    os.makedirs(path, exist_ok=True)


def listdir(path):
  return sorted(_gfile.listdir(path) if _gfile else os.listdir(path))


def glob(pattern):
  return sorted(_gfile.glob(pattern) if _gfile else _glob.glob(pattern))


def open_file(path, mode="r"):
  return _gfile.GFile(path, mode) if _gfile else open(path, mode)


def read_text(path):
  with open_file(path, "r") as f:
    return f.read()


def write_text_atomic(path, text):
  """Writes to a temporary name, then renames: readers never see half."""
  tmp = path + ".tmp"
  with open_file(tmp, "w") as f:
    f.write(text)
  rename(tmp, path, overwrite=True)


def rename(src, dst, overwrite=False):
  if _gfile:
    _gfile.rename(src, dst, overwrite=overwrite)
  else:
    if not overwrite and os.path.exists(dst):
      raise FileExistsError(dst)
    os.replace(src, dst)


def remove(path):
  if _gfile:
    _gfile.remove(path)
  else:
    os.remove(path)


def rmtree(path):
  if _gfile:
    _gfile.rmtree(path)
  else:
    shutil.rmtree(path)


def size(path):
  return _gfile.stat(path).length if _gfile else os.path.getsize(path)


def join(*parts):
  return os.path.join(*parts)
