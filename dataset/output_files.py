"""The build's output directory: its files' names, the checks before a
build, and the commit that gives a finished build those names.

Every file is written under an `incomplete.` name first and renamed only
once all of the build is done (metadata.json last: it marks a finished
build), so a build that fails leaves an earlier one as it was. The shards
keep the original release's names, pretrain_data.tfrecord-I-of-N.
"""

import json
import os
import re

from dataset import corpus_files
from util import outputs
from util import storage
from util.errors import UserError
from util.errors import cause
from util.tf_quiet import import_tensorflow

SHARD_PREFIX = "pretrain_data.tfrecord-"
SHARD_PATTERN = SHARD_PREFIX + "*"
HELDOUT_PREFIX = "heldout_data.tfrecord-"
HELDOUT_PATTERN = HELDOUT_PREFIX + "*"
TEMP_PREFIX = "incomplete."  # a build's files until all of it is done
METADATA = "metadata.json"
TOKEN_COUNTS = "token_counts.txt"
_SHARD_RE = re.compile(
    r"^(incomplete\.)?(pretrain|heldout)_data\.tfrecord-\d+-of-\d+$")


def shard_name(i, n):
  return f"{SHARD_PREFIX}{i}-of-{n}"


def _our_files(output_dir, extra_names=()):
  """Files in output_dir that this tool wrote (and may replace)."""
  names = {METADATA, TOKEN_COUNTS, "vocab.txt"} | set(extra_names)
  meta = storage.join(output_dir, METADATA)
  if storage.exists(meta):
    try:
      old = json.loads(storage.read_text(meta)).get("vocab_file", "")
      if isinstance(old, str) and old and "/" not in old:
        names.add(old)
    except (ValueError, AttributeError):
      pass
  names |= {n + ".tmp" for n in names}
  return [storage.join(output_dir, n) for n in storage.listdir(output_dir)
          if n in names or _SHARD_RE.match(n) or n == TEMP_PREFIX + "probe"]


def _real(path):
  return path.rstrip("/") if "://" in path else os.path.realpath(path)


def _within(path, folder):
  return path == folder or path.startswith(folder.rstrip("/") + "/")


def check_not_corpus(config):
  """The output directory neither is, holds, nor lies in the corpus: the
  shards would mix with the user's text, and --overwrite would replace
  files (vocab.txt, metadata.json) that may be the user's own."""
  out = _real(config.output_dir)
  pattern = any(c in config.corpus_dir for c in corpus_files.GLOB_CHARS)
  for found in (storage.glob(config.corpus_dir) if pattern else
                [config.corpus_dir]):
    where = _real(found)
    what = ("is the corpus directory" if out == where else
            f"holds the corpus ({found})" if _within(where, out) else
            f"lies inside the corpus directory {found}"
            if _within(out, where) and storage.isdir(found) else "")
    if what:
      raise UserError(f"output directory {config.output_dir} {what}: "
                      "choose an --output-dir outside the corpus (nothing "
                      "was written)")


def check_output_dir(config):
  """Refuses a used output directory unless --overwrite."""
  out = config.output_dir
  if storage.exists(out) and not storage.isdir(out):
    raise UserError(f"output path exists and is not a directory: {out}")
  check_not_corpus(config)
  outputs.check_output_dir(out, "output_dir")  # links, permissions
  if (storage.exists(out) and storage.listdir(out) and
      not config.overwrite):
    raise UserError(f"output directory {out} is not empty; pass --overwrite "
                    f"to replace a previous build (other files are kept)")


def prepare_output_dir(config):
  """Creates the output dir and checks it is writable. An earlier build
  there is replaced only once this one is complete (commit_outputs)."""
  tf = import_tensorflow(with_text=True)
  out = config.output_dir
  try:
    storage.makedirs(out)
    probe = storage.join(out, TEMP_PREFIX + "probe")
    with storage.open_file(probe, "w") as f:
      f.write("ok")
    storage.remove(probe)
  except (OSError, tf.errors.OpError) as e:
    raise UserError(f"cannot write to output directory {out}: "
                    f"{cause(e)}") from None


def remove_incomplete(output_dir):
  """What a failed build wrote: its files all have incomplete names."""
  if storage.isdir(output_dir):
    for name in storage.listdir(output_dir):
      if name.startswith(TEMP_PREFIX):
        storage.remove(storage.join(output_dir, name))


def commit_outputs(config, jobs, staged):
  """Gives the finished build its names: `staged` ({name: bytes}, written
  here first under incomplete names; metadata.json last) and the jobs'
  shards. An earlier build's files are replaced (or, when this build has
  none of that name, removed) only now, so a build that fails (a full
  disk) leaves the earlier one as it was."""
  tf = import_tensorflow(with_text=True)
  out = config.output_dir
  temp = {name: storage.join(out, TEMP_PREFIX + name) for name in staged}
  try:
    for name, data in staged.items():
      with storage.open_file(temp[name], "wb") as f:
        f.write(data)
  except (OSError, tf.errors.OpError) as e:
    raise UserError(f"cannot write {storage.join(out, name)}: {cause(e)}"
                    ) from None
  renames = [(tmp, final) for job in jobs for _, tmp, final in job.shards]
  renames += [job.heldout_shard for job in jobs if job.heldout_shard]
  renames += [(temp[n], storage.join(out, n)) for n in staged if n != METADATA]
  new = {final for _, final in renames} | {storage.join(out, METADATA)}
  stale = [p for p in _our_files(out) if p not in new and
           not os.path.basename(p).startswith(TEMP_PREFIX)]
  meta = storage.join(out, METADATA)
  if storage.exists(meta):  # the earlier build is incomplete from here on
    storage.remove(meta)
  for tmp, final in renames:
    storage.rename(tmp, final, overwrite=True)
  for path in stale:
    storage.remove(path)
  storage.rename(temp[METADATA], meta, overwrite=True)
