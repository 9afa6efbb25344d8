"""WordPiece / SentencePiece tokenizers and vocabulary building."""

import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from util import tokenization  # noqa: E402
from util.errors import UserError  # noqa: E402
from tests.dataset_builds import sample_paragraphs
from tests.dataset_builds import train_sentencepiece

VOCAB = REPO / "sample_data" / "vocab.txt"


@pytest.fixture(scope="module")
def uncased():
  return tokenization.load_tokenizer(str(VOCAB), do_lower_case=True)


def test_known_bert_ids(uncased):
  assert uncased.kind == tokenization.WORDPIECE
  assert uncased.vocab_size == 30522
  assert uncased.special_ids == {"pad": 0, "unk": 100, "cls": 101,
                                 "sep": 102, "mask": 103}
  assert uncased.tokenize_batch(["hello world", "Hello   WORLD", ""]) == [
      [7592, 2088], [7592, 2088], []]
  # Accents are stripped when lower-casing, like BERT uncased.
  assert (uncased.tokenize_batch(["café"]) ==
          uncased.tokenize_batch(["cafe"]))


def _reference_rows():
  """tests/reference/tokenization.json: the original release's
  FullTokenizer(do_lower_case=True) on every RTE/SST-2 dev+train sentence
  and SQuAD 1.1 dev context with a non-ASCII or control character (cut to
  snippets around them), 50 plain sentences and synthetic corner cases."""
  import json
  with open(REPO / "tests" / "reference" / "tokenization.json",
            encoding="utf-8") as f:
    return json.load(f)["rows"]


def test_matches_original_release(uncased):
  """Issue 37 item 3: the original's wordpieces, e.g. 2½ -> 2 ##½ (not
  21 ##⁄ ##2), km² stays, … stays, ß and final ς stay, C1 controls are
  dropped (don\u00e2\x80\x99t -> dona ##t), words over 200 chars -> [UNK]."""
  rows = _reference_rows()
  assert len(rows) > 1500 and sum(not r["unusual"] for r in rows) == 50
  vocab = VOCAB.read_text(encoding="utf-8").splitlines()
  got = uncased.tokenize_batch([r["text"] for r in rows])
  wrong = [(r["text"], r["pieces"], [vocab[i] for i in ids])
           for r, ids in zip(rows, got)
           if [vocab[i] for i in ids] != r["pieces"]]
  assert not wrong, wrong[:5]
  # Each case the issue names is in the fixture.
  texts = "".join(r["text"] for r in rows)
  for case in ("2\u00bd", "km\u00b2", "\u2026", "\u00df", "\u03c2", "\x80\x99"):
    assert case in texts


def test_nfkc_casefold_is_one_option_away(uncased):
  """The pre-issue-37 normalization (FastBertTokenizer's NFKC case
  folding) stays available."""
  nfkc = tokenization.load_tokenizer(str(VOCAB), do_lower_case=True,
                                     normalization="nfkc_casefold")
  vocab = VOCAB.read_text(encoding="utf-8").splitlines()
  pieces = lambda tok, text: [vocab[i] for i in tok.tokenize_batch([text])[0]]
  assert pieces(uncased, "2\u00bd") == ["2", "##\u00bd"]
  assert pieces(nfkc, "2\u00bd") == ["21", "##\u2044", "##2"]
  assert pieces(uncased, "Fu\u00dfach") == ["fu", "##\u00df", "##ach"]
  assert pieces(nfkc, "Fu\u00dfach") == ["fuss", "##ach"]
  with pytest.raises(UserError, match="lower-cases and strips"):
    tokenization.load_tokenizer(str(VOCAB), do_lower_case=True,
                                strip_accents=False,
                                normalization="nfkc_casefold")


def test_ascii_shortcut_matches_full_normalization(uncased):
  """Printable-ASCII lines skip the Unicode normalization: the same ids
  as when they take it, and as tensorflow_text's BertTokenizer."""
  import tensorflow as tf
  import tensorflow_text as tf_text
  lines = [l for l in sample_paragraphs(300) if l.isascii()][:150]
  lines += ["Hello,   WORLD!", "x" * 150, "y" * 201, ""]
  full = uncased._tok.tokenize(tokenization._normalize(  # pylint: disable=protected-access
      tf.constant(lines), True, True)).to_list()
  assert uncased.tokenize_batch(lines) == full
  vocab = VOCAB.read_text(encoding="utf-8").splitlines()
  table = tf.lookup.StaticVocabularyTable(
      tf.lookup.KeyValueTensorInitializer(
          vocab, tf.range(len(vocab), dtype=tf.int64)), num_oov_buckets=1)
  reference = tf_text.BertTokenizer(table, lower_case=True,
                                    max_bytes_per_word=200)
  expected = reference.tokenize(lines).merge_dims(-2, -1).to_list()
  assert full == expected


def test_batches_larger_than_a_chunk(uncased):
  lines = [f"line number {i} says hello" for i in range(
      tokenization._CHUNK + 17)]
  out = uncased.tokenize_batch(lines)
  assert len(out) == len(lines)
  assert out[-1] == uncased.tokenize_batch([lines[-1]])[0]


def test_case_and_accent_options():
  cased = tokenization.load_tokenizer(str(VOCAB), do_lower_case=False)
  assert not cased.do_lower_case and not cased.strip_accents
  assert cased.tokenize_batch(["hello"]) == [[7592]]
  assert cased.tokenize_batch(["Hello"]) != [[7592]]
  # Lower-case but keep accents: the BertTokenizer path.
  keep = tokenization.load_tokenizer(str(VOCAB), do_lower_case=True,
                                     strip_accents=False)
  assert keep.tokenize_batch(["HELLO World"]) == [[7592, 2088]]
  stripped = tokenization.load_tokenizer(str(VOCAB), do_lower_case=True)
  assert (keep.tokenize_batch(["café"]) !=
          stripped.tokenize_batch(["café"]))
  # Strip accents without lower-casing.
  strip_only = tokenization.load_tokenizer(str(VOCAB), do_lower_case=False,
                                           strip_accents=True)
  assert (strip_only.tokenize_batch(["café"]) ==
          stripped.tokenize_batch(["cafe"]))


def test_vocab_errors(tmp_path):
  with pytest.raises(UserError, match="vocab file not found"):
    tokenization.load_tokenizer(str(tmp_path / "nope.txt"))
  bad = tmp_path / "vocab.txt"
  bad.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n")
  with pytest.raises(UserError, match=r"lacks special token\(s\) \[MASK\]"):
    tokenization.load_tokenizer(str(bad))
  bad.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhi\nhi\n")
  with pytest.raises(UserError, match="'hi' twice"):
    tokenization.load_tokenizer(str(bad))
  # A blank line keeps its id, so ids stay equal to line numbers.
  bad.write_text("[PAD]\n\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhi\n")
  tok = tokenization.load_tokenizer(str(bad))
  assert tok.vocab_size == 7 and tok.tokenize_batch(["hi"]) == [[6]]


def test_sentencepiece_model(tmp_path):
  import sentencepiece as spm
  path = train_sentencepiece(tmp_path)
  tok = tokenization.load_tokenizer(path, do_lower_case=False)
  assert tok.kind == tokenization.SENTENCEPIECE
  sp = spm.SentencePieceProcessor(model_file=path)
  assert tok.vocab_size == sp.get_piece_size()
  ids = tok.special_ids
  assert ids["pad"] == 0 and ids["unk"] == 1
  assert [sp.id_to_piece(ids[k]) for k in ("cls", "sep", "mask")] == [
      "[CLS]", "[SEP]", "[MASK]"]
  lines = sample_paragraphs(50)
  assert tok.tokenize_batch(lines) == sp.encode(lines)
  # Detected by content as well as by extension.
  renamed = tmp_path / "spm_model.bin"
  renamed.write_bytes(pathlib.Path(path).read_bytes())
  assert tokenization.read_vocab_source(str(renamed)).kind == (
      tokenization.SENTENCEPIECE)


def test_sentencepiece_without_specials(tmp_path):
  path = train_sentencepiece(tmp_path, with_specials=False)
  with pytest.raises(UserError, match=r"SentencePiece model lacks .*\[CLS\]"):
    tokenization.load_tokenizer(path)


def test_build_wordpiece_vocab():
  lines = sample_paragraphs(300)
  vocab = tokenization.build_wordpiece_vocab(lines, 1000, lower_case=True)
  assert vocab[:5] == tokenization.RESERVED_TOKENS
  assert 800 < len(vocab) <= 1000
  assert len(set(vocab)) == len(vocab)
  tok = tokenization.WordPieceTokenizer(vocab, do_lower_case=True)
  assert tok.special_ids["pad"] == 0
  out = tok.tokenize_batch(lines[:200])
  flat = [t for row in out for t in row]
  assert flat and max(flat) < len(vocab)
  assert flat.count(tok.special_ids["unk"]) / len(flat) < 0.01


TYPED = ["hello [SEP] world", "a[MASK]b [CLS]", "[PAD] [UNK]",
         "[sep] is text", "[SEP", "", "no special token here"]


def test_typed_special_tokens_are_their_ids(tmp_path):
  """As transformers: a typed [SEP] (exact case) is the [SEP] id, and the
  text around it tokenizes as it would alone; the same in the graph op a
  SavedModel runs, for WordPiece and SentencePiece, cased or not."""
  import tensorflow as tf
  sp_path = train_sentencepiece(tmp_path, vocab_size=300)
  for lower in (True, False):
    for tok in (tokenization.load_tokenizer(str(VOCAB), lower),
                tokenization.load_tokenizer(sp_path, lower)):
      s = tok.special_ids
      ids = tok.tokenize_batch(TYPED)
      alone = tok.tokenize_batch(["hello", "world", "a", "b", "[sep] is "
                                  "text", "[SEP", "no special token here"])
      assert ids[0] == alone[0] + [s["sep"]] + alone[1]
      assert ids[1] == alone[2] + [s["mask"]] + alone[3] + [s["cls"]]
      assert ids[2][0] == s["pad"]  # SentencePiece's unk piece is <unk>
      assert ids[2] == [s["pad"], s["unk"]] or tok.kind == "sentencepiece"
      assert ids[3:] == [alone[4], alone[5], [], alone[6]]
      assert s["sep"] not in ids[3] + ids[4]
      graph = tf.function(tok.tokenize_tensor, input_signature=[
          tf.TensorSpec([None], tf.string)])
      assert graph(tf.constant(TYPED)).to_list() == ids
      assert tok.tokenize_batch([t.encode() for t in TYPED]) == ids
