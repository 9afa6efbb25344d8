"""Fuzz-style tests: hostile corpora through the builder and the pipeline.

One directory per kind of bad input (empty and blank files, binary junk,
invalid UTF-8, control characters, a huge line, a huge word, mixed scripts,
one-token documents, broken WikiExtractor and JSON Lines files, deep trees,
symlink loops, ...), built alone and all together. Each build must exit 0
and write a dataset that is readable, within max_seq_length and the
vocabulary, and that the tf.data pipeline can train on; or, when no usable
text is left at all, exit 2 with one `error:` line. Never a traceback. The
summary line and metadata.json must say what was skipped and why.

Inputs are kept small: the whole file runs in well under a minute on two
cores.
"""

import json
import os
import pathlib
import random
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import configure_pretraining  # noqa: E402
from dataset import corpus  # noqa: E402
from dataset import example_writer  # noqa: E402
from dataset import metadata  # noqa: E402
from dataset import text_lines  # noqa: E402
from tests.dataset_builds import read_examples  # noqa: E402
from tests.dataset_builds import run_builder  # noqa: E402

VOCAB = REPO / "sample_data" / "vocab.txt"
SAMPLE = REPO / "sample_data" / "corpus" / "wiki_sample.txt"
SEQ = 32
DEEP = 1100  # directory levels: deeper than Python's recursion limit

GOOD = ("The quick brown fox jumps over the lazy dog. It was a sunny day. "
        "Nobody saw it happen.")

# A clean text and the same text laced with characters the cleaner must
# drop (controls, zero-width, BOM, soft hyphen) or turn into spaces (tab,
# VT, FF, CR, NEL, line/paragraph separators): both must give the same
# examples.
CLEAN = ("Hello world. This is a test of control characters.\n"
         "The second paragraph is here. It has two sentences.\n"
         "\n"
         "A new document starts. Tab and spaces.\n")
DIRTY = ("\ufeffHel\x00lo\u200b world.\u2028This is a te\x7fst of con\x01trol "
         "cha\x1fracters.\r\n"
         "The sec\u00adond paragraph\x0bis here.\x0cIt has two sentences."
         "\u2029\n"
         "\n"
         "\x85\n"
         "A new docu\ufeffment starts.\tTab and\u00a0spaces.\u200e\n")

SCRIPTS = (
    "中文维基百科是一个自由的百科全书。它由志愿者编写。\n"
    "日本語のテキストです。カタカナとひらがな。\n"
    "한국어 문장입니다. 두 번째 문장.\n"
    "مرحبا بالعالم. هذا نص عربي مع علامة اتجاه\u200f.\n"
    "नमस्ते दुनिया। यह हिंदी पाठ है।\n"
    "Привет, мир. Это русский текст.\n"
    "ภาษาไทยไม่มีช่องว่างระหว่างคำ\n"
    "Emoji: 👍🏽 👨\u200d👩\u200d👧\u200d👦 🏳️\u200d🌈 🇩🇪 ❤️ 😀 and text. "
    "Combining: e\u0301 n\u0303.\n"
    "Math 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 and CJK extension B 𠀀𠀁.\n"
    "\n"
    # No spaces and no sentence end the splitter knows: one "sentence" of
    # ~1,000 tokens, far longer than an example.
    + "维基百科是一个多语言的百科全书协作计划" * 50 + "\n")

# (exit code, skipped counts that are not zero) of each case built alone.
EXPECTED = {
    "empty": (2, {"files_without_text": 1}),
    "blank": (2, {"files_without_text": 1}),
    "binary": (2, {"binary_files": 2}),
    "fake_jsonl": (2, {"malformed_json_lines": 3, "files_without_text": 1}),
    "huge_line": (0, {}),
    # The line of junk bytes, and the lone cut character at the end.
    "invalid_utf8": (0, {"binary_lines": 2}),
    "controls": (0, {}),
    "long_word": (0, {}),
    "scripts": (0, {}),
    # The zero-width-joiner-only document tokenizes to nothing.
    "single_token": (0, {"empty_docs": 1}),
    "wiki": (0, {"empty_docs": 1, "lines_outside_docs": 2}),
    "jsonl": (0, {"malformed_json_lines": 4, "binary_lines": 1,
                  "json_lines_without_text": 8, "empty_docs": 1}),
    "deep": (0, {}),
    "links": (0, {"unreadable_files": 3, "repeated_dirs": 1}),
}


def _junk_bytes(rng, n):
  return bytes(b for b in rng.randbytes(n) if b != 0x0A)  # no newlines


def _write_cases(root):
  """One directory per hostile case under root; returns root."""
  rng = random.Random(1234)

  def case(name):
    path = root / name
    path.mkdir(parents=True)
    return path

  (case("empty") / "empty.txt").write_bytes(b"")
  (case("blank") / "blank.txt").write_bytes(b"\n\n   \n\t\n \r\n\x0c\n")
  d = case("binary")
  (d / "garbage.txt").write_bytes(rng.randbytes(32 << 10))  # NULs and all
  (d / "utf16.txt").write_bytes((GOOD + "\n").encode("utf-16"))

  # ~2 MB without a single newline: prose, then words without punctuation.
  half = 1 << 20
  prose = (GOOD + " ") * (half // (len(GOOD) + 1))
  words = "lorem ipsum dolor sit amet " * (half // 27)
  (case("huge_line") / "huge.txt").write_text(prose + words)

  (case("invalid_utf8") / "bad.txt").write_bytes(
      b"Valid line one. Caf\xc3\xa9 is fine.\n"
      b"Broken \xff byte here. Still text.\n"
      b"Overlong \xc0\xaf slash and truncated \xe2\x82 euro.\n"
      b"Encoded surrogate \xed\xa0\x80 inside. Latin-1 caf\xe9 too.\n"
      b"\n"
      b"\xfe\xfe\xfe\xfe\xfe\xfe garbage line x\x00\x01\x02\x03\x04\x05\x06"
      b"\xff\xff\xff\xff\n"
      b"Last good sentence. The end.\n"
      b"\xc3")  # a cut character at the very end, no newline

  (case("controls") / "dirty.txt").write_text(DIRTY)
  (case("long_word") / "word.txt").write_text(
      "A very long word follows. " + "a" * 100_000 +
      " and then the sentence ends. Short one after.\n")
  (case("scripts") / "scripts.txt").write_text(SCRIPTS)
  (case("single_token") / "single.txt").write_text(
      "a\n\nHello\n\n.\n\n中\n\n😀\n\nx\n\n\u200d\u200d\n")

  (case("wiki") / "wiki_00").write_text(
      "stray text before any doc\n"
      '<doc id="1" url="u" title="One">\nOne\n\n'
      "First body paragraph. Has text.\n</doc>\n"
      '<doc id="2" url="u" title="Empty">\nEmpty\n\n</doc>\n'
      "between docs stray\n"
      '<doc id="3" url="u" title="Nested">\nNested\nBody of three.\n'
      '<doc id="4" url="u" title="Four">\nFour\n'
      "Body of four, never closed. More text here.\n")

  lines = [
      json.dumps({"text": "Good document one. It has text."}),
      json.dumps({"text": "Second good one.\nWith two paragraphs."}),
      "{not json",
      "[1, 2, 3]", '"just a string"', "42", "null",
      json.dumps({"title": "no text field"}),
      json.dumps({"text": 5}), json.dumps({"text": None}),
      json.dumps({"text": ["a", "b"]}),
      json.dumps({"text": "   \n  "}),
      '{"text": "Lone \\ud800 surrogate escape. Still fine."}',
      '{"text": "NUL \\u0000 escape and \\u001b[31m ANSI. Okay."}',
      "[" * 20_000,  # deeper than json's recursion can go
      "1" * 5000,  # more digits than Python converts
      '{"text": "truncated line',
  ]
  data = "\n".join(lines).encode() + b"\n"
  data += b'\xef\xbb\xbf{"text": "BOM-prefixed line. Is fine."}\n'
  data += _junk_bytes(rng, 400) + b"\n"
  (case("jsonl") / "data.jsonl").write_bytes(data)
  (case("fake_jsonl") / "plain.jsonl").write_text(
      "This is plain text.\nNot JSON at all.\n\nAnother paragraph.\n")

  deep = case("deep")
  for _ in range(DEEP):  # os.makedirs recurses; so would rmtree
    deep = deep / "d"
    deep.mkdir()
  (deep / "deep.txt").write_text("Deep file text. Found it.\n")

  d = case("links")
  (d / "ok.txt").write_text("Links case file. Has words.\n")
  (d / "dir.txt").mkdir()  # a directory named like a file
  (d / "dir.txt" / "inner.txt").write_text("Inside a directory. Named "
                                           "like a file.\n")
  (d / "empty_dir.jsonl").mkdir()
  with open(os.path.join(os.fsencode(d), b"bad\xffname.txt"), "wb") as f:
    f.write(b"A file name that is not UTF-8. Still read.\n")
  os.symlink(".", d / "loop")  # a directory loop
  os.symlink("self", d / "self")  # a symlink to itself
  os.symlink("missing.txt", d / "broken.txt")
  os.mkfifo(d / "pipe.txt")  # opening it would block forever
  return root


def _remove_deep(path):
  """Removes the deep tree bottom-up: shutil.rmtree recurses per level."""
  dirs = [path]
  while (dirs[-1] / "d").is_dir():
    dirs.append(dirs[-1] / "d")
  for p in reversed(dirs):
    for child in p.iterdir():
      if not child.is_dir():
        child.unlink()
    p.rmdir()


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
  root = tmp_path_factory.mktemp("hostile")
  yield _write_cases(root / "cases")
  _remove_deep(root / "cases" / "deep")
  shutil.rmtree(root, ignore_errors=True)


def build(capsys, **flags):
  """Runs main() in-process; returns (exit code, stdout, stderr)."""
  code = run_builder(**flags)
  out, err = capsys.readouterr()
  assert "Traceback" not in err, err
  return code, out, err


def _train_through_pipeline(out_dir, meta, seq):
  """Reads the dataset the way run_pretraining.py does, a few batches."""
  from pretrain import data
  kwargs = {}
  if meta["tokenizer"] == "wordpiece":
    kwargs["vocab_file"] = str(out_dir / meta["vocab_file"])
  config = configure_pretraining.PretrainingConfig(
      data_dir=str(out_dir.parent), model_name="m", max_seq_length=seq,
      pretrain_tfrecords=str(out_dir / "pretrain_data.tfrecord*"),
      train_batch_size=8, shuffle_buffer_size=64, **kwargs)
  config.validate()
  loaded = data.load_metadata(config)
  data.check_metadata(loaded, config)
  assert config.vocab_size == meta["vocab_size"]
  batches = 0
  for batch in data.make_dataset(config, loaded, batch_size=8).take(3):
    for name in ("input_ids", "masked_input_ids", "masked_lm_ids"):
      ids = batch[name].numpy()
      assert ids.min() >= 0 and ids.max() < meta["vocab_size"], name
    assert batch["input_ids"].shape == (8, seq)
    batches += 1
  assert batches == 3


def check_build(out_dir, seq=SEQ):
  """Checks every record against metadata.json, then reads the data
  through the training pipeline. Returns (metadata, arrays)."""
  meta = json.loads((out_dir / "metadata.json").read_text())
  assert meta["max_seq_length"] == seq
  assert set(meta["skipped"]) == set(metadata.SKIP_REASONS)
  assert all(isinstance(n, int) and n >= 0 for n in meta["skipped"].values())
  arrays, per_shard = read_examples(out_dir, seq)
  ids, mask, seg = (arrays[k] for k in example_writer.FEATURES)
  n = meta["num_examples"]
  assert n > 0 and ids.shape == mask.shape == seg.shape == (n, seq)
  assert per_shard == {
      f"pretrain_data.tfrecord-{i}-of-{meta['num_shards']}": c
      for i, c in enumerate(meta["examples_per_shard"])}
  special = meta["special_ids"]
  assert ids.min() >= 0 and ids.max() < meta["vocab_size"]
  assert set(np.unique(seg)) <= {0, 1} and set(np.unique(mask)) <= {0, 1}
  assert (ids[:, 0] == special["cls"]).all()
  # input_mask is a prefix of ones; padding is [PAD] with segment 0.
  assert (mask[:, :-1] >= mask[:, 1:]).all()
  lengths = mask.sum(axis=1)
  assert lengths.min() >= 3
  rows = np.arange(n)
  assert (ids[rows, lengths - 1] == special["sep"]).all()
  assert (ids[mask == 0] == special["pad"]).all()
  assert (seg[mask == 0] == 0).all()
  # Segment ids never go back from 1 to 0 inside an example.
  assert ((seg[:, 1:] >= seg[:, :-1]) | (mask[:, 1:] == 0)).all()
  is_special = (ids == special["cls"]) | (ids == special["sep"])
  assert meta["num_tokens"] == int(((mask == 1) & ~is_special).sum())
  assert meta["num_special_tokens"] == int(is_special.sum())
  assert meta["num_padding_tokens"] == int((mask == 0).sum())
  counts = np.array([int(x) for x in (out_dir / "token_counts.txt")
                     .read_text().split()])
  assert counts.tolist() == np.bincount(
      ids.ravel(), minlength=meta["vocab_size"]).tolist()
  assert not list(out_dir.glob("incomplete.*"))
  assert not list(out_dir.glob("*.tmp"))
  _train_through_pipeline(out_dir, meta, seq)
  return meta, arrays


def _done_line(stdout):
  done = [l for l in stdout.splitlines() if l.startswith("done:")]
  assert len(done) == 1, stdout
  return done[0]


def _expected_skipped(names):
  total = dict.fromkeys(metadata.SKIP_REASONS, 0)
  for name in names:
    for key, n in EXPECTED[name][1].items():
      total[key] += n
  return total


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_case_alone(cases, tmp_path, capsys, name):
  code, out, err = build(capsys, corpus_dir=cases / name, vocab_file=VOCAB,
                         output_dir=tmp_path / "out", max_seq_length=SEQ,
                         num_out_files=2)
  expected_code, skipped = EXPECTED[name]
  assert code == expected_code, (out, err)
  if code == 2:
    assert err.startswith("error: corpus has no text") and (
        err.count("\n") == 1), err
    assert not (tmp_path / "out").exists()
    return
  meta, arrays = check_build(tmp_path / "out")
  assert meta["skipped"] == _expected_skipped([name])
  described = metadata.describe_counts(meta["skipped"],
                                      metadata.SKIP_REASONS)
  assert f"skipped: {described}" in _done_line(out)
  unk = meta["special_ids"]["unk"]
  if name == "huge_line":
    assert meta["num_long_sentences_split"] >= 1
    # Not trimmed to one example: (nearly) all the text is kept.
    assert meta["num_tokens"] > 0.9 * meta["num_tokens_tokenized"] > 300_000
  elif name == "invalid_utf8":
    assert meta["num_lines_with_bad_bytes"] == 5
    assert meta["num_documents"] == 2
  elif name == "long_word":
    assert unk in arrays["input_ids"]  # the 100k-letter word is one [UNK]
    assert meta["num_tokens_tokenized"] < 30
  elif name == "scripts":
    assert meta["num_long_sentences_split"] >= 1
    assert meta["num_tokens"] > 0.9 * meta["num_tokens_tokenized"]
  elif name == "single_token":
    assert meta["num_documents"] == 6 and meta["num_examples"] == 6
    assert (arrays["input_mask"].sum(axis=1) == 3).all()
  elif name == "wiki":
    assert meta["num_documents"] == 3
  elif name == "jsonl":
    assert meta["num_documents"] == 5
  elif name == "links":
    assert meta["num_documents"] == 3
    assert "warning: skipped" in err and "not a regular file" in err


def test_mixed_directory(cases, tmp_path, capsys):
  """Every case at once (each case is a subdirectory)."""
  start = time.time()
  code, out, err = build(capsys, corpus_dir=cases, vocab_file=VOCAB,
                         output_dir=tmp_path / "out", max_seq_length=SEQ,
                         num_out_files=3)
  assert code == 0, err
  assert time.time() - start < 30
  meta, _ = check_build(tmp_path / "out")
  # Reading is per file, so the counts add up over the cases.
  expected = _expected_skipped(EXPECTED)
  assert meta["skipped"] == expected
  done = _done_line(out)
  described = metadata.describe_counts(expected, metadata.SKIP_REASONS)
  assert f"skipped: {described};" in done
  for phrase in ("2 binary/non-UTF-8 files", "unreadable files",
                 "malformed JSON lines", "1 repeated directory (symlink loop)",
                 "empty docs", "cleaned: 6 lines with undecodable bytes"):
    assert phrase in done, done


@pytest.mark.parametrize("strip_accents", [True, False])
def test_control_characters_are_cleaned(cases, tmp_path, capsys,
                                        strip_accents):
  """Dirty text gives the same examples as its clean twin, with the fast
  and the accent-keeping tokenizer settings."""
  twin = tmp_path / "clean"
  twin.mkdir()
  (twin / "clean.txt").write_text(CLEAN)
  shards = {}
  for name, corpus_dir in (("clean", twin), ("dirty", cases / "controls")):
    out_dir = tmp_path / f"{name}_out"
    code, _, err = build(capsys, corpus_dir=corpus_dir, vocab_file=VOCAB,
                         output_dir=out_dir, max_seq_length=SEQ,
                         num_out_files=1, strip_accents=strip_accents)
    assert code == 0, err
    shards[name] = (out_dir / "pretrain_data.tfrecord-0-of-1").read_bytes()
  assert shards["dirty"] == shards["clean"]
  assert text_lines.clean_text(DIRTY).split() == CLEAN.split()


def test_sentencepiece(cases, tmp_path, capsys):
  import sentencepiece as spm
  text = tmp_path / "sp.txt"
  with open(SAMPLE, encoding="utf-8") as f:
    lines = [l for l in (next(f) for _ in range(300)) if not l.startswith("<")]
  text.write_text("".join(lines) + SCRIPTS, encoding="utf-8")
  spm.SentencePieceTrainer.train(
      input=str(text), model_prefix=str(tmp_path / "sp"), vocab_size=700,
      user_defined_symbols=["[CLS]", "[SEP]", "[MASK]"], pad_id=0,
      pad_piece="[PAD]", unk_id=1, bos_id=-1, eos_id=-1, minloglevel=2)
  # Everything but the 2 MB line, which only slows this run down.
  corpus_glob = str(cases / "[!h]*")
  code, out, err = build(capsys, corpus_dir=corpus_glob,
                         vocab_file=tmp_path / "sp.model",
                         output_dir=tmp_path / "out", max_seq_length=SEQ,
                         num_out_files=2, lower_case=False)
  assert code == 0, err
  meta, _ = check_build(tmp_path / "out")
  assert meta["tokenizer"] == "sentencepiece" and meta["vocab_size"] == 700
  assert "skipped: " in _done_line(out)


def test_unreadable_files_are_counted(cases, tmp_path, capsys, monkeypatch):
  """Permission errors (Python's and TF's), a read that fails half way and
  an unlistable directory: counted and skipped, not fatal."""
  import tensorflow as tf
  root = tmp_path / "corpus"
  (root / "locked_dir").mkdir(parents=True)
  (root / "locked_dir" / "hidden.txt").write_text("Never listed. Really.\n")
  for name in ("ok", "denied", "tf_denied", "fails_later"):
    # Ten short documents fit the first read; the long one does not.
    (root / f"{name}.txt").write_text(
        f"File {name} here.\n\n" +
        "".join(f"Doc {i}.\n\n" for i in range(9)) +
        "Long document. " * 40 + "\n")
  real_open, real_listdir = text_lines._open, os.listdir

  class FailsLater:
    """Reads the first chunk, then the disk "goes away"."""

    def __init__(self, path):
      self._f, self._reads = real_open(path), 0

    def __enter__(self):
      return self

    def __exit__(self, *exc):
      self._f.close()

    def read(self, n):
      self._reads += 1
      if self._reads > 1:
        raise OSError(5, "Input/output error")
      return self._f.read(n)

  def fake_open(path):
    name = os.path.basename(path)
    if name == "denied.txt":
      raise PermissionError(13, "Permission denied", path)
    if name == "tf_denied.txt":
      raise tf.errors.PermissionDeniedError(None, None, "permission denied")
    if name == "fails_later.txt":
      return FailsLater(path)
    return real_open(path)

  def fake_listdir(path):
    if os.path.basename(path) == "locked_dir":
      raise PermissionError(13, "Permission denied", path)
    return real_listdir(path)

  monkeypatch.setattr(text_lines, "_open", fake_open)
  monkeypatch.setattr(text_lines, "_READ_CHUNK", 256)
  monkeypatch.setattr(os, "listdir", fake_listdir)
  code, out, err = build(capsys, corpus_dir=root, vocab_file=VOCAB,
                         output_dir=tmp_path / "out", max_seq_length=SEQ,
                         num_out_files=1)
  monkeypatch.undo()
  assert code == 0, err
  meta, _ = check_build(tmp_path / "out")
  # denied, tf_denied, fails_later (its first documents are still used)
  # and locked_dir.
  assert meta["skipped"]["unreadable_files"] == 4
  assert meta["num_documents"] == 11 + 10
  assert "4 unreadable files" in _done_line(out)
  assert err.count("warning: skipped") == 4 and "Permission denied" in err
  # Only unreadable files left: a one-line error, exit 2.
  (root / "ok.txt").unlink()
  (root / "fails_later.txt").unlink()
  monkeypatch.setattr(text_lines, "_open", fake_open)
  monkeypatch.setattr(os, "listdir", fake_listdir)
  code, _, err = build(capsys, corpus_dir=root, vocab_file=VOCAB,
                       output_dir=tmp_path / "out2", max_seq_length=SEQ)
  assert code == 2 and err.count("\n") == 1, err
  assert "corpus has no text" in err and "3 unreadable" in err


def test_huge_line_is_cut_without_breaking_characters(tmp_path, monkeypatch):
  monkeypatch.setattr(text_lines, "_READ_CHUNK", 4096)
  monkeypatch.setattr(text_lines, "_MAX_LINE_BYTES", 50_000)
  spaced = "word " * 30_000  # cut at spaces
  solid = "ж中" * 40_000  # no spaces: cut between characters
  path = tmp_path / "huge.txt"
  path.write_text(spaced + solid + "\nnext line\n")
  stats = corpus.ReadStats()
  docs = list(corpus.read_documents(str(path), stats))
  assert len(docs) == 1
  # 350 kB in pieces of at most 50 kB.
  assert stats.long_lines_cut >= 6 and stats.bad_byte_lines == 0
  assert all(len(p.encode()) <= 50_000 for p in docs[0])
  assert "".join(docs[0]).replace(" ", "") == (
      spaced + solid + "next line").replace(" ", "")


def test_clean_text():
  assert text_lines.clean_text("plain text") == "plain text"
  assert text_lines.clean_text("a\x00b\x7fc\x9bd\ufffde") == "abcde"
  assert text_lines.clean_text("a\tb\rc\x0bd\x0ce\x85f\u2028g\u2029h") == (
      "a b c d e f g h")
  assert text_lines.clean_text("\ufeffz\u200bw\u00adj\u200ek") == "zwjk"
  assert text_lines.clean_text("lone \ud800 surrogate") == "lone  surrogate"
  # Joiners stay: emoji sequences and some scripts need them.
  family = "👨\u200d👩\u200d👧"
  assert text_lines.clean_text(family) == family
  assert text_lines.clean_text("keeps\nnewlines") == "keeps\nnewlines"


def test_cli_subprocesses(cases, tmp_path):
  """The script itself: the mixed corpus with two worker processes, and a
  corpus of nothing but junk (exit 2, one error line)."""
  junk = tmp_path / "junk"
  junk.mkdir()
  for name in ("empty", "blank", "binary"):
    for f in (cases / name).iterdir():
      shutil.copy(f, junk / f"{name}_{f.name}")
  script = str(REPO / "build_pretraining_dataset.py")
  common = ["--vocab-file", str(VOCAB), "--max-seq-length", str(SEQ)]
  runs = {
      "mixed": [str(cases), "--num-processes", "2", "--num-out-files", "4"],
      "junk": [str(junk)],
  }
  procs = {
      name: subprocess.Popen(
          [sys.executable, script, "--corpus-dir", args[0], *args[1:],
           *common, "--output-dir", str(tmp_path / f"{name}_out")],
          cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
          text=True)
      for name, args in runs.items()}
  results = {}
  for name, proc in procs.items():
    try:
      # A hang guard, not a speed test: a loaded 2-core box is slow.
      out, err = proc.communicate(timeout=600)
    except subprocess.TimeoutExpired:
      proc.kill()
      raise
    assert "Traceback" not in err, err
    results[name] = (proc.returncode, out, err)
  code, out, err = results["mixed"]
  assert code == 0, err
  meta, _ = check_build(tmp_path / "mixed_out")
  assert meta["num_processes"] == 2
  assert meta["skipped"] == _expected_skipped(EXPECTED)
  assert "skipped: " in _done_line(out)
  code, out, err = results["junk"]
  assert code == 2, (out, err)
  assert err.count("\n") == 1 and err.startswith("error: corpus has no text")
  assert "2 without text" in err and "2 binary" in err
  assert not (tmp_path / "junk_out").exists()


def test_long_sentence_fills_examples_in_order():
  from dataset.example_builder import ExampleBuilder
  cls, sep, pad = 2, 3, 0
  builder = ExampleBuilder(SEQ, cls, sep, pad, random.Random(0))
  assert builder.add_sentence([10, 11]) is None  # pending before the long one
  sentence = list(range(100, 1100))
  examples = builder.add_long_sentence(sentence)
  last = builder.end_document()
  examples += [last] if last else []
  tokens = []
  for example in examples:
    ids = example.input_ids
    assert len(ids) == SEQ and ids[0] == cls and ids[example.length - 1] == sep
    tokens += [t for t in ids[:example.length] if t not in (cls, sep)]
  # Nothing trimmed, nothing reordered; the earlier sentence went out whole.
  assert tokens == [10, 11] + sentence
  assert examples[0].input_ids[:4] == [cls, 10, 11, sep]
  assert len(examples) == 1 + -(-len(sentence) // (SEQ - 3))
  # Short sentences take the usual path.
  assert builder.add_long_sentence([5, 6]) == []


# Issue 54, 7: wrong-cause messages.
@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le"])
def test_a_utf16_vocab_is_named_as_such(tmp_path, capsys, encoding):
  """Read loosely, UTF-16 gave "the token '\\x00\\ufffd\\x00' twice"."""
  (tmp_path / "corpus").mkdir()
  (tmp_path / "corpus" / "a.txt").write_text(GOOD)
  vocab = tmp_path / "vocab.txt"
  vocab.write_bytes(VOCAB.read_text(encoding="utf-8").encode(encoding))
  code, _, err = build(capsys, corpus_dir=tmp_path / "corpus",
                       vocab_file=vocab, output_dir=tmp_path / "out")
  assert code == 2 and err == (f"error: vocab file {vocab} is UTF-16 text, "
                               "not UTF-8: save it as UTF-8 (one token a "
                               "line)\n"), err
  assert not (tmp_path / "out").exists()


def test_a_latin1_vocab_names_its_first_bad_byte(tmp_path):
  from util import tokenization
  from util.errors import UserError
  vocab = tmp_path / "vocab.txt"
  vocab.write_bytes("[PAD]\n[UNK]\ncaf\xe9\n".encode("latin-1"))
  with pytest.raises(UserError, match=r"vocab file .*vocab.txt line 3: not "
                     r"UTF-8 text \(byte 0xe9\); save it as UTF-8"):
    tokenization.read_vocab_source(str(vocab))


@pytest.mark.parametrize("where", ["same", "inside", "holds"])
@pytest.mark.parametrize("overwrite", [False, True])
def test_output_dir_overlapping_the_corpus_is_refused(tmp_path, capsys, where,
                                                      overwrite):
  """Never advises --overwrite on a folder of the user's corpus, and
  --overwrite deletes nothing there. The corpus folder holds what a user
  keeps beside a corpus (a vocab.txt, a metadata.json) and an earlier
  build's shard name."""
  from tests.script_checks import snapshot
  root = tmp_path / "user"
  corpus_dir = root / "text" if where == "holds" else root
  corpus_dir.mkdir(parents=True)
  (corpus_dir / "a.txt").write_text(GOOD)
  (corpus_dir / "metadata.json").write_text('{"mine": 1}\n')
  shutil.copy(VOCAB, corpus_dir / "vocab.txt")
  (corpus_dir / "pretrain_data.tfrecord-0-of-1").write_text("my notes\n")
  out = {"same": corpus_dir, "inside": corpus_dir / "shards",
         "holds": root}[where]
  what = {"same": "is the corpus directory",
          "inside": f"lies inside the corpus directory {corpus_dir}",
          "holds": f"holds the corpus \\({corpus_dir}\\)"}[where]
  before = snapshot(tmp_path)
  code, _, err = build(capsys, corpus_dir=corpus_dir,
                       vocab_file=corpus_dir / "vocab.txt", output_dir=out,
                       overwrite=overwrite)
  assert code == 2 and err.count("\n") == 1, err
  assert re.fullmatch(rf"error: output directory {out} {what}: choose an "
                      r"--output-dir outside the corpus \(nothing was "
                      r"written\)\n", err), err
  assert "--overwrite" not in err.replace("--output-dir", "")
  assert snapshot(tmp_path) == before


def test_output_dir_holding_a_globbed_corpus_is_refused(tmp_path, capsys):
  (tmp_path / "a.txt").write_text(GOOD)
  code, _, err = build(capsys, corpus_dir=tmp_path / "*.txt",
                       vocab_file=VOCAB, output_dir=tmp_path, overwrite=True)
  assert code == 2 and f"holds the corpus ({tmp_path}/a.txt)" in err, err
