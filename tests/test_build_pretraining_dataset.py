"""End-to-end tests of build_pretraining_dataset.py on small corpora."""

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dataset import corpus  # noqa: E402
from dataset import corpus_files  # noqa: E402
from dataset import example_writer  # noqa: E402
from dataset.sentences import split_sentences  # noqa: E402
from tests.dataset_builds import SEQ
from tests.dataset_builds import read_examples
from tests.dataset_builds import run_builder

SAMPLE_DIR = REPO / "sample_data" / "corpus"
VOCAB = REPO / "sample_data" / "vocab.txt"


def build(capsys=None, **flags):
  """Runs main() in-process; returns (exit code, stderr if captured)."""
  code = run_builder(**flags)
  err = capsys.readouterr().err if capsys else None
  return code, err


def metadata(out_dir):
  return json.loads((pathlib.Path(out_dir) / "metadata.json").read_text())


def dir_bytes(out_dir):
  return {p.name: p.read_bytes() for p in sorted(pathlib.Path(out_dir).iterdir())}


@pytest.fixture(scope="module")
def sample_build(tmp_path_factory):
  out = tmp_path_factory.mktemp("sample") / "out"
  code, _ = build(corpus_dir=SAMPLE_DIR, vocab_file=VOCAB, output_dir=out,
                  max_docs=12, max_seq_length=SEQ, num_out_files=3)
  assert code == 0
  return out


def check_dataset(out_dir, seq_len=SEQ):
  """Checks the records against metadata.json and token_counts.txt."""
  meta = metadata(out_dir)
  arrays, per_file = read_examples(out_dir, seq_len)
  ids, mask, seg = (arrays[k] for k in example_writer.FEATURES)
  special = meta["special_ids"]
  n = meta["num_examples"]
  assert n > 0 and ids.shape == (n, seq_len)
  assert meta["max_seq_length"] == seq_len and meta["format_version"] == 1
  assert meta["shard_pattern"] == "pretrain_data.tfrecord-*"
  assert len(per_file) == meta["num_shards"]
  assert per_file == {f"pretrain_data.tfrecord-{i}-of-{meta['num_shards']}": c
                      for i, c in enumerate(meta["examples_per_shard"])}
  assert ids.min() >= 0 and ids.max() < meta["vocab_size"]
  assert (ids[:, 0] == special["cls"]).all()
  lengths = mask.sum(axis=1)
  for row in range(n):
    length = lengths[row]
    assert (mask[row, :length] == 1).all() and (mask[row, length:] == 0).all()
    assert (ids[row, length:] == special["pad"]).all()
    assert ids[row, length - 1] == special["sep"]
    seps = np.flatnonzero(ids[row, :length] == special["sep"])
    assert len(seps) in (1, 2)
    assert (seg[row, :seps[0] + 1] == 0).all()
    assert (seg[row, seps[0] + 1:length] == 1).all()
    assert (seg[row, length:] == 0).all()
  is_special = (ids == special["cls"]) | (ids == special["sep"])
  assert meta["num_tokens"] == int(((mask == 1) & ~is_special).sum())
  assert meta["num_special_tokens"] == int(is_special.sum())
  assert meta["num_padding_tokens"] == int((mask == 0).sum())
  counts = [int(x) for x in (pathlib.Path(out_dir) / "token_counts.txt")
            .read_text().split()]
  assert len(counts) == meta["vocab_size"]
  assert sum(counts) == n * seq_len
  assert counts == np.bincount(ids.ravel(),
                               minlength=meta["vocab_size"]).tolist()
  assert (pathlib.Path(out_dir) / meta["vocab_file"]).exists()
  assert not list(pathlib.Path(out_dir).glob("incomplete.*"))
  assert not list(pathlib.Path(out_dir).glob("*.tmp"))
  return meta, arrays


def test_wikiextractor_sample(sample_build):
  meta, _ = check_dataset(sample_build)
  assert meta["tokenizer"] == "wordpiece" and meta["vocab_size"] == 30522
  assert meta["special_ids"] == {"cls": 101, "mask": 103, "pad": 0,
                                 "sep": 102, "unk": 100}
  assert meta["num_documents"] == 12 and meta["seed"] == 12345
  assert meta["do_lower_case"] and meta["strip_accents"]
  assert (sample_build / "vocab.txt").read_bytes() == VOCAB.read_bytes()


def test_deterministic(sample_build, tmp_path):
  again = tmp_path / "again"
  code, _ = build(corpus_dir=SAMPLE_DIR, vocab_file=VOCAB, output_dir=again,
                  max_docs=12, max_seq_length=SEQ, num_out_files=3)
  assert code == 0
  assert dir_bytes(again) == dir_bytes(sample_build)
  other = tmp_path / "other_seed"
  code, _ = build(corpus_dir=SAMPLE_DIR, vocab_file=VOCAB, output_dir=other,
                  max_docs=12, max_seq_length=SEQ, num_out_files=3, seed=1)
  assert code == 0
  assert (other / "pretrain_data.tfrecord-0-of-3").read_bytes() != (
      sample_build / "pretrain_data.tfrecord-0-of-3").read_bytes()


def test_sentence_splitter():
  text = ("Mr. Smith met J. R. R. Tolkien in 1950. He said: \"Fine.\" Was it "
          "cold? Yes! 3 men left, e.g. Bob. the end")
  assert split_sentences(text) == [
      "Mr. Smith met J. R. R. Tolkien in 1950.", "He said: \"Fine.\"",
      "Was it cold?", "Yes!", "3 men left, e.g. Bob. the end"]
  assert split_sentences("  ") == []


def test_format_detection_and_wikiextractor_reader(tmp_path):
  wiki = tmp_path / "wiki_00"
  wiki.write_text('<doc id="1" url="u" title="T">\nT\n\nBody one.\n'
                  'Body two.\n</doc>\n<doc id="2" url="u" title="E">\nE\n'
                  '\n</doc>\n')
  assert corpus.detect_format(str(wiki)) == corpus.WIKIEXTRACTOR
  stats = corpus.ReadStats()
  assert list(corpus.read_documents(str(wiki), stats)) == [
      ["Body one.", "Body two."]]
  assert stats.docs == 1 and stats.skipped_docs == 1
  jsonl = tmp_path / "data"
  jsonl.write_text('{"text": "a\\nb"}\n')
  assert corpus.detect_format(str(jsonl)) == corpus.JSONL
  assert list(corpus.read_documents(str(jsonl))) == [["a", "b"]]
  plain = tmp_path / "p.txt"
  plain.write_text("one\ntwo\n\n\nthree\n")
  assert corpus.detect_format(str(plain)) == corpus.PLAIN
  assert list(corpus.read_documents(str(plain))) == [["one", "two"],
                                                     ["three"]]


WORDS = ["apple", "banana", "cherry", "grape", "lemon", "mango"]


def _word_docs(words):
  """Documents whose sentences repeat one word: easy to trace back."""
  docs = []
  for i, word in enumerate(words):
    sentences = [f"{word.capitalize()} {word} {word} {word}."] * (5 + 9 * i)
    docs.append(" ".join(sentences[:len(sentences) // 2]) + "\n" +
                " ".join(sentences[len(sentences) // 2:]))
  return docs


def _word_ids():
  from util import tokenization
  tok = tokenization.load_tokenizer(str(VOCAB))
  return {row[0] for row in tok.tokenize_batch(WORDS)}, tok.tokenize_batch(
      ["."])[0][0]


def _assert_documents_kept_apart(out_dir, num_docs):
  meta, arrays = check_dataset(out_dir)
  assert meta["num_documents"] == num_docs
  word_ids, period = _word_ids()
  seen = set()
  for row in arrays["input_ids"]:
    words = {t for t in row.tolist() if t in word_ids}
    assert len(words) == 1, "an example mixes documents"
    seen |= words
    assert set(row.tolist()) <= word_ids | {period, 0, 101, 102}
  assert len(seen) == num_docs
  return meta


def test_plain_text_nested_dirs_and_bad_bytes(tmp_path):
  corpus_dir = tmp_path / "corpus"
  (corpus_dir / "sub").mkdir(parents=True)
  docs = _word_docs(WORDS)
  (corpus_dir / "a.txt").write_text("\n\n".join(docs[:3]) + "\n")
  # Blank lines with spaces still separate documents; bad bytes are replaced.
  (corpus_dir / "sub" / "b.txt").write_bytes(
      ("\n  \n\n".join(docs[3:]) + "\n").encode() + b"\n\n\xff\xfe\n")
  (corpus_dir / ".hidden.txt").write_text("Hidden files are skipped.\n")
  out = tmp_path / "out"
  code, _ = build(corpus_dir=corpus_dir, vocab_file=VOCAB, output_dir=out,
                  max_seq_length=SEQ, num_out_files=2)
  assert code == 0
  meta = metadata(out)
  assert meta["num_lines_with_bad_bytes"] == 1
  # The bad-bytes line is a document of its own: kept ([UNK]) or skipped.
  assert meta["num_documents"] + meta["num_skipped_documents"] == 7
  (corpus_dir / "sub" / "b.txt").write_text("\n  \n\n".join(docs[3:]) + "\n")
  code, _ = build(corpus_dir=corpus_dir, vocab_file=VOCAB, output_dir=out,
                  max_seq_length=SEQ, num_out_files=2, overwrite=True)
  assert code == 0
  _assert_documents_kept_apart(out, 6)


def test_jsonl_and_glob(tmp_path):
  corpus_dir = tmp_path / "corpus"
  corpus_dir.mkdir()
  lines = [json.dumps({"id": i, "text": doc})
           for i, doc in enumerate(_word_docs(WORDS[:4]))]
  lines += ["{not json", json.dumps({"text": "  \n "}), json.dumps([1, 2])]
  (corpus_dir / "part-0.jsonl").write_text("\n".join(lines) + "\n")
  (corpus_dir / "ignored.txt").write_text("Not matched by the glob.\n")
  out = tmp_path / "out"
  code, _ = build(corpus_dir=str(corpus_dir / "*.jsonl"), vocab_file=VOCAB,
                  output_dir=out, max_seq_length=SEQ, num_out_files=2)
  assert code == 0
  meta = _assert_documents_kept_apart(out, 4)
  assert meta["num_skipped_lines"] == 2
  assert meta["num_skipped_documents"] == 1
  assert meta["num_input_files"] == 1


def test_refuses_used_output_dir_and_overwrites_only_own_files(
    tmp_path, capsys):
  out = tmp_path / "out"
  out.mkdir()
  (out / "notes.txt").write_text("keep me")
  code, err = build(capsys, corpus_dir=SAMPLE_DIR, vocab_file=VOCAB,
                    output_dir=out, max_docs=2, max_seq_length=SEQ,
                    num_out_files=4)
  assert code == 2
  assert err.startswith("error: ") and str(out) in err and "--overwrite" in err
  assert [p.name for p in out.iterdir()] == ["notes.txt"]
  for shards in (4, 2):
    code, _ = build(corpus_dir=SAMPLE_DIR, vocab_file=VOCAB, output_dir=out,
                    max_docs=2, max_seq_length=SEQ, num_out_files=shards,
                    overwrite=True)
    assert code == 0
  assert (out / "notes.txt").read_text() == "keep me"
  assert sorted(p.name for p in out.glob("pretrain_data.tfrecord-*")) == [
      "pretrain_data.tfrecord-0-of-2", "pretrain_data.tfrecord-1-of-2"]
  check_dataset(out)


def test_config_errors(tmp_path, capsys):
  empty = tmp_path / "empty"
  empty.mkdir()
  (empty / "blank.txt").write_text("\n\n  \n")
  a_file = tmp_path / "file.txt"
  a_file.write_text("x")
  base = dict(corpus_dir=SAMPLE_DIR, vocab_file=VOCAB,
              output_dir=tmp_path / "out")
  cases = [
      (dict(max_seq_length=4), "--max-seq-length must be at least 8"),
      (dict(corpus_dir=empty), "corpus has no text"),
      (dict(num_processes=4, num_out_files=2), "--num-out-files (2)"),
      (dict(build_vocab=1000), "either --vocab-file or --build-vocab"),
      (dict(vocab_file=""), "no vocabulary given"),
      (dict(output_dir=a_file / "sub"), "file.txt is a file, not a folder"),
  ]
  for override, message in cases:
    code, err = build(capsys, **{**base, **override})
    assert code == 2, override
    assert err.startswith("error: ") and message in err, err
    assert err.count("\n") == 1, err


def test_cli_errors_are_one_line(tmp_path):
  """Missing corpus / vocab: exit status 2 and one `error:` line."""
  script = str(REPO / "build_pretraining_dataset.py")
  runs = {
      "corpus not found": ["--corpus-dir", str(tmp_path / "missing"),
                           "--vocab-file", str(VOCAB)],
      "vocab file not found": ["--corpus-dir", str(SAMPLE_DIR),
                               "--vocab-file", str(tmp_path / "v.txt")],
  }
  procs = {
      msg: subprocess.Popen(
          [sys.executable, script, *args, "--output-dir",
           str(tmp_path / "out")], cwd=str(tmp_path),
          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
      for msg, args in runs.items()}
  for msg, proc in procs.items():
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    errors = [l for l in err.splitlines() if l.startswith("error:")]
    assert len(errors) == 1 and msg in errors[0], err
    assert "Traceback" not in err
  assert not (tmp_path / "out").exists()


def _train_sentencepiece(tmp_path):
  import sentencepiece as spm
  text = tmp_path / "sp.txt"
  with open(SAMPLE_DIR / "wiki_sample.txt", encoding="utf-8") as f:
    lines = [l for l in (next(f) for _ in range(300)) if not l.startswith("<")]
  text.write_text("".join(lines), encoding="utf-8")
  spm.SentencePieceTrainer.train(
      input=str(text), model_prefix=str(tmp_path / "tiny"), vocab_size=600,
      user_defined_symbols=["[CLS]", "[SEP]", "[MASK]"], pad_id=0,
      pad_piece="[PAD]", unk_id=1, bos_id=-1, eos_id=-1, minloglevel=2)
  return tmp_path / "tiny.model"


def test_sentencepiece_end_to_end(tmp_path):
  model = _train_sentencepiece(tmp_path)
  out = tmp_path / "out"
  code, _ = build(corpus_dir=SAMPLE_DIR, vocab_file=model, output_dir=out,
                  max_docs=3, max_seq_length=SEQ, num_out_files=2,
                  lower_case=False)
  assert code == 0
  meta, _ = check_dataset(out)
  assert meta["tokenizer"] == "sentencepiece" and meta["vocab_size"] == 600
  assert meta["vocab_file"] == "tiny.model"
  assert meta["special_ids"]["pad"] == 0 and not meta["do_lower_case"]
  assert (out / "tiny.model").read_bytes() == model.read_bytes()


def test_build_vocab(tmp_path):
  out = tmp_path / "out"
  code, _ = build(corpus_dir=SAMPLE_DIR, build_vocab=800, output_dir=out,
                  max_docs=2, max_seq_length=SEQ, num_out_files=2)
  assert code == 0
  vocab = (out / "vocab.txt").read_text().splitlines()
  assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  meta, arrays = check_dataset(out)
  assert meta["vocab_size"] == len(vocab) <= 800
  assert meta["special_ids"]["pad"] == 0
  unk = int((arrays["input_ids"] == meta["special_ids"]["unk"]).sum())
  assert unk / meta["num_tokens"] < 0.01


def test_two_processes(tmp_path):
  corpus_dir = tmp_path / "corpus"
  corpus_dir.mkdir()
  docs = _word_docs(WORDS)
  for i in range(3):
    (corpus_dir / f"part{i}.txt").write_text(
        "\n\n".join(docs[2 * i:2 * i + 2]) + "\n")
  out = tmp_path / "out"
  code, _ = build(corpus_dir=corpus_dir, vocab_file=VOCAB, output_dir=out,
                  max_seq_length=SEQ, num_out_files=4, num_processes=2)
  assert code == 0
  meta = _assert_documents_kept_apart(out, 6)
  assert meta["num_processes"] == 2


def _rows(path, seq_len=SEQ):
  import tensorflow as tf
  spec = {"input_ids": tf.io.FixedLenFeature([seq_len], tf.int64)}
  return [tuple(r) for batch in tf.data.TFRecordDataset(str(path)).batch(512)
          for r in tf.io.parse_example(batch, spec)["input_ids"].numpy()]


def _held_out_rows(out):
  return sorted(r for p in pathlib.Path(out).glob("heldout_data.tfrecord-*")
                for r in _rows(p))


def test_heldout_documents_never_reach_the_training_shards(tmp_path):
  """A document goes wholly to the held-out shards or wholly to training,
  decided by a hash of its text: the same split for 1 or 2 processes."""
  out = tmp_path / "one"
  code, _ = build(corpus_dir=SAMPLE_DIR, vocab_file=VOCAB, output_dir=out,
                  max_docs=60, max_seq_length=SEQ, num_out_files=3,
                  heldout_fraction=0.25)
  assert code == 0
  meta, arrays = check_dataset(out)  # training shards and their counts
  docs = [d for p in corpus_files.find_files(str(SAMPLE_DIR))
          for d in corpus.read_documents(p)][:60]
  expected = sum(example_writer.is_heldout(d, 12345, 0.25) for d in docs)
  assert 5 <= expected <= 25  # about a quarter
  assert meta["num_heldout_documents"] == expected
  held = _held_out_rows(out)
  assert len(held) == meta["num_heldout_examples"] > 0
  assert meta["heldout_shard_pattern"] == "heldout_data.tfrecord-*"
  # No 24 consecutive tokens of a held-out example occur in training data.
  def grams(rows):
    return {tuple(r[i:i + 24]) for r in rows for i in range(1, SEQ - 24)
            if 0 not in r[i:i + 24] and 102 not in r[i:i + 24]}
  train = grams(tuple(r) for r in arrays["input_ids"])
  assert grams(held) and not grams(held) & train
  two = tmp_path / "two"
  code, _ = build(corpus_dir=SAMPLE_DIR, vocab_file=VOCAB, output_dir=two,
                  max_docs=60, max_seq_length=SEQ, num_out_files=4,
                  num_processes=2, heldout_fraction=0.25)
  assert code == 0
  assert metadata(two)["num_heldout_documents"] == expected


def test_pretraining_evaluates_on_the_heldout_shards(tmp_path, capsys):
  from configure_pretraining import PretrainingConfig
  from pretrain import data
  out = tmp_path / "pretrain_tfrecords"
  code, _ = build(corpus_dir=SAMPLE_DIR, vocab_file=VOCAB, output_dir=out,
                  max_docs=40, max_seq_length=SEQ, num_out_files=2,
                  heldout_fraction=0.3)
  assert code == 0
  config = PretrainingConfig(data_dir=str(tmp_path), model_name="m",
                             max_seq_length=SEQ)
  config.resolve()
  meta = data.load_metadata(config)
  assert meta["eval_source"] == "held-out documents"
  assert [pathlib.Path(f).name for f in meta["eval_files"]] == [
      "heldout_data.tfrecord-0-of-1"]
  data.check_metadata(meta, config)
  batch = next(iter(data.make_dataset(config, meta, 8, is_training=False)))
  held = set(_held_out_rows(out))
  assert {tuple(r) for r in batch["input_ids"].numpy()} <= held
  # A dataset built before held-out splits: eval reads the training shards.
  old = metadata(out)
  for key in ("heldout_shard_pattern", "num_heldout_examples"):
    del old[key]
  (out / "metadata.json").write_text(json.dumps(old))
  meta = data.load_metadata(config)
  assert meta["eval_files"] == meta["files"]
  assert "no held-out split" in meta["eval_source"]
