"""One job of the build: its documents -> tokenized, packed examples in
its share of the TFRecord shards (the original release's ExampleWriter and
write_examples(job_id, args)).

A job reads its files (or every file, keeping each num_jobs-th document,
when there are fewer files than jobs), splits paragraphs into sentences,
tokenizes them in batches, packs them with `ExampleBuilder` and writes the
examples round-robin over its shards; documents hashed into the held-out
share go to a held-out shard of their own. Jobs run in worker processes,
so `Job` is picklable and `run_job` returns a plain dict of counts.
"""

import dataclasses
import os
import random
import time
import zlib

import numpy as np

from dataset import corpus
from dataset.example_builder import ExampleBuilder
from dataset.sentences import split_sentences
from training.progress import format_seconds
from util import storage
from util import tokenization
from util.errors import UserError
from util.errors import cause
from util.tf_quiet import import_tensorflow

FEATURES = ("input_ids", "input_mask", "segment_ids")
_SENTENCES_PER_BATCH = 8192  # sentences per tokenizer call
# Characters per tokenizer call too: a few huge lines must not pile up.
_CHARS_PER_BATCH = 32 << 20
_PROGRESS_SECONDS = 15.0


@dataclasses.dataclass
class Job:
  """What one worker process needs; picklable for multiprocessing."""
  index: int
  num_jobs: int
  files: list
  stripe_docs: bool  # True: read every file, keep docs index % num_jobs
  max_docs: int  # 0 = no limit
  shards: list  # (shard index, temporary path, final path) of this job
  vocab: tokenization.VocabSource
  lower_case: bool
  strip_accents: bool
  max_seq_length: int
  seed: int
  heldout_fraction: float = 0.0
  heldout_shard: tuple = ()  # (temporary path, final path)


def is_heldout(doc, seed, fraction):
  """Whether a document goes to the held-out shards: a hash of its text,
  so the split is the same for any number of processes or files."""
  if fraction <= 0:
    return False
  text = "\n".join(doc).encode("utf-8", "replace")
  key = zlib.crc32(text, seed & 0xFFFFFFFF)
  return key < fraction * 2**32


def job_seed(seed, index):
  # Distinct, reproducible streams per job.
  return seed * 1_000_003 + index


def human_count(n):
  """1234567 -> '1.23M': counts in progress lines."""
  for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
    if abs(n) >= div:
      return f"{n / div:.2f}{unit}"
  return str(int(n))


class _JobStats:
  """Counters of one job; summed over jobs for the report and metadata."""

  def __init__(self, vocab_size, num_shards):
    self.token_counts = np.zeros(vocab_size, dtype=np.int64)
    self.shard_examples = [0] * num_shards
    self.read = corpus.ReadStats()
    self.files_done = 0
    self.docs = 0  # documents that produced tokens
    self.empty_docs = 0  # documents whose text tokenized to nothing
    self.sentences_split = 0  # sentences too long for one example
    self.tokens_tokenized = 0
    self.tokens_written = 0  # non-special tokens in examples
    self.special_tokens = 0
    self.padding_tokens = 0
    self.examples = 0
    self.single_segment = 0
    self.heldout_docs = 0
    self.heldout_examples = 0
    self.heldout_tokens = 0
    self.seconds = 0.0  # time spent working, without process start-up


class _JobShare:
  """How much of a job's text is done: UTF-8 bytes of its documents
  against the size of its files (a share of them when jobs stripe the
  documents), or documents against max_docs; for the ETA."""

  def __init__(self, job):
    total = 0
    for path in job.files:
      try:
        total += storage.size(path)
      except Exception:  # pylint: disable=broad-except
        pass  # unreadable: the reader counts it
    self.total = total / (job.num_jobs if job.stripe_docs else 1)
    self.max_docs = job.max_docs
    self.bytes = 0

  def add(self, doc):
    self.bytes += sum(len(p.encode("utf-8", "replace")) + 1 for p in doc)

  def fraction(self, stats):
    done = self.bytes / self.total if self.total else 0.0
    if self.max_docs:
      done = max(done, (stats.docs + stats.empty_docs) / self.max_docs)
    return min(done, 1.0)


def _example_bytes(example, tf):
  ex = tf.train.Example()
  feature = ex.features.feature
  feature["input_ids"].int64_list.value.extend(example.input_ids)
  feature["input_mask"].int64_list.value.extend(example.input_mask)
  feature["segment_ids"].int64_list.value.extend(example.segment_ids)
  return ex.SerializeToString(deterministic=True)


def _job_documents(job, stats):
  """This job's documents, honouring file or document striping."""
  taken = 0
  for path in job.files:
    for i, doc in enumerate(corpus.read_documents(path, stats.read)):
      if job.stripe_docs and i % job.num_jobs != job.index:
        continue
      yield doc
      taken += 1
      if job.max_docs and taken >= job.max_docs:
        stats.files_done += 1
        return
    stats.files_done += 1


def run_job(job, tokenizer=None, log=print):
  """Tokenizes and packs one job's documents into its shards."""
  tf = import_tensorflow(with_text=True)

  if tokenizer is None:
    tokenizer = tokenization.tokenizer_from_source(
        job.vocab, job.lower_case, job.strip_accents)
  try:
    return _write_job(job, tokenizer, log, tf)
  except (OSError, tf.errors.OpError) as e:  # a full disk, say
    raise UserError(f"cannot write the shards in "
                    f"{os.path.dirname(job.shards[0][1])}: {cause(e)}"
                    ) from None


def _write_job(job, tokenizer, log, tf):
  ids = tokenizer.special_ids
  stats = _JobStats(tokenizer.vocab_size, len(job.shards))
  builder = ExampleBuilder(job.max_seq_length, ids["cls"], ids["sep"],
                           ids["pad"], random.Random(job_seed(job.seed,
                                                              job.index)))
  # Held-out documents get a builder of their own: no example mixes both.
  heldout_builder = ExampleBuilder(
      job.max_seq_length, ids["cls"], ids["sep"], ids["pad"],
      random.Random(job_seed(job.seed, job.index) + 1))
  writers = [tf.io.TFRecordWriter(tmp) for _, tmp, _ in job.shards]
  heldout_writer = (tf.io.TFRecordWriter(job.heldout_shard[0])
                    if job.heldout_shard else None)
  pending = []  # unpadded ids awaiting a bincount
  start = last_report = time.time()
  tag = f"[job {job.index + 1}/{job.num_jobs}] " if job.num_jobs > 1 else ""

  def count_pending():
    if pending:
      stats.token_counts += np.bincount(
          np.asarray(pending, dtype=np.int64),
          minlength=tokenizer.vocab_size)[:tokenizer.vocab_size]
      pending.clear()

  def emit(example, heldout=False):
    if example is None:
      return
    if heldout:  # counted apart: token_counts describe training data
      heldout_writer.write(_example_bytes(example, tf))
      stats.heldout_examples += 1
      stats.heldout_tokens += example.num_tokens
      return
    shard = stats.examples % len(writers)
    writers[shard].write(_example_bytes(example, tf))
    stats.shard_examples[shard] += 1
    stats.examples += 1
    stats.single_segment += example.single_segment
    stats.tokens_written += example.num_tokens
    stats.special_tokens += example.length - example.num_tokens
    stats.padding_tokens += job.max_seq_length - example.length
    pending.extend(example.input_ids[:example.length])
    if len(pending) > 4_000_000:
      count_pending()

  def flush(docs, held_flags):
    sentences = [s for doc in docs for s in doc]
    token_ids = tokenizer.tokenize_batch(sentences)
    pos = 0
    for doc, held in zip(docs, held_flags):
      produced = False
      into = heldout_builder if held else builder
      for sentence_ids in token_ids[pos:pos + len(doc)]:
        stats.tokens_tokenized += len(sentence_ids)
        produced |= bool(sentence_ids)
        if len(sentence_ids) <= job.max_seq_length - 2:
          emit(into.add_sentence(sentence_ids), held)
          continue
        # Too long for one example (a huge line, or a script whose sentence
        # ends the splitter does not know): fill several, trim nothing.
        stats.sentences_split += 1
        for example in into.add_long_sentence(sentence_ids):
          emit(example, held)
      pos += len(doc)
      emit(into.end_document(), held)
      if produced:
        stats.docs += 1
        stats.heldout_docs += held
      else:
        stats.empty_docs += 1

  batch, held_flags, batch_sentences, batch_chars = [], [], 0, 0
  share = _JobShare(job)
  for doc in _job_documents(job, stats):
    sentences = [s for p in doc for s in split_sentences(p)]
    batch.append(sentences)
    held_flags.append(bool(heldout_writer) and is_heldout(
        doc, job.seed, job.heldout_fraction))
    batch_sentences += len(sentences)
    batch_chars += sum(len(p) for p in doc)
    share.add(doc)
    if (batch_sentences >= _SENTENCES_PER_BATCH or
        batch_chars >= _CHARS_PER_BATCH):
      flush(batch, held_flags)
      batch, held_flags, batch_sentences, batch_chars = [], [], 0, 0
      now = time.time()
      if now - last_report >= _PROGRESS_SECONDS:
        last_report = now
        fraction = share.fraction(stats)
        eta = (now - start) * (1 - fraction) / max(fraction, 1e-9)
        log(f"{tag}files {stats.files_done}/{len(job.files)}, "
            f"docs {stats.docs}, tokens {human_count(stats.tokens_tokenized)}, "
            f"examples {stats.examples}, "
            f"{human_count(stats.tokens_tokenized / (now - start))} tokens/s, "
            f"~{100 * fraction:.0f}% of the text, elapsed "
            f"{format_seconds(now - start)}, ETA {format_seconds(eta)}",
            flush=True)
  if batch:
    flush(batch, held_flags)
  count_pending()
  # Padding positions count too: token_counts covers every input_ids slot.
  stats.token_counts[ids["pad"]] += stats.padding_tokens
  for writer in writers + ([heldout_writer] if heldout_writer else []):
    writer.close()
  # The shards keep their incomplete names until every job is done
  # (output_files.commit_outputs).
  stats.seconds = time.time() - start
  # A plain dict: worker results must unpickle without this module.
  return dict(vars(stats))
