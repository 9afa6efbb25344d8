"""The pretraining dataset build: raw text -> sharded TFRecords (the
original release's build_pretraining_data.py main()).

Finds the corpus's files (`dataset.corpus_files`), reads or learns the
vocabulary, splits the work into jobs and runs them in one or more
processes (`dataset.example_writer`: read, tokenize, pack into
`[CLS] A [SEP] B [SEP]` examples, write TFRecords with the `input_ids`,
`input_mask` and `segment_ids` features), then writes metadata.json,
token_counts.txt and a copy of the vocabulary (`dataset.metadata`) and
gives the finished build its names (`dataset.output_files`).
`build_dataset(config)` runs it all; build_pretraining_dataset.py is its CLI.
"""

import dataclasses
import multiprocessing
import time

from dataset import corpus
from dataset import corpus_files
from dataset import metadata
from dataset import output_files
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
    read = metadata.read_stats(jobs, results)
    read.add(walk_stats)
    skipped = metadata.describe_counts(
        metadata.skipped_counts(read, sum(r["empty_docs"] for r in results)),
        metadata.SKIP_REASONS)
    raise UserError(f"corpus produced no examples: {config.corpus_dir} "
                    f"(skipped: {skipped})")
  meta, read = metadata.write_outputs(config, jobs, results, tokenizer, vocab,
                                      files, walk_stats)
  metadata.print_summary(config, meta, read, results, seconds)
