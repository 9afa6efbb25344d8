"""tf.data input pipeline over the pretraining TFRecord shards.

Reads shards written by build_pretraining_dataset.py (or the original
release: int64 `input_ids`, `input_mask`, `segment_ids`), checks them
against the config, and yields per-replica batches with dynamic masking.
"""

import json
import os
import re

import tensorflow as tf

from pretrain import masking
from pretrain.run_config import check_data_shape
from util import storage
from util.errors import UserError

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")
METADATA_FILE = "metadata.json"


def list_shards(patterns):
  files = []
  for pattern in patterns.split(","):
    if pattern.strip():
      files.extend(storage.glob(pattern.strip()))
  return sorted(set(f for f in files if not f.endswith(".tmp")))


def _vocab_special_ids(vocab_file):
  with storage.open_file(vocab_file) as f:
    vocab = [line.rstrip("\n").strip() for line in f]
  index = {token: i for i, token in enumerate(vocab)}
  missing = [t for t in ("[CLS]", "[SEP]", "[MASK]") if t not in index]
  if missing:
    raise UserError(f"vocab file {vocab_file} lacks {', '.join(missing)}")
  return len(vocab), {"cls": index["[CLS]"], "sep": index["[SEP]"],
                      "mask": index["[MASK]"], "pad": index.get("[PAD]", 0)}


def _first_record_length(path):
  try:
    for record in tf.data.TFRecordDataset(path).take(1):
      example = tf.train.Example.FromString(record.numpy())
      return len(example.features.feature["input_ids"].int64_list.value)
  except tf.errors.OpError as e:
    raise UserError(f"cannot read TFRecord {path}: {e.message.splitlines()[0]}")
  raise UserError(f"TFRecord shard {path} is empty")


def load_metadata(config):
  """Returns the dataset's metadata dict, from metadata.json when present,
  else inferred (datasets of the original release have none)."""
  files = list_shards(config.pretrain_tfrecords)
  if not files:
    raise UserError(
        f"no pretraining TFRecords match '{config.pretrain_tfrecords}'; "
        "build them with build_pretraining_dataset.py --output-dir "
        "DATA_DIR/pretrain_tfrecords")
  meta_path = os.path.join(os.path.dirname(files[0]), METADATA_FILE)
  if storage.exists(meta_path):
    try:
      meta = json.loads(storage.read_text(meta_path))
    except json.JSONDecodeError as e:
      raise UserError(f"{meta_path} is not valid JSON ({e.msg})")
    meta["path"] = meta_path
  else:
    if not storage.exists(config.vocab_file):
      raise UserError(f"vocab file not found: {config.vocab_file} (and no "
                      f"{METADATA_FILE} beside the TFRecords)")
    vocab_size, special_ids = _vocab_special_ids(config.vocab_file)
    meta = {"vocab_size": vocab_size, "special_ids": special_ids,
            "max_seq_length": _first_record_length(files[0]),
            "path": f"{files[0]} (no {METADATA_FILE}; inferred)"}
  meta["files"] = files
  meta["eval_files"], meta["eval_source"] = _eval_files(config, meta, files)
  return meta


def _eval_files(config, meta, files):
  """The shards eval reads, and what they are: eval_tfrecords, the
  dataset's held-out shards, or (datasets without any) the training ones."""
  if config.eval_tfrecords:
    found = list_shards(config.eval_tfrecords)
    if not found:
      raise UserError(f"no eval TFRecords match '{config.eval_tfrecords}'")
    return found, "eval_tfrecords"
  pattern = meta.get("heldout_shard_pattern")
  if pattern and meta.get("num_heldout_examples", 0) > 0:
    found = list_shards(os.path.join(os.path.dirname(files[0]), pattern))
    if not found:
      raise UserError(f"the dataset's held-out shards ({pattern}, "
                      f"{meta['path']}) are missing; rebuild the data")
    return found, "held-out documents"
  return files, "training shards (the dataset has no held-out split)"


def check_metadata(meta, config):
  """Fills config.vocab_size from the data; a mismatch is a UserError."""
  where = meta["path"]
  check_data_shape(config, meta, "the dataset", f"from {where}",
                   "rebuild the data")
  if meta.get("tokenizer", "wordpiece") == "wordpiece" and storage.exists(
      config.vocab_file):
    size, _ = _vocab_special_ids(config.vocab_file)
    if size != meta["vocab_size"]:
      raise UserError(
          f"vocab file {config.vocab_file} has {size} entries but the "
          f"dataset was built with {meta['vocab_size']} ({where})")
  if "do_lower_case" in meta and meta["do_lower_case"] != config.do_lower_case:
    print(f"note: the dataset's do_lower_case={meta['do_lower_case']} is used "
          f"(config said {config.do_lower_case})")
    config.do_lower_case = meta["do_lower_case"]
  ids = meta["special_ids"]
  bad = {k: v for k, v in ids.items() if not 0 <= v < meta["vocab_size"]}
  if bad:
    raise UserError(f"special token ids {bad} out of range in {where}")


def load_token_counts(meta):
  """Per-id token counts that build_pretraining_dataset.py wrote (for a
  unigram generator)."""
  name = meta.get("token_counts_file")
  path = (os.path.join(os.path.dirname(meta["files"][0]), name) if name
          else None)
  if not path or not storage.exists(path):
    raise UserError("unigram_generator needs the dataset's token counts "
                    "(token_counts.txt, written by build_pretraining_dataset"
                    f".py); none found beside {meta['files'][0]}")
  try:
    counts = [int(line) for line in storage.read_text(path).split()]
  except ValueError:
    raise UserError(f"{path} is not one integer count per line") from None
  if len(counts) != meta["vocab_size"]:
    raise UserError(f"{path} has {len(counts)} counts for a vocabulary of "
                    f"{meta['vocab_size']}")
  if sum(counts) <= 0:
    raise UserError(f"{path} counts no tokens")
  return counts


def masking_config(config, meta):
  return masking.config_from(config, meta)


def mask_features(features, mask_config, seed):
  """masking.mask_batch with its noise drawn statelessly from `seed` [2]."""
  batch = tf.shape(features["input_ids"])[0]
  noise = tf.random.stateless_uniform(
      [masking.NUM_NOISE, batch, mask_config.max_predictions], seed)
  return masking.mask_batch(features, mask_config, noise)


def _parse_batch(records, seq_length):
  spec = {name: tf.io.FixedLenFeature([seq_length], tf.int64)
          for name in FEATURE_NAMES}
  parsed = tf.io.parse_example(records, spec)
  return {name: tf.cast(t, tf.int32) for name, t in parsed.items()}


def make_dataset(config, meta, batch_size, is_training=True,
                 input_context=None, start_step=0):
  """Batches of masked features, `batch_size` examples each (per replica).

  Shards are shuffled and interleaved in parallel; records are shuffled,
  batched, parsed and masked in parallel, and prefetched. Deterministic for
  config.seed; `start_step` resumes the same batches (and masks) later on.

  Across input pipelines (workers), config.input_sharding picks:
    "files": each pipeline reads its own share of the shards (by record when
      there are fewer shards than pipelines): no input work is repeated;
    "batches": every pipeline builds the same global batches and keeps its
      replicas' rows, so a run gives the same result on any number of
      workers (at the cost of each worker reading all the data).
  """
  files = meta["files"] if is_training else meta["eval_files"]
  pipeline_id, num_pipelines, num_replicas = 0, 1, 1
  if input_context is not None:
    pipeline_id = input_context.input_pipeline_id
    num_pipelines = input_context.num_input_pipelines
    num_replicas = input_context.num_replicas_in_sync
  replicas_per_pipeline = num_replicas // num_pipelines
  by_batch = config.input_sharding == "batches" and num_replicas > 1
  if by_batch:
    seed, global_batch = config.seed, batch_size * num_replicas
    skip = start_step  # global batches
  else:
    seed, global_batch = config.seed + 7919 * pipeline_id, batch_size
    skip = start_step * replicas_per_pipeline  # this pipeline's batches
  ds = tf.data.Dataset.from_tensor_slices(files)
  shard_files = not by_batch and num_pipelines > 1
  if shard_files and len(files) >= num_pipelines:
    ds = ds.shard(num_pipelines, pipeline_id)
  if is_training:
    ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
  ds = ds.repeat()
  def read(path):
    records = tf.data.TFRecordDataset(path)
    # With skip_corrupt_records a damaged shard simply ends at its damage.
    return records.ignore_errors() if config.skip_corrupt_records else records

  # Training reads input_cycle_length shards at a time (the original's
  # order); eval reads them all, in order, as before.
  cycle = min(len(files), config.input_cycle_length if is_training else 16)
  ds = ds.interleave(read, cycle_length=cycle,
                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  if shard_files and len(files) < num_pipelines:
    ds = ds.shard(num_pipelines, pipeline_id)  # too few files: by record
  if is_training:
    ds = ds.shuffle(config.shuffle_buffer_size, seed=seed)
  ds = ds.batch(global_batch, drop_remainder=True)
  if skip:
    ds = ds.skip(skip)  # before parsing: skipped batches stay cheap
  seq_length = meta["max_seq_length"]
  ds = ds.map(lambda r: _parse_batch(r, seq_length),
              num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  mask_config = masking_config(config, meta)
  base_seed = seed if is_training else seed + 1

  def add_masks(index, features):
    batch_seed = tf.stack([tf.constant(base_seed, tf.int64), index])
    return mask_features(features, mask_config,
                         tf.cast(batch_seed, tf.int32))

  ds = ds.enumerate(start=skip).map(add_masks,
                                    num_parallel_calls=tf.data.AUTOTUNE,
                                    deterministic=True)
  if by_batch:  # keep this pipeline's replicas' rows, one batch per replica
    first = pipeline_id * replicas_per_pipeline

    def my_rows(features):
      return {k: tf.reshape(v, [num_replicas, batch_size] + v.shape[1:])[
          first:first + replicas_per_pipeline] for k, v in features.items()}

    ds = ds.map(my_rows).unbatch()
  options = tf.data.Options()
  options.experimental_deterministic = True
  ds = ds.with_options(options)
  return ds.prefetch(tf.data.AUTOTUNE)


def scan_shards(files):
  """[(path, readable records, error)] for shards that fail to read."""
  bad = []
  for path in files:
    count = 0
    try:
      for batch in tf.data.TFRecordDataset(path).batch(4096):
        count += int(tf.shape(batch)[0])
    except tf.errors.OpError as e:
      bad.append((path, _count_readable(path, count), damage(e.message)))
  return bad


def _state(path):
  """What tells a shard changed: its inode, size and mtime; None if gone."""
  try:
    found = os.stat(path)
  except FileNotFoundError:
    return None
  return found.st_ino, found.st_size, found.st_mtime_ns


class ShardWatch:
  """The shards a run reads, as they were when it started. tf.data's
  readers may hold a shard's old bytes for epochs, so damage (or a
  deletion) met only when a reader opens it again may come late or
  never: `changed()` looks at every shard (a stat each, local files)."""

  def __init__(self, files):
    self.files = [f for f in files if "://" not in f]
    self.states = {f: _state(f) for f in self.files}

  def changed(self):
    """One line for the first shard deleted, damaged or resized since the
    start; None when all are as they were (or only touched)."""
    for path in self.files:
      now, then = _state(path), self.states[path]
      if now == then:
        continue
      if now is None:
        return f"TFRecord shard {path} was deleted while the run read it"
      bad = scan_shards([path])
      if bad:
        _, n, error = bad[0]
        return (f"corrupt or truncated TFRecord: {path} ({error}, after "
                f"{n} good record{'s' * (n != 1)}), changed while the run "
                "read it")
      if then is not None and now[1] != then[1]:
        return (f"TFRecord shard {path} changed while the run read it "
                f"({then[1]} bytes, now {now[1]}): put the original back, "
                "or train the new data in a new run (another --model-name)")
      self.states[path] = now  # rewritten whole, as it was (or touched)
    return None

  def accept(self):
    """The shards as they are now become the ones to compare with."""
    self.states = {f: _state(f) for f in self.files}


def read_error(error, files, watch=None):
  """A UserError for a tf.data read error over `files` (DataLossError: a
  damaged record; NotFoundError: a deleted shard), else None."""
  if isinstance(error, tf.errors.DataLossError):
    bad = find_corrupt_shards(files)
    return UserError("corrupt or truncated TFRecord: " +
                     ("; ".join(bad) if bad else damage(error.message)))
  if isinstance(error, tf.errors.NotFoundError):
    gone = [f for f in files if "://" not in f and not os.path.exists(f)]
    if gone:
      return UserError(f"TFRecord shard {gone[0]} was deleted while the run "
                       "read it")
    return UserError(f"cannot read the TFRecords: {damage(error.message)}")
  return None


def _count_readable(path, start):
  """The records before the damage: the failed batch's one at a time."""
  count = start
  try:
    for _ in tf.data.TFRecordDataset(path).skip(start):
      count += 1
  except tf.errors.OpError:
    pass
  return count


_DAMAGE = re.compile(r"(truncated|corrupted) record at (\d+)")


def damage(message):
  """TF's read error as a user reads it: "truncated record at byte N",
  without TF's internal {{function_node ...}} and op names."""
  found = _DAMAGE.search(message)
  if found:
    return f"{found.group(1)} record at byte {found.group(2)}"
  text = re.sub(r"\{\{[^}]*\}\}|\s*\[Op:[^\]]*\]", "", message).strip()
  return (text.splitlines() or ["unreadable"])[0][:120]


def find_corrupt_shards(files):
  """Names the shards that fail to read (only called after a read error):
  the file, where the damage is and how many records precede it."""
  return [f"{path} ({error}, after {n} good record{'s' * (n != 1)})"
          for path, n, error in scan_shards(files)]
