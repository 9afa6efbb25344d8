"""Pretraining examples as compact NumPy arrays: the TensorFlow-free input
path of the JAX driver (pretrain/jax_trainer.py) on machines without
TensorFlow, such as the GPU slot (docs/gpu_slot.md).

`export` (on a machine with TensorFlow) reads a dataset's TFRecords, the
training shards and the held-out ones, into a folder:
  arrays.json   the dataset's metadata (vocab_size, special_ids,
                max_seq_length, ...) and what was exported
  train.npz     input_ids uint16 [N, T]; num_tokens, segment_a uint16 [N]
  heldout.npz   the same for the held-out documents (pretraining's eval)
Per example, input_mask is 1 at positions < num_tokens and segment_ids is 1
at positions in [segment_a, num_tokens): the layout build_pretraining_
dataset.py (and the original release) writes, `[CLS] A [SEP] B [SEP]` then
padding. Export checks this exactly, so `unpack` gives the TFRecords'
features back bit for bit; ~40 MB holds ~20M token positions.

`load` and `unpack` need NumPy and keras.ops only: the JAX driver keeps the
arrays on its devices and unpacks and masks (pretrain/masking.py, noise
drawn in its jitted step) each batch there.
"""

import contextlib
import json
import os
import zipfile

import numpy as np
from keras import ops

from pretrain.run_config import check_data_shape
from util import storage
from util.paths import portable
from util.errors import UserError

META = "arrays.json"
SPLITS = ("train", "heldout")
FORMAT = "electra-pretraining-arrays"
COLUMNS = ("input_ids", "num_tokens", "segment_a")


TOKEN_COUNTS = "token_counts.json"  # beside the arrays, for unigram runs
CACHE = "pretrain_arrays"  # DATA_DIR's (or MODEL_DIR's) folder of them


class Arrays:
  """A loaded folder: `meta` (dict) and, per split, {column: array}."""

  def __init__(self, meta, splits, path=""):
    self.meta, self.splits, self.path = meta, splits, path

  @property
  def train(self):
    return self.splits["train"]

  @property
  def heldout(self):
    return self.splits["heldout"]

  def with_split(self, split, columns):
    """The same arrays, `split` holding `columns` (a process's share)."""
    return Arrays(self.meta, dict(self.splits, **{split: columns}),
                  self.path)

  def num_examples(self, split="train"):
    return len(self.splits[split]["input_ids"])

  def token_counts(self):
    """The training data's per-id counts (a unigram generator's), as
    build_pretraining_dataset.py counted them; exported beside the arrays."""
    name = self.meta.get("token_counts")
    if not name:
      raise UserError(f"{self.path or 'the arrays'} were exported without "
                      "the dataset's token counts (token_counts.txt), which "
                      "unigram_generator needs: export them again from "
                      "TFRecords that have them")
    counts = np.asarray(json.loads(storage.read_text(
        os.path.join(self.path, name))), np.int64)
    if counts.shape != (self.meta["vocab_size"],):
      raise UserError(f"{os.path.join(self.path, name)} holds "
                      f"{counts.size} counts for a vocabulary of "
                      f"{self.meta['vocab_size']}")
    return counts

  def check(self, config):
    """Fills config.vocab_size from the arrays; a mismatch is a UserError
    (as pretrain/data.py's check_metadata for TFRecords)."""
    where = self.path or "the arrays"
    check_data_shape(config, self.meta, "the arrays", where,
                     "export other data")
    for split in SPLITS:
      if not self.num_examples(split):
        raise UserError(f"{where} holds no {split} examples")


def synthetic(num_examples, seq_length, vocab_size, seed=0,
              special_ids=None, heldout_examples=0):
  """Random full-length `[CLS] A [SEP] B [SEP]` examples over BERT's special
  ids: for timing steps (benchmarks/jax_throughput.py), not for learning."""
  ids = dict(special_ids or {"pad": 0, "unk": 100, "cls": 101, "sep": 102,
                             "mask": 103})
  rng = np.random.default_rng(seed)
  dtype = np.uint16 if vocab_size <= 2 ** 16 else np.uint32
  first = max(ids.values()) + 1
  half = seq_length // 2

  def split(n):
    input_ids = rng.integers(first, vocab_size, (n, seq_length)).astype(dtype)
    input_ids[:, 0] = ids["cls"]
    input_ids[:, [half - 1, seq_length - 1]] = ids["sep"]
    return {"input_ids": input_ids,
            "num_tokens": np.full(n, seq_length, np.uint16),
            "segment_a": np.full(n, half, np.uint16)}

  meta = {"format": FORMAT, "vocab_size": vocab_size, "special_ids": ids,
          "max_seq_length": seq_length, "vocab_file": "",
          "eval_source": "synthetic"}
  return Arrays(meta, {"train": split(num_examples),
                       "heldout": split(heldout_examples or num_examples)},
                "synthetic arrays")


def unpack(rows):
  """{input_ids, num_tokens, segment_a} rows -> int32 `input_ids`,
  `input_mask`, `segment_ids` [..., T] ([B, T]; multiple choice's
  [B, C, T]), as pretrain/data.py parses them."""
  ids = ops.cast(rows["input_ids"], "int32")
  positions = ops.arange(ops.shape(ids)[-1], dtype="int32")
  num_tokens = ops.cast(rows["num_tokens"], "int32")[..., None]
  segment_a = ops.cast(rows["segment_a"], "int32")[..., None]
  real = positions < num_tokens
  return {"input_ids": ids, "input_mask": ops.cast(real, "int32"),
          "segment_ids": ops.cast(ops.logical_and(real,
                                                  positions >= segment_a),
                                  "int32")}


def batch_rows(seed, num_examples, batch, first_step, steps):
  """The examples of training steps first_step.. (int32 [steps, batch]):
  a new permutation of all examples each epoch, seeded by (seed, epoch),
  so any step's batch is known without replaying the ones before."""
  flat = np.arange(first_step * batch, (first_step + steps) * batch)
  epochs, within = flat // num_examples, flat % num_examples
  out = np.empty_like(flat)
  for epoch in np.unique(epochs):
    picked = epochs == epoch
    order = np.random.default_rng([seed, int(epoch)]).permutation(
        num_examples)
    out[picked] = order[within[picked]]
  return out.reshape(steps, batch).astype(np.int32)


def pack(input_ids, input_mask, segment_ids, vocab_size, where=""):
  """The compact columns of parsed features (NumPy [B, T]); a UserError
  when the mask or segments are not of the layout `unpack` rebuilds."""
  input_ids = np.asarray(input_ids)
  input_mask = np.asarray(input_mask)
  segment_ids = np.asarray(segment_ids)
  dtype = np.uint16 if vocab_size <= 2 ** 16 else np.uint32
  num_tokens = input_mask.sum(axis=1)
  first_b = np.where(segment_ids.any(axis=1), segment_ids.argmax(axis=1),
                     num_tokens)
  packed = {"input_ids": input_ids.astype(dtype),
            "num_tokens": num_tokens.astype(np.uint16),
            "segment_a": first_b.astype(np.uint16)}
  back = {k: np.asarray(v) for k, v in unpack(packed).items()}
  if not (np.array_equal(back["input_mask"], input_mask) and
          np.array_equal(back["segment_ids"], segment_ids) and
          np.array_equal(back["input_ids"], input_ids)):
    raise UserError(f"{where}: examples whose input_mask is not a prefix "
                    "of ones or whose segment_ids are not 0s then 1s "
                    "cannot be packed into arrays")
  return packed


def load(path, lazy_train=False):
  """The Arrays in folder `path` (written by `export`); `lazy_train`: the
  training columns as NpzColumns, read share by share, never whole."""
  meta_path = os.path.join(path, META)
  if not storage.exists(meta_path):
    raise UserError(f"no pretraining arrays at {path} ({META} missing): "
                    "export them with prepare_gpu_slot.py --data-dir "
                    "DATA_DIR")
  meta = json.loads(storage.read_text(meta_path))
  if meta.get("format") != FORMAT:
    raise UserError(f"{meta_path} is not an {FORMAT} file")
  splits = {}
  for split in SPLITS:
    file = os.path.join(path, f"{split}.npz")
    if not storage.exists(file):
      raise UserError(f"{file} is missing")
    with storage.open_file(file, "rb") as f:
      with np.load(f, allow_pickle=False) as data:
        missing = [c for c in COLUMNS if c not in data.files]
        if missing:
          raise UserError(f"{file} lacks {', '.join(missing)}")
        if lazy_train and split == "train":
          splits[split] = {c: NpzColumn(file, c) for c in COLUMNS}
        else:
          splits[split] = {c: data[c] for c in COLUMNS}
  return Arrays(meta, splits, path)


class NpzColumn:
  """One column of an .npz file, read a range of rows at a time
  (`column[a:b]`, decompressed up to b only): with several processes each
  keeps only its shares of the training rows (pretrain/shares.py)."""

  def __init__(self, file, name):
    self.file, self.member = file, name + ".npy"
    with self._open() as f:
      version = np.lib.format.read_magic(f)
      header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                else np.lib.format.read_array_header_2_0)
      self.shape, fortran, self.dtype = header(f)
      self.offset = f.tell()
    if fortran:
      raise UserError(f"{file}: {name} is stored in Fortran order (not as "
                      "export writes it): export the arrays again")
    self.row_bytes = self.dtype.itemsize * int(np.prod(self.shape[1:]))

  @contextlib.contextmanager
  def _open(self):
    with storage.open_file(self.file, "rb") as raw:
      with zipfile.ZipFile(raw) as archive, archive.open(self.member) as f:
        yield f

  def __len__(self):
    return self.shape[0]

  def __getitem__(self, rows):
    start, stop, stride = rows.indices(len(self))
    if stride != 1:
      raise ValueError("an NpzColumn reads contiguous rows only")
    count = max(0, stop - start)
    with self._open() as f:
      f.seek(self.offset + start * self.row_bytes)
      data = f.read(count * self.row_bytes)
    return np.frombuffer(data, self.dtype).reshape(
        (count,) + tuple(self.shape[1:]))


def cache_folder(config):
  """Where the JAX path keeps the dataset's arrays: DATA_DIR/pretrain_arrays
  (beside the TFRecords, shared by every run), else, while none is there
  and DATA_DIR cannot be written (a read-only data folder),
  MODEL_DIR/pretrain_arrays. Returns (folder, whether it is the fallback)."""
  data_dir = config.data_dir or os.path.dirname(config.model_dir)
  shared = os.path.join(data_dir, CACHE)
  own = os.path.join(config.model_dir, CACHE)
  if storage.exists(os.path.join(shared, META)) or "://" in shared:
    return shared, False
  if storage.exists(os.path.join(own, META)):
    return own, True
  writable = os.access(shared if os.path.isdir(shared) else data_dir,
                       os.W_OK | os.X_OK)
  return (shared, False) if writable else (own, True)


def _read_split(files, seq_length, vocab_size):
  """Every example of `files` (TFRecords), packed, in file order."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from pretrain import data  # pylint: disable=g-import-not-at-top
  columns = {c: [] for c in COLUMNS}
  records = tf.data.TFRecordDataset(files).batch(4096)
  try:
    for batch in records:
      parsed = {k: v.numpy() for k, v in
                data._parse_batch(batch, seq_length).items()}  # noqa
      packed = pack(parsed["input_ids"], parsed["input_mask"],
                    parsed["segment_ids"], vocab_size, where=files[0])
      for c in COLUMNS:
        columns[c].append(packed[c])
  except tf.errors.OpError as e:
    raise (data.read_error(e, files) or UserError(
        f"cannot read the TFRecords: {data.damage(e.message)}")) from None
  if not columns["input_ids"]:
    return {c: np.zeros((0, seq_length) if c == "input_ids" else (0,),
                        np.uint16) for c in COLUMNS}
  return {c: np.concatenate(v) for c, v in columns.items()}


def _subset(split, limit, seed):
  """At most `limit` examples, drawn without replacement (in file order)."""
  n = len(split["input_ids"])
  if not limit or n <= limit:
    return split
  keep = np.sort(np.random.default_rng(seed).choice(n, limit, replace=False))
  return {c: v[keep] for c, v in split.items()}


def export(config, out_dir, max_train_mb=40.0, max_heldout_examples=4096,
           compress=True):
  """Writes the arrays of config's dataset (its TFRecords, as
  run_pretraining.py finds them: pretrain_tfrecords or data_dir) to
  out_dir; at most max_train_mb MB of training ids (uint16 positions,
  drawn at random when there are more). Returns arrays.json's dict."""
  from pretrain import data  # pylint: disable=g-import-not-at-top (TF)
  meta = data.load_metadata(config)
  data.check_metadata(meta, config)
  seq = meta["max_seq_length"]
  vocab_size = meta["vocab_size"]
  bytes_per_id = 2 if vocab_size <= 2 ** 16 else 4
  train = _read_split(meta["files"], seq, vocab_size)
  limit = int(max_train_mb * 1e6 // (bytes_per_id * seq)) if max_train_mb else 0
  train = _subset(train, limit, config.seed)
  heldout = _read_split(meta["eval_files"], seq, vocab_size)
  heldout = _subset(heldout, max_heldout_examples, config.seed + 1)
  storage.makedirs(out_dir)
  save = np.savez_compressed if compress else np.savez
  sizes = {}
  for split, columns in (("train", train), ("heldout", heldout)):
    path = os.path.join(out_dir, f"{split}.npz")
    with storage.open_file(path, "wb") as f:
      save(f, **columns)
    sizes[split] = storage.size(path)
  keep = ("tokenizer", "vocab_size", "do_lower_case", "special_ids",
          "max_seq_length", "num_examples", "num_heldout_examples")
  vocab_file = meta.get("vocab_file") or config.vocab_file
  if vocab_file and not os.path.isabs(vocab_file) and "://" not in vocab_file:
    vocab_file = os.path.join(os.path.dirname(meta["files"][0]), vocab_file)
  out = {"format": FORMAT, **{k: meta[k] for k in keep if k in meta},
         "source": os.path.dirname(meta["files"][0]),
         "vocab_file": os.path.abspath(vocab_file) if vocab_file and (
             "://" not in vocab_file) else vocab_file,
         "eval_source": meta["eval_source"],
         "train_examples": int(len(train["input_ids"])),
         "train_tokens": int(train["num_tokens"].astype(np.int64).sum()),
         "heldout_examples": int(len(heldout["input_ids"])),
         "file_bytes": sizes}
  if meta.get("token_counts_file"):  # without: a unigram run says so
    try:
      counts = data.load_token_counts(meta)
    except UserError:
      counts = None
    if counts is not None:
      storage.write_text_atomic(os.path.join(out_dir, TOKEN_COUNTS),
                                json.dumps([int(c) for c in counts]))
      out["token_counts"] = TOKEN_COUNTS
  storage.write_text_atomic(os.path.join(out_dir, META),
                            json.dumps(portable(out), indent=2) + "\n")
  return out
