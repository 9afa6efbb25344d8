"""Tokenization speed: ours beside Hugging Face `tokenizers`, same text.

  python benchmarks/tokenize_throughput.py [--corpus-dir DIR] [--max-files 4]
      [--vocab-file vocab.txt] [--json out.json]

Three figures in tokens/s, on the same lines of text:
  ours (tokenize_batch)   util/tokenization.py's WordPiece, one process
  ours (build dataset)    build_pretraining_dataset.py end to end (read,
                          clean, split sentences, tokenize, pack, write
                          TFRecords), one process, per busy second
  hf BertWordPiece        tokenizers.BertWordPieceTokenizer.encode_batch,
                          with its default threads and with one thread
Defaults: a few files of the shared Wikipedia sample and the BERT vocab
when ../shared/data exists, else the embedded sample corpus.
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

from benchmarks import write_json  # noqa: E402
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "data")

HF_SCRIPT = """
import json, sys, time
from tokenizers import BertWordPieceTokenizer
lines = json.load(open(sys.argv[1]))
tok = BertWordPieceTokenizer(sys.argv[2], lowercase=True)
tok.encode_batch(lines[:1000], add_special_tokens=False)  # warm up
best = None
for _ in range(2):
  start = time.perf_counter()
  n = sum(len(e.ids) for e in tok.encode_batch(lines,
                                               add_special_tokens=False))
  t = time.perf_counter() - start
  best = t if best is None else min(best, t)
print(json.dumps({"tokens": n, "seconds": best}))
"""


def default_paths():
  wiki = os.path.join(SHARED, "pretrain_corpus", "enwiki_2015_wikiextractor")
  vocab = os.path.join(SHARED, "vocab", "bert-base-uncased-vocab.txt")
  if os.path.isdir(wiki) and os.path.exists(vocab):
    return wiki, vocab
  return (os.path.join(ROOT, "sample_data", "corpus"),
          os.path.join(ROOT, "sample_data", "vocab.txt"))


def read_lines(files):
  """Text lines, WikiExtractor's <doc> markers and blank lines left out."""
  lines = []
  for path in files:
    with open(path, encoding="utf-8", errors="replace") as f:
      lines += [l.strip() for l in f
                if l.strip() and not re.match(r"</?doc", l)]
  return lines


def time_ours(lines, vocab_file):
  from util.tokenization import load_tokenizer
  tokenizer = load_tokenizer(vocab_file, do_lower_case=True)
  tokenizer.tokenize_batch(lines[:1000])  # warm up (graph building)
  best, tokens = None, 0
  for _ in range(2):
    start = time.perf_counter()
    tokens = sum(len(t) for t in tokenizer.tokenize_batch(lines))
    seconds = time.perf_counter() - start
    best = seconds if best is None else min(best, seconds)
  return tokens, best


def time_build(files, vocab_file, work):
  """build_pretraining_dataset.py, one process: its own per-busy-process
  tokens/s (the whole job: reading to writing TFRecords)."""
  corpus = os.path.join(work, "corpus")
  os.makedirs(corpus)
  for i, path in enumerate(files):
    os.symlink(os.path.abspath(path), os.path.join(corpus, f"f{i}.txt"))
  out = subprocess.run(
      [sys.executable, os.path.join(ROOT, "build_pretraining_dataset.py"),
       "--corpus-dir", corpus, "--vocab-file", vocab_file, "--output-dir",
       os.path.join(work, "out"), "--num-processes", "1"],
      capture_output=True, text=True, check=True, cwd=ROOT).stdout
  found = re.search(r"\(([0-9,]+) tokens/s per busy process\)", out)
  return float(found.group(1).replace(",", ""))


def time_hf(lines_file, vocab_file, threads):
  env = dict(os.environ)
  if threads:
    env["RAYON_NUM_THREADS"] = str(threads)
  out = subprocess.run([sys.executable, "-c", HF_SCRIPT, lines_file,
                        vocab_file], capture_output=True, text=True,
                       check=True, env=env).stdout
  result = json.loads(out.strip().splitlines()[-1])
  return result["tokens"], result["seconds"]


def main(argv=None):
  corpus, vocab = default_paths()
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--corpus-dir", default=corpus)
  p.add_argument("--vocab-file", default=vocab)
  p.add_argument("--max-files", type=int, default=4)
  p.add_argument("--json", help="write the results here")
  args = p.parse_args(argv)
  files = sorted(f for f in glob.glob(os.path.join(args.corpus_dir, "**"),
                                      recursive=True) if os.path.isfile(f))
  files = files[:args.max_files]
  lines = read_lines(files)
  mb = sum(len(l.encode()) for l in lines) / 1e6
  print(f"{len(files)} files, {len(lines)} lines, {mb:.1f} MB of text; "
        f"vocab {args.vocab_file}; {os.cpu_count()} CPU cores", flush=True)
  rows = {}
  with tempfile.TemporaryDirectory() as work:
    lines_file = os.path.join(work, "lines.json")
    with open(lines_file, "w") as f:
      json.dump(lines, f)
    for threads, name in ((0, "hf BertWordPiece (default threads)"),
                          (1, "hf BertWordPiece (1 thread)")):
      tokens, seconds = time_hf(lines_file, args.vocab_file, threads)
      rows[name] = tokens / seconds
    tokens_ours, seconds = time_ours(lines, args.vocab_file)
    rows["ours tokenize_batch (1 process)"] = tokens_ours / seconds
    rows["ours build_pretraining_dataset (1 process)"] = time_build(
        files, args.vocab_file, work)
  print(f"tokens: ours {tokens_ours}, hf {tokens}")
  hf_default = rows["hf BertWordPiece (default threads)"]
  for name, rate in rows.items():
    print(f"{name:<45} {rate:12,.0f} tokens/s  {rate / hf_default:5.2f}x")
  result = {"tokens_per_s": rows, "lines": len(lines), "mb": mb}
  write_json(args.json, result)
  return result


if __name__ == "__main__":
  main()
