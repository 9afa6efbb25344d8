"""A pretrained model as NumPy .npz shards + one JSON manifest, small files
that travel (the GPU slot returns at most 8 files of 16 MiB: docs/gpu_slot.md).

  DIR/weights.json          format, the run's PretrainingConfig, step, the
                            dtype stored, and where each tensor is
  DIR/weights-00000.npz ... shards, each at most max_shard_bytes

Tensors are the networks' weights under interop/weights.py's names, one
dict per role ({role: {name: array}}), so loading/sources.py reads them as
any other format (run_pretraining.py / run_finetuning.py / export_model.py
--init-checkpoint DIR). A tensor another role holds identically (the
generator's copy of shared embeddings) is stored once; a tensor larger
than a shard is split by rows. float16 halves the size (the slot's
returned weights); reading gives float32 again. NumPy only: the
TensorFlow-free JAX side writes these.
"""

import json
import os

import numpy as np

from util import storage
from util.errors import UserError

MANIFEST = "weights.json"
FORMAT = "electra-npz-weights"
VERSION = 1
SHARD = "weights-{:05d}.npz"
MAX_SHARD_BYTES = 15 * 2 ** 20  # under the slot's 16 MiB a file, headers too
DTYPES = ("float32", "float16")


def is_npz_weights(path):
  """Whether `path` is a folder this module wrote."""
  manifest = os.path.join(path, MANIFEST)
  if not (storage.isdir(path) and storage.exists(manifest)):
    return False
  try:
    return json.loads(storage.read_text(manifest)).get("format") == FORMAT
  except (ValueError, AttributeError):
    return False


def _pieces(array, max_bytes):
  """Row ranges [(start, stop)] that keep each piece under max_bytes."""
  rows = array.shape[0] if array.ndim else 1
  row_bytes = max(1, array.nbytes // max(rows, 1))
  per = max(1, max_bytes // row_bytes)
  return [(s, min(rows, s + per)) for s in range(0, rows, per)] or [(0, 0)]


def write(directory, weights_by_role, pretrain_config, dtype="float32",
          max_shard_bytes=MAX_SHARD_BYTES, step=None, extra=None):
  """Writes {role: {name: array}} and the config (a dict) to `directory`;
  returns the paths written (manifest last: it marks a complete folder)."""
  if dtype not in DTYPES:
    raise UserError(f"npz weights dtype must be one of {', '.join(DTYPES)}")
  storage.makedirs(directory)
  stored = []  # (key, array) in order
  tensors, seen = {}, {}
  for role in sorted(weights_by_role):
    tensors[role] = {}
    for name in sorted(weights_by_role[role]):
      array = np.asarray(weights_by_role[role][name], np.float32).astype(dtype)
      digest = (array.shape, array.tobytes()[:64], array.tobytes()[-64:])
      alias = next((where for where, other in seen.get(digest, [])
                    if np.array_equal(other, array)), None)
      if alias is not None:
        tensors[role][name] = {"same_as": alias}
        continue
      parts = []
      for start, stop in _pieces(array, max_shard_bytes):
        key = f"t{len(stored):05d}"
        stored.append((key, array[start:stop] if array.ndim else array))
        parts.append(key)
      tensors[role][name] = {"shape": list(array.shape), "parts": parts}
      seen.setdefault(digest, []).append((f"{role}/{name}", array))
  shards, current, size = [], {}, 0
  for key, array in stored:
    if current and size + array.nbytes > max_shard_bytes:
      shards.append(current)
      current, size = {}, 0
    current[key] = array
    size += array.nbytes
  if current or not shards:
    shards.append(current)
  where, paths = {}, []
  for i, shard in enumerate(shards):
    name = SHARD.format(i)
    path = os.path.join(directory, name)
    with storage.open_file(path, "wb") as f:
      np.savez(f, **shard)
    paths.append(path)
    where.update({key: name for key in shard})
  for role in tensors.values():
    for entry in role.values():
      if "parts" in entry:
        entry["parts"] = [[where[k], k] for k in entry["parts"]]
  manifest = {"format": FORMAT, "version": VERSION, "dtype": dtype,
              "step": step, "pretrain_config": pretrain_config,
              "shards": [os.path.basename(p) for p in paths],
              "tensors": tensors, **(extra or {})}
  path = os.path.join(directory, MANIFEST)
  storage.write_text_atomic(path, json.dumps(manifest, indent=1) + "\n")
  return paths + [path]


def read_manifest(directory):
  path = os.path.join(directory, MANIFEST)
  try:
    manifest = json.loads(storage.read_text(path))
  except (OSError, ValueError) as e:
    raise UserError(f"cannot read {path}: {e}") from None
  if manifest.get("format") != FORMAT:
    raise UserError(f"{path} is not an {FORMAT} manifest")
  if manifest.get("version", 0) > VERSION:
    raise UserError(f"{path} is version {manifest['version']}; this code "
                    f"reads up to {VERSION}")
  return manifest


def read(directory):
  """(manifest, {role: {name: float32 array}})."""
  manifest = read_manifest(directory)
  shards = {}
  for name in manifest["shards"]:
    path = os.path.join(directory, name)
    if not storage.exists(path):
      raise UserError(f"{path} is missing (listed in {MANIFEST})")
    with storage.open_file(path, "rb") as f:
      with np.load(f, allow_pickle=False) as data:
        shards[name] = {k: data[k] for k in data.files}
  flat, out = {}, {}
  for role, names in manifest["tensors"].items():
    for name, entry in names.items():
      if "same_as" in entry:
        continue
      pieces = [shards[shard][key] for shard, key in entry["parts"]]
      array = (np.concatenate(pieces) if len(pieces) > 1 else pieces[0])
      flat[f"{role}/{name}"] = array.reshape(entry["shape"]).astype(
          np.float32)
  for role, names in manifest["tensors"].items():
    out[role] = {name: flat[entry.get("same_as", f"{role}/{name}")]
                 for name, entry in names.items()}
  return manifest, out
