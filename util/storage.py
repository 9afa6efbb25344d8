"""All file I/O goes through here so `gs://` paths work like local ones.

Uses `tf.io.gfile` when TensorFlow is importable, else the local filesystem
(the GPU machines carry JAX but no TensorFlow).
"""

import glob as _glob
import os
import shutil

_GFILE = []


def _gfile_or_none():
  """tf.io.gfile, imported on first use (quietly), or None without TF."""
  if not _GFILE:
    try:
      from util.tf_quiet import import_tensorflow
      _GFILE.append(import_tensorflow().io.gfile)
    except ImportError:  # TF-free machines (the GPU boxes carry only JAX)
      _GFILE.append(None)
  return _GFILE[0]


def exists(path):
  _gfile = _gfile_or_none()
  return _gfile.exists(path) if _gfile else os.path.exists(path)


def isdir(path):
  _gfile = _gfile_or_none()
  return _gfile.isdir(path) if _gfile else os.path.isdir(path)


def makedirs(path):
  _gfile = _gfile_or_none()
  if _gfile:
    _gfile.makedirs(path)
  else:
    os.makedirs(path, exist_ok=True)


def listdir(path):
  _gfile = _gfile_or_none()
  return sorted(_gfile.listdir(path) if _gfile else os.listdir(path))


def glob(pattern):
  _gfile = _gfile_or_none()
  return sorted(_gfile.glob(pattern) if _gfile else _glob.glob(pattern))


def open_file(path, mode="r"):
  _gfile = _gfile_or_none()
  return _gfile.GFile(path, mode) if _gfile else open(path, mode)


def read_text(path):
  with open_file(path, "r") as f:
    return f.read()


def write_text_atomic(path, text):
  """Writes to a temporary name, then renames: readers never see half."""
  _gfile = _gfile_or_none()
  tmp = path + ".tmp"
  with open_file(tmp, "w") as f:
    f.write(text)
  rename(tmp, path, overwrite=True)


def rename(src, dst, overwrite=False):
  _gfile = _gfile_or_none()
  if _gfile:
    _gfile.rename(src, dst, overwrite=overwrite)
  else:
    if not overwrite and os.path.exists(dst):
      raise FileExistsError(dst)
    os.replace(src, dst)


def remove(path):
  _gfile = _gfile_or_none()
  if _gfile:
    _gfile.remove(path)
  else:
    os.remove(path)


def rmtree(path):
  _gfile = _gfile_or_none()
  if _gfile:
    _gfile.rmtree(path)
  else:
    shutil.rmtree(path)


def size(path):
  _gfile = _gfile_or_none()
  return _gfile.stat(path).length if _gfile else os.path.getsize(path)


def join(*parts):
  return os.path.join(*parts)
