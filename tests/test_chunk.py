"""CoNLL-2000 chunking: BIOES, span F1, features, head and scorer."""

import pathlib
import random
import shutil
import sys

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from configure_finetuning import FinetuningConfig  # noqa: E402
from finetune.tagging import tagging_utils as tu  # noqa: E402
from finetune.tagging.tagging_tasks import Chunking  # noqa: E402
from finetune.tagging.tagging_tasks import pack_words  # noqa: E402
from tests.shared_data import BERT_VOCAB  # noqa: E402
from tests.shared_data import SHARED  # noqa: E402
from util.errors import UserError  # noqa: E402

DATA = pathlib.Path(SHARED) / "chunk"
VOCAB = pathlib.Path(BERT_VOCAB)
# The first sentence of the official test set, by chunk.
FIRST = [("Rockwell International Corp.", "NP"), ("'s Tulsa unit", "NP"),
         ("said", "VP"), ("it", "NP"), ("signed", "VP"),
         ("a tentative agreement", "NP"), ("extending", "VP"),
         ("its contract", "NP"), ("with", "PP"), ("Boeing Co.", "NP"),
         ("to provide", "VP"), ("structural parts", "NP"), ("for", "PP"),
         ("Boeing", "NP"), ("'s 747 jetliners", "NP"), (".", None)]


@pytest.fixture(scope="module")
def tokenizer():
  from util.tokenization import load_tokenizer
  return load_tokenizer(str(VOCAB))


@pytest.fixture(scope="module")
def raw_dir(tmp_path_factory):
  """RAW_DATA_DIR with the official test set as chunk/dev.txt."""
  root = tmp_path_factory.mktemp("raw")
  (root / "chunk").mkdir()
  shutil.copy(DATA / "train.txt", root / "chunk" / "train.txt")
  shutil.copy(DATA / "test.txt", root / "chunk" / "dev.txt")
  return root


def make_task(tokenizer, raw_dir, tmp_path, **kw):
  config = FinetuningConfig(raw_data_dir=str(raw_dir),
                            output_dir=str(tmp_path / "out"), **kw)
  return Chunking(config, tokenizer)


@pytest.fixture(scope="module")
def dev(tokenizer, raw_dir, tmp_path_factory):
  task = make_task(tokenizer, raw_dir, tmp_path_factory.mktemp("o"))
  return task, task.get_examples("dev")


# ------------------------------------------------------------ BIOES
def test_bioes_hand_cases():
  iob = ["B-NP", "I-NP", "I-NP", "B-VP", "O", "B-PP", "B-NP", "I-NP", "O"]
  bioes = ["B-NP", "I-NP", "E-NP", "S-VP", "O", "S-PP", "B-NP", "E-NP", "O"]
  assert tu.iob2_to_bioes(iob) == bioes
  assert tu.bioes_to_iob2(bioes) == iob
  assert tu.iob2_to_bioes(["O", "O"]) == ["O", "O"]
  assert tu.iob2_to_bioes(["B-NP"]) == ["S-NP"]
  # conlleval's reading of IOB1 habits: I after O, or after another type,
  # starts a chunk.
  assert tu.iob2_to_bioes(["O", "I-NP", "I-NP", "I-VP"]) == [
      "O", "B-NP", "E-NP", "S-VP"]
  assert tu.get_spans(["B-NP", "I-NP", "E-NP", "S-VP", "O", "I-PP"]) == [
      (0, 2, "NP"), (3, 3, "VP"), (5, 5, "PP")]
  # Ill-formed BIOES: E/S close a chunk, so an I after them opens one.
  assert tu.get_spans(["S-NP", "I-NP", "E-NP", "E-NP", "B-VP"]) == [
      (0, 0, "NP"), (1, 2, "NP"), (3, 3, "NP"), (4, 4, "VP")]
  for bad in ("NP", "X-NP", "B-", "B"):
    with pytest.raises(ValueError, match="malformed chunk tag"):
      tu.split_tag(bad)


def test_tag_set_is_sorted_and_complete():
  assert tu.bioes_tag_set({"VP", "NP"}) == [
      "B-NP", "B-VP", "E-NP", "E-VP", "I-NP", "I-VP", "O", "S-NP", "S-VP"]


# ------------------------------------------------------------ span F1
def test_span_f1_hand_count():
  gold = ["B-NP", "E-NP", "S-VP", "B-NP", "I-NP", "E-NP", "O"]
  pred = ["B-NP", "E-NP", "B-VP", "E-VP", "B-NP", "E-NP", "S-PP"]
  # Gold NP(0,1) VP(2,2) NP(3,5); predicted NP(0,1) right, VP(2,3) wrong
  # end, NP(4,5) wrong start, PP(6,6) spurious: 1 of 4 right, 1 of 3 found.
  assert tu.span_counts(gold, pred) == (1, 4, 3)
  p, r, f = tu.precision_recall_f1(1, 4, 3)
  assert (p, r) == pytest.approx((25.0, 100 / 3))
  assert f == pytest.approx(2 * 25 * (100 / 3) / (25 + 100 / 3))
  assert tu.precision_recall_f1(0, 0, 0) == (0.0, 0.0, 0.0)


def conlleval_counts(sentences):
  """conlleval.pl's counting loop for IOB tags, written from its source:
  (correct chunks, guessed chunks, gold chunks) over [(gold, guess)]."""

  def parse(tag):
    return tuple(tag.split("-", 1)) if "-" in tag else (tag, "")

  def end_of_chunk(prev, tag, prev_type, kind):
    return ((prev in ("B", "I") and tag in ("B", "O")) or
            (prev != "O" and prev_type != kind))

  def start_of_chunk(prev, tag, prev_type, kind):
    return ((tag == "B") or (prev == "O" and tag == "I") or
            (tag != "O" and prev_type != kind))

  tokens = []
  for gold, guess in sentences:
    tokens += list(zip(gold, guess)) + [("O", "O")]  # the boundary line
  correct = found_gold = found_guess = 0
  in_correct = False
  last_c, last_c_type, last_g, last_g_type = "O", "", "O", ""
  for gold_tag, guess_tag in tokens:
    c, c_type = parse(gold_tag)
    g, g_type = parse(guess_tag)
    end_c = end_of_chunk(last_c, c, last_c_type, c_type)
    end_g = end_of_chunk(last_g, g, last_g_type, g_type)
    if in_correct:
      if end_c and end_g and last_g_type == last_c_type:
        in_correct = False
        correct += 1
      elif end_c != end_g or g_type != c_type:
        in_correct = False
    start_c = start_of_chunk(last_c, c, last_c_type, c_type)
    start_g = start_of_chunk(last_g, g, last_g_type, g_type)
    if start_c and start_g and g_type == c_type:
      in_correct = True
    found_gold += start_c
    found_guess += start_g
    last_c, last_c_type, last_g, last_g_type = c, c_type, g, g_type
  return correct + in_correct, found_guess, found_gold


def random_iob(rng, n):
  """Any IOB sequence, ill-formed ones (I after O, type switches) too."""
  return [rng.choice(["O", "B-NP", "I-NP", "B-VP", "I-VP", "I-PP"])
          for _ in range(n)]


def test_span_counts_match_conlleval():
  rng = random.Random(0)
  sentences = []
  for _ in range(300):
    gold = random_iob(rng, rng.randint(1, 12))
    guess = [t if rng.random() < 0.8 else rng.choice(["O", "B-NP", "I-VP"])
             for t in gold]
    sentences.append((gold, guess))
  ours = np.sum([tu.span_counts(tu.iob2_to_bioes(g), tu.iob2_to_bioes(p))
                 for g, p in sentences], axis=0)
  assert tuple(ours) == conlleval_counts(sentences)
  assert ours[0] > 100  # enough right chunks to mean something


def test_hand_count_agrees_with_conlleval():
  gold = ["B-NP", "I-NP", "B-VP", "B-NP", "I-NP", "I-NP", "O"]
  guess = ["B-NP", "I-NP", "B-VP", "I-VP", "B-NP", "I-NP", "B-PP"]
  # NP(0,1) right; VP(2,3) and NP(4,5) off by a word; PP spurious.
  assert conlleval_counts([(gold, guess)]) == (1, 4, 3)
  assert tu.span_counts(tu.iob2_to_bioes(gold),
                        tu.iob2_to_bioes(guess)) == (1, 4, 3)


# --------------------------------------------------------- data, labels
def test_reads_official_test_set(dev):
  task, examples = dev
  assert len(examples) == 2012
  assert sum(len(e.words) for e in examples) == 47377
  assert sum(len(tu.get_spans(e.tags)) for e in examples) == 23852
  first = examples[0]
  assert first.guid == "dev-0"
  spans = tu.get_spans(first.tags)
  assert [(" ".join(first.words[s:e + 1]), k) for s, e, k in spans] == [
      f for f in FIRST if f[1]]
  assert first.tags[:4] == ["B-NP", "I-NP", "E-NP", "B-NP"]


def test_label_set_from_train_saved_and_stable(dev, tokenizer, raw_dir,
                                               tmp_path):
  task, _ = dev
  labels = task.label_list
  assert labels == sorted(labels) and len(labels) == 45  # 11 types x 4 + O
  assert {"E-LST", "I-LST", "S-UCP", "O"} <= set(labels)
  saved = pathlib.Path(task.labels_path())
  assert saved.read_text().split() == labels
  # A second run reads the saved set, even without the train file.
  other = make_task(tokenizer, tmp_path, saved.parent.parent)
  assert other.label_list == labels


def test_unknown_and_malformed_tags_are_user_errors(tokenizer, raw_dir,
                                                    tmp_path):
  root = tmp_path / "raw"
  (root / "chunk").mkdir(parents=True)
  (root / "chunk" / "train.txt").write_text("The DT B-NP\ndog NN I-NP\n\n")
  (root / "chunk" / "dev.txt").write_text("ran VBD B-VP\n")
  task = make_task(tokenizer, root, tmp_path)
  dev_path = root / "chunk" / "dev.txt"
  with pytest.raises(UserError, match=rf"{dev_path} line 1: chunk tag "
                     "'B-VP' has a type the training data lacks"):
    task.get_examples("dev")
  dev_path.write_text("ran VBD O\nfast RB Q-ADVP\n")
  with pytest.raises(UserError, match="line 2: malformed chunk tag 'Q-ADVP'"):
    task.get_examples("dev")
  dev_path.write_text("ran\n")
  with pytest.raises(UserError, match="line 1: expected 'WORD POS CHUNK'"):
    task.get_examples("dev")
  with pytest.raises(UserError, match="test.txt not found"):
    task.get_examples("test")
  with pytest.raises(UserError, match="unknown split 'eval'"):
    task.get_examples("eval")


# ---------------------------------------------------------- features
def word_pieces(tokenizer, features, row, num_words):
  """Each tagged word's subword strings, read back from the row."""
  ids = features["input_ids"][row]
  starts = list(np.flatnonzero(features["label_weights"][row]))
  end = int(features["input_mask"][row].sum()) - 1  # the [SEP]
  bounds = starts + [end]
  assert len(starts) == num_words
  return [[tokenizer.vocab[i] for i in ids[a:b]]
          for a, b in zip(bounds[:-1], bounds[1:])]


def test_labels_sit_on_first_subwords(dev, tokenizer):
  task, examples = dev
  examples = examples[:40]
  features = task.featurize(examples, is_training=False)
  special = tokenizer.special_ids
  # The original's default length for chunking, and its segment ids: 1 at
  # every real token ([CLS] and [SEP] too), 0 at padding.
  assert features["input_ids"].shape == (40, 256)
  assert task.truncated_words == 0
  np.testing.assert_array_equal(features["example_index"], np.arange(40))
  np.testing.assert_array_equal(features["segment_ids"],
                                features["input_mask"])
  for row, example in enumerate(examples):
    ids = features["input_ids"][row]
    length = int(features["input_mask"][row].sum())
    assert ids[0] == special["cls"] and ids[length - 1] == special["sep"]
    assert (ids[length:] == special["pad"]).all()
    pieces = word_pieces(tokenizer, features, row, len(example.words))
    for word, word_ids in zip(example.words, pieces):
      assert not word_ids[0].startswith("##")
      if "[UNK]" not in word_ids:
        assert "".join(p.removeprefix("##") for p in word_ids) == (
            word.lower())
    tagged = features["label_weights"][row] > 0
    assert [task.label_list[i] for i in features["label_ids"][row][tagged]
            ] == example.tags
    assert not features["label_ids"][row][~tagged].any()
  # Words of several subwords exist in these sentences.
  assert features["label_weights"].sum() < features["input_mask"].sum() - 80


def test_truncation_keeps_whole_words(dev, tokenizer, raw_dir, tmp_path):
  _, examples = dev
  task = make_task(tokenizer, raw_dir, tmp_path, max_seq_length=16)
  features = task.featurize(examples[:1], is_training=False)
  example = examples[0]
  pieces = word_pieces(tokenizer, features, 0, int(
      features["label_weights"][0].sum()))
  kept = len(pieces)
  assert sum(map(len, pieces)) <= 14
  # Every kept word is whole: its subwords spell it.
  assert ["".join(p.removeprefix("##") for p in w) for w in pieces] == [
      w.lower() for w in example.words[:kept]]
  next_word = tokenizer.tokenize_batch([example.words[kept]])[0]
  assert sum(map(len, pieces)) + len(next_word) > 14
  assert task.truncated_sentences == 1
  assert task.truncated_words == len(example.words) - kept


def test_pack_words_edge_cases():
  assert pack_words([[5, 6], [7], [8, 9]], 4, 1) == ([5, 6, 7], [0, 2])
  assert pack_words([[5] * 10, [7]], 4, 1) == ([5] * 4, [0])  # one long word
  assert pack_words([[], [7]], 4, 1) == ([1, 7], [0, 1])  # no subwords: UNK
  assert pack_words([], 4, 1) == ([], [])


# ---------------------------------------------------------- head, loss
def test_head_shapes_and_loss(dev, tokenizer):
  from keras import ops
  from model.config import get_model_config
  from model.encoder import Encoder
  task, examples = dev
  features = task.featurize(examples[:3], is_training=False)
  config = get_model_config("tiny", tokenizer.vocab_size, {
      "hidden_size": 32, "intermediate_size": 64, "embedding_size": 16})
  encoder, head = Encoder(config), task.build_head(config)
  hidden = encoder(features["input_ids"], features["input_mask"],
                   features["segment_ids"], training=False)
  loss, outputs = task.loss_and_outputs(head, hidden, features, False)
  num_tags = len(task.label_list)
  logits = ops.convert_to_numpy(head(hidden, training=False))
  assert logits.shape == (3, 256, num_tags)
  assert [w.shape for w in head.weights] == [(32, num_tags), (num_tags,)]
  assert tuple(loss.shape) == (3,)
  assert tuple(outputs["predictions"].shape) == (3, 256)
  np.testing.assert_array_equal(outputs["predictions"], logits.argmax(-1))
  # Mean cross-entropy over the tagged positions of each row.
  log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  nll = -np.take_along_axis(log_probs, features["label_ids"][..., None],
                            -1)[..., 0]
  w = features["label_weights"]
  np.testing.assert_allclose(loss, (nll * w).sum(1) / w.sum(1), rtol=1e-5)
  np.testing.assert_array_equal(outputs["label_weights"], w)
  # Labels under weight 0 do not count.
  changed = dict(features, label_ids=np.where(w > 0, features["label_ids"],
                                              7).astype(np.int32))
  loss2, _ = task.loss_and_outputs(head, hidden, changed, False)
  np.testing.assert_allclose(loss2, loss, rtol=1e-6)


# ------------------------------------------------------------ scorer
def test_scorer_end_to_end(dev, tmp_path):
  task, examples = dev
  examples = examples[:3]
  features = task.featurize(examples, is_training=False)
  predictions = features["label_ids"].copy()
  tagged = features["label_weights"] > 0
  predictions[~tagged] = 3  # untagged positions carry junk; ignored
  # Sentence 0: "said" (word 6) S-VP -> S-NP: one gold VP missed, one NP
  # wrong, 27 of 28 words right.
  positions = np.flatnonzero(tagged[0])
  predictions[0, positions[6]] = task.label_list.index("S-NP")
  scorer = task.get_scorer(examples, features)
  weights = features["label_weights"]
  scorer.update({"predictions": predictions[:2], "label_weights": weights[:2]})
  scorer.update({"predictions": predictions[2:], "label_weights": weights[2:]})
  results = scorer.get_results()
  gold = sum(len(tu.get_spans(e.tags)) for e in examples)
  words = sum(len(e.words) for e in examples)
  assert len(tu.get_spans(examples[0].tags)) == 15  # FIRST's chunks
  assert results["precision"] == pytest.approx(100 * (gold - 1) / gold)
  assert results["recall"] == pytest.approx(100 * (gold - 1) / gold)
  assert results["f1"] == pytest.approx(100 * (gold - 1) / gold)
  assert results["accuracy"] == pytest.approx(100 * (words - 1) / words)
  assert all(type(v) is float for v in results.values())  # noqa: E721
  path = tmp_path / "chunk_dev_predictions"
  scorer.write_predictions(str(path))
  lines = path.read_text().split("\n")
  assert lines[:3] == ["Rockwell B-NP B-NP", "International I-NP I-NP",
                       "Corp. I-NP I-NP"]
  assert lines[6] == "said B-VP B-NP"
  assert lines[28] == ""  # sentence break after 28 words
  original = (DATA / "test.txt").read_text().split("\n")
  assert [l.split()[0::2] for l in original[:28]] == [
      [l.split()[0], l.split()[1]] for l in lines[:28]]


def read_predictions(path):
  """[(gold, guess)] per sentence of a `word gold guess` file."""
  sentences = []
  for block in path.read_text().split("\n\n"):
    rows = [line.split() for line in block.splitlines() if line]
    if rows:
      sentences.append(([r[1] for r in rows], [r[2] for r in rows]))
  return sentences


def test_scorer_reproduces_conlleval_on_its_file(dev, tmp_path):
  task, examples = dev
  examples = examples[:200]
  features = task.featurize(examples, is_training=False)
  rng = np.random.default_rng(0)
  noise = rng.integers(0, len(task.label_list), features["label_ids"].shape)
  predictions = np.where(rng.random(noise.shape) < 0.3, noise,
                         features["label_ids"])  # ill-formed BIOES too
  scorer = task.get_scorer(examples, features)
  scorer.update({"predictions": predictions,
                 "label_weights": features["label_weights"]})
  results = scorer.get_results()
  scorer.write_predictions(str(tmp_path / "p.txt"))
  sentences = read_predictions(tmp_path / "p.txt")
  assert [len(g) for g, _ in sentences] == [len(e.words) for e in examples]
  p, r, f = tu.precision_recall_f1(*conlleval_counts(sentences))
  assert (results["precision"], results["recall"], results["f1"]) == (
      pytest.approx(p), pytest.approx(r), pytest.approx(f))
  assert 30 < f < 90
  pairs = [(a, b) for g, q in sentences for a, b in zip(g, q)]
  assert results["accuracy"] == pytest.approx(
      100 * sum(a == b for a, b in pairs) / len(pairs))


def test_truncated_words_count_as_outside(dev, tokenizer, raw_dir, tmp_path):
  _, examples = dev
  task = make_task(tokenizer, raw_dir, tmp_path, max_seq_length=16)
  features = task.featurize(examples[:1], is_training=False)
  scorer = task.get_scorer(examples[:1], features)
  scorer.update({"predictions": features["label_ids"],
                 "label_weights": features["label_weights"]})
  results = scorer.get_results()
  tags = examples[0].tags
  kept = int(features["label_weights"].sum())
  assert scorer.predicted_tags()[0] == tags[:kept] + ["O"] * (
      len(tags) - kept)
  # Only the gold chunks that end before the cut can be found.
  right = [s for s in tu.get_spans(tags) if s[1] < kept]
  found = tu.get_spans(tags[:kept])
  assert 0 < len(right) < len(tu.get_spans(tags))
  assert results["precision"] == pytest.approx(100 * len(right) / len(found))
  assert results["recall"] == pytest.approx(
      100 * len(right) / len(tu.get_spans(tags)))
