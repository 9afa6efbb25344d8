"""POS tagging (CoNLL-2000's POS column and the Penn Treebank word/TAG
layouts) and the CRF output layer of every tagging task: the CRF's log Z,
NLL and Viterbi path against brute-force enumeration, and short
fine-tuning runs of a tiny model with the CRF on and off."""

import itertools
import json
import pathlib
import shutil

import numpy as np
import pytest
from sklearn import metrics as sk

import run_finetuning
from configure_finetuning import FinetuningConfig
from finetune.tagging.crf import CRF
from finetune.tagging.tagging_tasks import POSTagging
from tests.script_checks import expect_error
from tests.shared_data import SHARED
from tests.tiny_runs import QUICK
from tests.tiny_runs import VOCAB_8K
from tests.tiny_runs import tiny_run
from util.errors import UserError

CHUNK = pathlib.Path(SHARED) / "chunk"


# ------------------------------------------------------------ helpers
def conll_sentences(path, n):
  """The first n sentences of a CoNLL file as [[(word, pos, chunk)]]."""
  blocks = pathlib.Path(path).read_text().split("\n\n")[:n]
  return [[tuple(line.split()) for line in b.splitlines() if line.strip()]
          for b in blocks]


def write_conll(path, sentences):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text("\n\n".join("\n".join(" ".join(t) for t in s)
                              for s in sentences) + "\n")


def finetune(data_dir, task, capsys, **extra):
  summary = run_finetuning.main([
      "--data-dir", data_dir, "--model-name", "tiny", "--task-names", task,
      "--hparams", json.dumps(dict(QUICK, **extra))])
  return summary, capsys.readouterr().out


@pytest.fixture(scope="module")
def tokenizer():
  from util.tokenization import load_tokenizer
  return load_tokenizer(str(VOCAB_8K))


@pytest.fixture(scope="module")
def train_sentences():
  return conll_sentences(CHUNK / "train.txt", 40)


def make_task(tokenizer, raw, out, **kw):
  config = FinetuningConfig(raw_data_dir=str(raw), output_dir=str(out), **kw)
  return POSTagging(config, tokenizer)


# ------------------------------------------------------------ reading
def test_pos_reads_the_conll_pos_column(tokenizer, train_sentences,
                                        tmp_path):
  write_conll(tmp_path / "pos" / "train.txt", train_sentences)
  task = make_task(tokenizer, tmp_path, tmp_path / "out")
  examples = task.get_examples("train")
  assert len(examples) == 40
  assert examples[0].words == [t[0] for t in train_sentences[0]]
  assert examples[0].tags == [t[1] for t in train_sentences[0]]
  assert examples[0].words[:3] == ["Confidence", "in", "the"]
  assert examples[0].tags[:3] == ["NN", "IN", "DT"]
  tags = {t[1] for s in train_sentences for t in s}
  assert task.label_list == sorted(tags)
  saved = tmp_path / "out" / "pos_labels.txt"
  assert saved.read_text().split() == task.label_list


def test_penn_treebank_layouts_read_the_same(tokenizer, train_sentences,
                                             tmp_path):
  sentences = [s[:] for s in train_sentences[:5]]
  sentences[1] = sentences[1] + [("1/2", "CD", "I-NP"),
                                 ("and/or", "CC", "O")]
  write_conll(tmp_path / "pos" / "train.txt", sentences)
  # word<TAB>TAG per line, a blank line (with stray spaces) between.
  (tmp_path / "pos" / "dev.txt").write_text("\n \n".join(
      "\n".join(f"{w}\t{p}" for w, p, _ in s) for s in sentences) + "\n")
  # word/TAG tokens, one sentence per line; slashes in words escaped.
  (tmp_path / "pos" / "test.txt").write_text("\n".join(" ".join(
      f"{w.replace('/', chr(92) + '/')}/{p}" for w, p, _ in s)
      for s in sentences) + "\n\n")
  task = make_task(tokenizer, tmp_path, tmp_path / "out")
  reads = [[(e.words, e.tags) for e in task.get_examples(split)]
           for split in ("train", "dev", "test")]
  assert reads[0] == reads[1] == reads[2]
  assert reads[2][1][0][-2:] == ["1/2", "and/or"]
  assert reads[2][1][1][-2:] == ["CD", "CC"]


def test_bad_pos_files_are_one_clear_error(tokenizer, tmp_path, capsys):
  pos = tmp_path / "pos"
  pos.mkdir()
  (pos / "train.txt").write_text("The DT\ndog NN\n\nran VBD\n")
  task = make_task(tokenizer, tmp_path, tmp_path / "out")
  dev = pos / "dev.txt"
  cases = [
      ("The/DT dog/NN\nran/VBD fast\n",
       f"{dev} line 2: 'fast' is not a word/TAG token (the file is in the "
       "word/TAG layout, as its line 1 is)"),
      ("The DT\ndog NN\nNew York NNP\n",
       f"{dev} line 3: 3 columns, but line 1 has 2"),
      ("The DT\ndog\n", f"{dev} line 2: expected 'WORD TAG' or 'WORD POS "
       "CHUNK' columns, got 'dog'"),
      ("\n\n", f"{dev} has no sentences"),
  ]
  for text, message in cases:
    dev.write_text(text)
    with pytest.raises(UserError) as info:
      task.get_examples("dev")
    assert str(info.value).startswith(message), (text, str(info.value))
    assert "\n" not in str(info.value)
  with pytest.raises(UserError, match=r"pos: .*test.txt not found"):
    task.get_examples("test")
  # A dev tag the training data lacks is a word scored as wrong...
  dev.write_text("The DT\nbarks VBZ\n")
  examples = task.get_examples("dev")
  assert "1 word(s) with tags the training data lacks (VBZ)" in (
      capsys.readouterr().out)
  features = task.featurize(examples, is_training=False)
  scorer = task.get_scorer(examples, features)
  scorer.update({"predictions": features["label_ids"],
                 "label_weights": features["label_weights"]})
  assert scorer.get_results()["accuracy"] == 50.0
  # ... but not in train, against a tag set saved by an earlier run.
  (pos / "train.txt").write_text("The DT\ndog NN\n\nbarks VBZ\n")
  with pytest.raises(UserError, match=r"train.txt line 4: POS tag 'VBZ' is "
                     r"not in the training data's tag set \(tag set from "
                     r".*pos_labels.txt\)"):
    task.get_examples("train")


# ------------------------------------------------------------ scorer
def test_pos_accuracy_matches_sklearn(tokenizer, train_sentences, tmp_path):
  write_conll(tmp_path / "pos" / "train.txt", train_sentences)
  task = make_task(tokenizer, tmp_path, tmp_path / "out", max_seq_length=24)
  examples = task.get_examples("train")
  features = task.featurize(examples, is_training=False)
  assert task.truncated_words > 0  # cut words count as wrong
  rng = np.random.default_rng(0)
  noise = rng.integers(0, len(task.label_list), features["label_ids"].shape)
  predictions = np.where(rng.random(noise.shape) < 0.3, noise,
                         features["label_ids"])
  scorer = task.get_scorer(examples, features)
  weights = features["label_weights"]
  scorer.update({"predictions": predictions[:15],
                 "label_weights": weights[:15]})
  scorer.update({"predictions": predictions[15:],
                 "label_weights": weights[15:]})
  results = scorer.get_results()
  gold, guess = [], []
  for row, example in enumerate(examples):
    tagged = [task.label_list[i]
              for i in predictions[row][weights[row] > 0]]
    gold += example.tags
    guess += tagged + ["<cut>"] * (len(example.tags) - len(tagged))
  assert results["accuracy"] == pytest.approx(
      100 * sk.accuracy_score(gold, guess))
  assert 40 < results["accuracy"] < 90
  scorer.write_predictions(str(tmp_path / "p.txt"))
  rows = [l.split() for l in (tmp_path / "p.txt").read_text().splitlines()
          if l]
  assert [r[1] for r in rows] == gold and [r[2] for r in rows] == guess


# --------------------------------------------------- CRF vs brute force
def brute_force(emissions, tags, mask, transitions, start, end):
  """log Z, score(tags), the best path and its score of one row, by
  enumerating every tag sequence over the tagged positions."""
  positions = np.flatnonzero(mask > 0)
  if not len(positions):
    return 0.0, 0.0, []

  def score(path):
    total = start[path[0]] + end[path[-1]]
    total += sum(emissions[p, y] for p, y in zip(positions, path))
    total += sum(transitions[a, b] for a, b in zip(path[:-1], path[1:]))
    return total

  k = emissions.shape[-1]
  paths = list(itertools.product(range(k), repeat=len(positions)))
  scores = np.array([score(p) for p in paths])
  log_z = np.log(np.sum(np.exp(scores - scores.max()))) + scores.max()
  best = paths[int(np.argmax(scores))]
  return log_z, score([tags[p] for p in positions]), list(best)


def random_crf(k, seed):
  rng = np.random.default_rng(seed)
  crf = CRF(k)
  crf.build()
  for v in (crf.transitions, crf.start_transitions, crf.end_transitions):
    v.assign(rng.normal(0, 1.5, v.shape).astype(np.float32))
  return crf, rng


MASKS = np.array([[0, 1, 0, 1, 1, 0, 1],  # first subwords between others
                  [1, 1, 1, 1, 1, 1, 1],
                  [0, 0, 0, 0, 0, 0, 0],  # no word: all zero
                  [0, 0, 0, 0, 1, 0, 0],  # one word
                  [1, 0, 0, 0, 0, 0, 1]], np.float32)


@pytest.mark.parametrize("k", [2, 3])
def test_crf_matches_brute_force_enumeration(k):
  from keras import ops
  crf, rng = random_crf(k, seed=k)
  emissions = rng.normal(0, 2, MASKS.shape + (k,)).astype(np.float32)
  tags = rng.integers(0, k, MASKS.shape).astype(np.int32)
  log_z = ops.convert_to_numpy(crf.log_partition(emissions, MASKS))
  score = ops.convert_to_numpy(crf.sequence_score(emissions, tags, MASKS))
  nll = ops.convert_to_numpy(crf.negative_log_likelihood(emissions, tags,
                                                         MASKS))
  path = ops.convert_to_numpy(crf.decode(emissions, MASKS))
  params = [ops.convert_to_numpy(v) for v in (
      crf.transitions, crf.start_transitions, crf.end_transitions)]
  for row, mask in enumerate(MASKS):
    want_z, want_score, want_path = brute_force(emissions[row], tags[row],
                                                mask, *params)
    assert log_z[row] == pytest.approx(want_z, rel=1e-5, abs=1e-4)
    assert score[row] == pytest.approx(want_score, rel=1e-5, abs=1e-4)
    assert nll[row] == pytest.approx(want_z - want_score, rel=1e-5,
                                     abs=1e-4)
    assert list(path[row][mask > 0]) == want_path
  assert nll[2] == 0 and log_z[2] == 0  # a row without words
  assert (nll >= -1e-5).all()
  # Untagged positions change nothing.
  noisy = np.where(MASKS[..., None] > 0, emissions, 99.0).astype(np.float32)
  np.testing.assert_allclose(
      ops.convert_to_numpy(crf.negative_log_likelihood(noisy, tags, MASKS)),
      nll, rtol=1e-5, atol=1e-5)


def test_crf_probabilities_sum_to_one():
  """exp(-NLL) over every tagging of a row adds up to 1."""
  from keras import ops
  crf, rng = random_crf(3, seed=7)
  mask = MASKS[0]
  emissions = rng.normal(0, 1, (1,) + mask.shape + (3,)).astype(np.float32)
  positions = np.flatnonzero(mask)
  paths = list(itertools.product(range(3), repeat=len(positions)))
  tags = np.zeros((len(paths), len(mask)), np.int32)
  for i, path in enumerate(paths):
    tags[i, positions] = path
  nll = ops.convert_to_numpy(crf.negative_log_likelihood(
      np.repeat(emissions, len(paths), 0), tags,
      np.repeat(mask[None], len(paths), 0)))
  assert np.exp(-nll).sum() == pytest.approx(1.0, rel=1e-4)


def test_crf_head_of_a_tagging_task(tokenizer, train_sentences, tmp_path):
  """Chunking with tagging_crf: a CRF head whose loss is the sentence NLL
  per tagged word and whose predictions are the Viterbi path."""
  from keras import ops
  from finetune.tagging.crf import CRFHead
  from finetune.tagging.tagging_tasks import Chunking
  from model.config import get_model_config
  write_conll(tmp_path / "chunk" / "train.txt", train_sentences[:4])
  config = FinetuningConfig(raw_data_dir=str(tmp_path), output_dir="",
                            max_seq_length=24, tagging_crf=True)
  task = Chunking(config, tokenizer)
  examples = task.get_examples("train")
  features = task.featurize(examples, is_training=False)
  head = task.build_head(get_model_config("tiny", tokenizer.vocab_size,
                                          {"hidden_size": 16}))
  assert isinstance(head, CRFHead)
  hidden = np.random.default_rng(0).normal(size=(4, 24, 16)).astype(
      np.float32)
  head(hidden)
  crf = head.crf
  crf.transitions.assign(np.random.default_rng(1).normal(
      size=crf.transitions.shape).astype(np.float32))
  loss, outputs = task.loss_and_outputs(head, hidden, features, False)
  emissions = head(hidden)
  weights = features["label_weights"]
  nll = crf.negative_log_likelihood(emissions, features["label_ids"],
                                    weights)
  np.testing.assert_allclose(ops.convert_to_numpy(loss),
                             ops.convert_to_numpy(nll) / weights.sum(-1),
                             rtol=1e-5)
  path = ops.convert_to_numpy(crf.decode(emissions, weights))
  np.testing.assert_array_equal(
      ops.convert_to_numpy(outputs["predictions"])[weights > 0],
      path[weights > 0])
  # Viterbi's best path scores at least as high as the gold one.
  assert (ops.convert_to_numpy(crf.sequence_score(emissions, path, weights))
          >= ops.convert_to_numpy(crf.sequence_score(
              emissions, features["label_ids"], weights)) - 1e-4).all()
  scorer = task.get_scorer(examples, features)
  scorer.update({k: ops.convert_to_numpy(v) for k, v in outputs.items()})
  assert set(scorer.get_results()) >= {"f1", "accuracy"}


# ------------------------------------------------------- fine-tuning
@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
  """A tiny run and 40 CoNLL-2000 train sentences as pos/ train and dev
  (the dev set is the train set: these runs check that the model fits
  what it sees, in a few seconds)."""
  data_dir = tiny_run(tmp_path_factory.mktemp("tagging"))
  sentences = conll_sentences(CHUNK / "train.txt", 40)
  for split in ("train", "dev"):
    write_conll(pathlib.Path(data_dir) / "finetuning_data" / "pos" /
                f"{split}.txt", sentences)
  return data_dir


def check_pos_run(run_dir, summary, out):
  accuracy = summary["pos"]["accuracy"]["median"]
  assert accuracy > 50, out  # the majority tag (NN) is 12.8% of words
  predictions = pathlib.Path(run_dir, "models", "tiny", "finetuning",
                             "pos_dev_predictions_trial1.txt")
  rows = [l.split() for l in predictions.read_text().splitlines() if l]
  assert len(rows) == sum(map(len, conll_sentences(CHUNK / "train.txt",
                                                   40)))
  assert accuracy == pytest.approx(100 * sk.accuracy_score(
      [r[1] for r in rows], [r[2] for r in rows]))


def test_pos_fine_tunes(run_dir, capsys):
  summary, out = finetune(run_dir, "pos", capsys)
  assert "fine-tuning pos for 40 steps" in out
  check_pos_run(run_dir, summary, out)


def test_pos_fine_tunes_with_a_crf(run_dir, capsys):
  summary, out = finetune(run_dir, "pos", capsys, tagging_crf=True)
  assert "fine-tuning pos for 40 steps" in out
  check_pos_run(run_dir, summary, out)


def test_pos_bad_input_through_the_script(run_dir, capsys, tmp_path):
  raw = tmp_path / "raw"
  shutil.copytree(pathlib.Path(run_dir) / "finetuning_data" / "pos",
                  raw / "pos")
  with open(raw / "pos" / "dev.txt", "a") as f:
    f.write("\nWhat/WP\n")
  argv = ["--data-dir", run_dir, "--model-name", "tiny", "--task-names",
          "pos", "--raw-data-dir", str(raw), "--output-dir",
          str(tmp_path / "out")]
  expect_error(capsys, argv, f"{raw}/pos/dev.txt line ")
