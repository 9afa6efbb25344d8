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
import sys
import time

from dataset import corpus
from dataset import corpus_files
from dataset import output_files
from dataset.example_writer import FEATURES
from dataset.example_writer import Job
from dataset.example_writer import human_count
from dataset.example_writer import run_job
from dataset.output_files import HELDOUT_PREFIX
from dataset.output_files import TEMP_PREFIX
from dataset.output_files import shard_name
from util import storage
from util import tokenization
from util.errors import UserError
from util.tf_quiet import import_tensorflow

FORMAT_VERSION = 1
_VOCAB_SAMPLE_CHARS = 10_000_000  # corpus text used by --build-vocab


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
        f"from {docs} documents ({human_count(chars)} characters)", flush=True)
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


def _run_job_in_worker(job):
  return run_job(job)


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
