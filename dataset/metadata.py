"""What a finished build records and says about itself: metadata.json
and token_counts.txt (written, with the vocabulary, by `write_outputs`),
and the closing lines that say what was built, skipped and cleaned.

The jobs' counts (`dataset.example_writer`) and the readers' `ReadStats`
are summed here; `SKIP_REASONS` names each reason for leaving input out,
both as metadata keys and in messages.
"""

import json
import sys

from dataset import corpus
from dataset.example_writer import FEATURES
from dataset.output_files import HELDOUT_PATTERN
from dataset.output_files import METADATA
from dataset.output_files import SHARD_PATTERN
from dataset.output_files import TOKEN_COUNTS
from dataset.output_files import commit_outputs

FORMAT_VERSION = 1


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


def read_stats(jobs, results):
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

  read = read_stats(jobs, results)
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
      "shard_pattern": SHARD_PATTERN,
      "examples_per_shard": shard_examples,
      "token_counts_file": TOKEN_COUNTS,
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
    metadata["heldout_shard_pattern"] = HELDOUT_PATTERN
  commit_outputs(config, jobs, {
      vocab.name: vocab.data,
      TOKEN_COUNTS: "".join(f"{int(c)}\n" for c in token_counts).encode(),
      METADATA: (json.dumps(metadata, indent=2) + "\n").encode()})
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


def print_summary(config, meta, read, results, seconds):
  """Warnings for what could not be read, then the held-out and done
  lines; `meta` is write_outputs' metadata, `seconds` the jobs' time."""
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
          f"examples ({HELDOUT_PATTERN}), never trained on", flush=True)
  print(f"done: {meta['num_documents']} docs, "
        f"{meta['num_tokens_tokenized']} tokens, "
        f"{meta['num_examples']} examples in {seconds:.1f}s; "
        f"{rate:,.0f} tokens/s ({busy_rate:,.0f} tokens/s per busy process); "
        f"skipped: {describe_counts(meta['skipped'], SKIP_REASONS)}; "
        f"cleaned: {describe_counts(cleaned, _CLEAN_LABELS)}", flush=True)
