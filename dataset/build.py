"""The pretraining dataset build: raw text -> sharded TFRecords.

Reads the corpus (`dataset.corpus`), tokenizes it (WordPiece or
SentencePiece), packs sentences into `[CLS] A [SEP] B [SEP]` examples
(`dataset.example_builder`) in one or more processes, and writes sharded
TFRecords with the `input_ids`, `input_mask` and `segment_ids` features,
plus metadata.json, token_counts.txt and a copy of the vocabulary.
`build_dataset(config)` runs it all; build_pretraining_dataset.py is its CLI.
"""

import dataclasses
import json
import multiprocessing
import os
import random
import sys
import time
import zlib

import numpy as np

from dataset import corpus
from dataset import corpus_files
from dataset import output_files
from dataset.example_builder import ExampleBuilder
from dataset.output_files import HELDOUT_PREFIX
from dataset.output_files import TEMP_PREFIX
from dataset.output_files import shard_name
from dataset.sentences import split_sentences
from training.progress import format_seconds
from util import storage
from util import tokenization
from util.errors import UserError
from util.errors import cause
from util.tf_quiet import import_tensorflow

FORMAT_VERSION = 1
FEATURES = ("input_ids", "input_mask", "segment_ids")
_SENTENCES_PER_BATCH = 8192  # sentences per tokenizer call
# Characters per tokenizer call too: a few huge lines must not pile up.
_CHARS_PER_BATCH = 32 << 20
_VOCAB_SAMPLE_CHARS = 10_000_000  # corpus text used by --build-vocab
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


def _human(n):
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
            f"docs {stats.docs}, tokens {_human(stats.tokens_tokenized)}, "
            f"examples {stats.examples}, "
            f"{_human(stats.tokens_tokenized / (now - start))} tokens/s, "
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


def _run_job_in_worker(job):
  return run_job(job)



def _has_text(files, stats):
  """Whether any file has a document; `stats` says why not, if none."""
  for path in files:
    docs = corpus.read_documents(path, stats)
    if next(docs, None) is not None:
      docs.close()
      return True
  return False


def build_vocab(config, files):
  """Learns a WordPiece vocab from the first ~10M characters of the corpus."""
  lines, chars, docs = [], 0, 0
  for path in files:
    for doc in corpus.read_documents(path):
      lines.extend(doc)
      chars += sum(len(p) for p in doc)
      docs += 1
      if chars >= _VOCAB_SAMPLE_CHARS or (config.max_docs and
                                          docs >= config.max_docs):
        break
    else:
      continue
    break
  print(f"building a WordPiece vocab of about {config.build_vocab} tokens "
        f"from {docs} documents ({_human(chars)} characters)", flush=True)
  vocab = tokenization.build_wordpiece_vocab(lines, config.build_vocab,
                                             lower_case=config.lower_case)
  data = ("\n".join(vocab) + "\n").encode("utf-8")
  return tokenization.VocabSource(tokenization.WORDPIECE, data, "vocab.txt")


def make_jobs(config, files, vocab):
  num_jobs = config.num_processes
  stripe_docs = len(files) < num_jobs
  if config.max_docs:
    num_jobs = min(num_jobs, config.max_docs)
  n = config.num_out_files
  out = config.output_dir
  jobs = []
  for j in range(num_jobs):
    shards = [(i, storage.join(out, TEMP_PREFIX + shard_name(i, n)),
               storage.join(out, shard_name(i, n)))
              for i in range(j, n, num_jobs)]
    heldout = ()
    if config.heldout_fraction > 0:
      name = f"{HELDOUT_PREFIX}{j}-of-{num_jobs}"
      heldout = (storage.join(out, TEMP_PREFIX + name), storage.join(out, name))
    quota = 0
    if config.max_docs:
      quota = config.max_docs // num_jobs + (j < config.max_docs % num_jobs)
    jobs.append(Job(
        index=j, num_jobs=num_jobs,
        files=list(files) if stripe_docs else files[j::num_jobs],
        stripe_docs=stripe_docs, max_docs=quota, shards=shards, vocab=vocab,
        lower_case=config.lower_case, strip_accents=config.do_strip_accents,
        max_seq_length=config.max_seq_length, seed=config.seed,
        heldout_fraction=config.heldout_fraction, heldout_shard=heldout))
  return jobs


def run_jobs(jobs, tokenizer):
  if len(jobs) == 1:
    return [run_job(jobs[0], tokenizer)]
  # spawn, not fork: forking a process that already runs TF can deadlock.
  ctx = multiprocessing.get_context("spawn")
  with ctx.Pool(len(jobs)) as pool:
    return pool.map(_run_job_in_worker, jobs, chunksize=1)


# Reasons for leaving input out: metadata key -> (one, many) for messages.
SKIP_REASONS = {
    "empty_docs": ("empty doc", "empty docs"),
    "binary_lines": ("binary/non-UTF-8 line", "binary/non-UTF-8 lines"),
    "malformed_json_lines": ("malformed JSON line", "malformed JSON lines"),
    "json_lines_without_text": ("JSON line without a text string",
                                "JSON lines without a text string"),
    "lines_outside_docs": ("line outside <doc>", "lines outside <doc>"),
    "files_without_text": ("file without text", "files without text"),
    "binary_files": ("binary/non-UTF-8 file", "binary/non-UTF-8 files"),
    "unreadable_files": ("unreadable file", "unreadable files"),
    "repeated_dirs": ("repeated directory (symlink loop)",
                      "repeated directories (symlink loops)"),
}


def _read_stats(jobs, results):
  read = corpus.ReadStats()
  # Striped jobs all read every file: count reading problems once.
  for r in results[:1] if jobs[0].stripe_docs else results:
    read.add(r["read"])
  return read


def skipped_counts(read, empty_docs):
  """Reason -> count of what the build left out (every reason, 0 too)."""
  counts = {key: getattr(read, key, 0) for key in SKIP_REASONS}
  counts["empty_docs"] = read.skipped_docs + empty_docs
  return counts


def describe_counts(counts, labels):
  """{key: count} and {key: (one, many)} labels -> e.g. '3 empty docs,
  1 unreadable file'; 'nothing' when all counts are 0."""
  parts = [f"{n} {labels[k][n != 1]}" for k, n in counts.items() if n]
  return ", ".join(parts) if parts else "nothing"


def write_outputs(config, jobs, results, tokenizer, vocab, files,
                  walk_stats=None):
  """token_counts.txt, then metadata.json (last: it marks completion)."""
  n = config.num_out_files
  token_counts = sum(r["token_counts"] for r in results)
  shard_examples = [0] * n
  for job, result in zip(jobs, results):
    for (i, _, _), count in zip(job.shards, result["shard_examples"]):
      shard_examples[i] = count

  def total(key):
    return sum(r[key] for r in results)

  read = _read_stats(jobs, results)
  if walk_stats is not None:
    read.add(walk_stats)  # found while listing the corpus
  metadata = {
      "format_version": FORMAT_VERSION,
      "tokenizer": tokenizer.kind,
      "vocab_file": vocab.name,
      "vocab_size": tokenizer.vocab_size,
      "do_lower_case": tokenizer.do_lower_case,
      "strip_accents": tokenizer.strip_accents,
      "special_ids": dict(sorted(tokenizer.special_ids.items())),
      "max_seq_length": config.max_seq_length,
      "features": list(FEATURES),
      "num_examples": total("examples"),
      "num_single_segment_examples": total("single_segment"),
      "num_tokens": total("tokens_written"),
      "num_special_tokens": total("special_tokens"),
      "num_padding_tokens": total("padding_tokens"),
      "num_tokens_tokenized": total("tokens_tokenized"),
      "num_documents": total("docs"),
      "num_skipped_documents": read.skipped_docs + total("empty_docs"),
      "num_skipped_lines": read.skipped_lines,
      "num_lines_with_bad_bytes": read.bad_byte_lines,
      "num_long_lines_cut": read.long_lines_cut,
      "num_long_sentences_split": total("sentences_split"),
      "skipped": skipped_counts(read, total("empty_docs")),
      "num_input_files": len(files),
      "num_shards": n,
      "shard_pattern": output_files.SHARD_PATTERN,
      "examples_per_shard": shard_examples,
      "token_counts_file": output_files.TOKEN_COUNTS,
      # token_counts.txt counts every position of input_ids, padding too.
      "token_counts_include_padding": True,
      "num_processes": len(jobs),
      "seed": config.seed,
      # Documents set aside for evaluation (none of them in the shards
      # above); heldout_shard_pattern is absent when there are none.
      "heldout_fraction": config.heldout_fraction,
      "num_heldout_documents": total("heldout_docs"),
      "num_heldout_examples": total("heldout_examples"),
      "num_heldout_tokens": total("heldout_tokens"),
  }
  if config.heldout_fraction > 0:
    metadata["heldout_shard_pattern"] = output_files.HELDOUT_PATTERN
  output_files.commit_outputs(config, jobs, {
      vocab.name: vocab.data,
      output_files.TOKEN_COUNTS: "".join(
          f"{int(c)}\n" for c in token_counts).encode(),
      output_files.METADATA: (json.dumps(metadata, indent=2) + "\n").encode()})
  return metadata, read


# Input kept, but changed so that it can be used.
_CLEAN_LABELS = {
    "num_lines_with_bad_bytes": ("line with undecodable bytes",
                                 "lines with undecodable bytes"),
    "num_long_lines_cut": ("over-long line cut into pieces",
                           "over-long lines cut into pieces"),
    "num_long_sentences_split": (
        "sentence longer than an example spread over several",
        "sentences longer than an example spread over several"),
}



def build_dataset(config):
  """Builds the dataset `config` (a validated BuildConfig) describes."""
  output_files.check_output_dir(config)
  walk_stats = corpus.ReadStats()
  files = corpus_files.find_files(config.corpus_dir, stats=walk_stats)
  probe = corpus.ReadStats()
  if not _has_text(files, probe):
    probe.add(walk_stats)
    raise UserError(f"corpus has no text: {config.corpus_dir} "
                    f"({len(files)} file(s): "
                    f"{corpus_files.describe_skipped(probe)})")
  import_tensorflow(with_text=True)  # seconds: after the quick checks
  if config.vocab_file:
    vocab = tokenization.read_vocab_source(config.vocab_file)
  else:
    vocab = build_vocab(config, files)
  # Built in the parent first so vocabulary problems fail before any work.
  tokenizer = tokenization.tokenizer_from_source(
      vocab, config.lower_case, config.do_strip_accents)
  out = config.output_dir
  made = not storage.exists(out)
  try:
    output_files.prepare_output_dir(config)
    return _build(config, files, vocab, tokenizer, walk_stats)
  finally:  # nothing half-written is left, however the build ends
    output_files.remove_incomplete(out)
    if made and storage.isdir(out) and not storage.listdir(out):
      storage.rmtree(out)


def _build(config, files, vocab, tokenizer, walk_stats):
  jobs = make_jobs(config, files, vocab)
  print(f"{len(files)} file(s), {tokenizer.kind} vocab of "
        f"{tokenizer.vocab_size}, {len(jobs)} process(es), "
        f"{config.num_out_files} shard(s) -> {config.output_dir}", flush=True)
  start = time.time()
  results = run_jobs(jobs, tokenizer)
  if (not any(r["examples"] for r in results) and
      any(r["heldout_examples"] for r in results)):
    # A corpus of a few documents, all of them hashed into the held-out
    # share: nothing to train on, so build it whole, without a split.
    print(f"note: all {sum(r['heldout_docs'] for r in results)} documents "
          "fell in the held-out share; building without a held-out split",
          flush=True)
    for job in jobs:
      storage.remove(job.heldout_shard[0])
    config = dataclasses.replace(config, heldout_fraction=0.0)
    jobs = make_jobs(config, files, vocab)
    results = run_jobs(jobs, tokenizer)
  seconds = max(time.time() - start, 1e-9)
  if not any(r["examples"] for r in results):
    # No metadata.json: the directory must not look like a finished build.
    read = _read_stats(jobs, results)
    read.add(walk_stats)
    skipped = skipped_counts(read, sum(r["empty_docs"] for r in results))
    raise UserError(f"corpus produced no examples: {config.corpus_dir} "
                    f"(skipped: {describe_counts(skipped, SKIP_REASONS)})")
  meta, read = write_outputs(config, jobs, results, tokenizer, vocab, files,
                             walk_stats)
  for problem in read.problems:
    print(f"warning: skipped {problem}", file=sys.stderr, flush=True)
  more = read.unreadable_files - len(read.problems)
  if more > 0:
    print(f"warning: and {more} more unreadable file(s)", file=sys.stderr,
          flush=True)
  rate = meta["num_tokens_tokenized"] / seconds
  cleaned = {"num_lines_with_bad_bytes": meta["num_lines_with_bad_bytes"],
             "num_long_lines_cut": meta["num_long_lines_cut"],
             "num_long_sentences_split": meta["num_long_sentences_split"]}
  # Per process, on the time each spent working (start-up excluded).
  busy = sum(r["seconds"] for r in results)
  busy_rate = meta["num_tokens_tokenized"] / max(busy, 1e-9)
  if config.heldout_fraction > 0:
    print(f"held out: {meta['num_heldout_documents']} of "
          f"{meta['num_documents']} docs, {meta['num_heldout_examples']} "
          f"examples ({output_files.HELDOUT_PATTERN}), never trained on",
          flush=True)
  print(f"done: {meta['num_documents']} docs, "
        f"{meta['num_tokens_tokenized']} tokens, "
        f"{meta['num_examples']} examples in {seconds:.1f}s; "
        f"{rate:,.0f} tokens/s ({busy_rate:,.0f} tokens/s per busy process); "
        f"skipped: {describe_counts(meta['skipped'], SKIP_REASONS)}; "
        f"cleaned: {describe_counts(cleaned, _CLEAN_LABELS)}", flush=True)
