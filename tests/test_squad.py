"""SQuAD 1.1 / 2.0: official scoring, featurization, head, postprocessing."""

import collections
import copy
import json
import pathlib
import random
import re
import string

import numpy as np
import pytest

from configure_finetuning import FinetuningConfig
from finetune.qa import SQuAD
from finetune.qa import SQuADv1
from finetune.qa import squad_eval
from finetune.qa.qa_data import max_context_span
from finetune.qa.qa_data import split_context
from model.config import get_model_config
from util import tokenization
from tests.shared_data import BERT_VOCAB
from tests.shared_data import SHARED
from util.errors import UserError

DATA = pathlib.Path(SHARED) / "squad"
VOCAB = BERT_VOCAB


# ---------------------------------------------- the official scripts' logic
# Behaviour-exact copies of evaluate-v1.1.py and evaluate-v2.0.py (the parts
# that compute numbers), kept apart from the code under test.

def _official_normalize(s):
  def remove_articles(text):
    return re.sub(r"\b(a|an|the)\b", " ", text)

  def white_space_fix(text):
    return " ".join(text.split())

  def remove_punc(text):
    exclude = set(string.punctuation)
    return "".join(ch for ch in text if ch not in exclude)

  return white_space_fix(remove_articles(remove_punc(s.lower())))


def _official_v1_f1(prediction, ground_truth):
  prediction_tokens = _official_normalize(prediction).split()
  ground_truth_tokens = _official_normalize(ground_truth).split()
  common = (collections.Counter(prediction_tokens) &
            collections.Counter(ground_truth_tokens))
  num_same = sum(common.values())
  if num_same == 0:
    return 0
  precision = 1.0 * num_same / len(prediction_tokens)
  recall = 1.0 * num_same / len(ground_truth_tokens)
  return (2 * precision * recall) / (precision + recall)


def _official_v1_em(prediction, ground_truth):
  return _official_normalize(prediction) == _official_normalize(ground_truth)


def _official_v1_evaluate(dataset, predictions):
  f1 = exact_match = total = 0
  for article in dataset:
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:
        total += 1
        if qa["id"] not in predictions:
          continue
        ground_truths = [x["text"] for x in qa["answers"]]
        prediction = predictions[qa["id"]]
        exact_match += max(_official_v1_em(prediction, g)
                           for g in ground_truths)
        f1 += max(_official_v1_f1(prediction, g) for g in ground_truths)
  return {"exact_match": 100.0 * exact_match / total,
          "f1": 100.0 * f1 / total}


def _official_v2_evaluate(dataset, preds, na_probs, na_prob_thresh):
  def get_tokens(s):
    return _official_normalize(s).split() if s else []

  def compute_f1(a_gold, a_pred):
    gold_toks, pred_toks = get_tokens(a_gold), get_tokens(a_pred)
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
      return int(gold_toks == pred_toks)
    if num_same == 0:
      return 0
    precision = 1.0 * num_same / len(pred_toks)
    recall = 1.0 * num_same / len(gold_toks)
    return (2 * precision * recall) / (precision + recall)

  has_ans, exact_raw, f1_raw = {}, {}, {}
  for article in dataset:
    for p in article["paragraphs"]:
      for qa in p["qas"]:
        has_ans[qa["id"]] = bool(qa["answers"])
        golds = [a["text"] for a in qa["answers"]
                 if _official_normalize(a["text"])] or [""]
        pred = preds[qa["id"]]
        exact_raw[qa["id"]] = max(
            int(_official_normalize(a) == _official_normalize(pred))
            for a in golds)
        f1_raw[qa["id"]] = max(compute_f1(a, pred) for a in golds)

  def thresh(scores):
    return {q: float(not has_ans[q]) if na_probs[q] > na_prob_thresh else s
            for q, s in scores.items()}

  def best(scores):
    cur = best_score = sum(1 for k in has_ans if not has_ans[k])
    best_t = 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
      if has_ans[qid]:
        diff = scores[qid]
      else:
        diff = -1 if preds[qid] else 0
      cur += diff
      if cur > best_score:
        best_score, best_t = cur, na_probs[qid]
    return 100.0 * best_score / len(scores), best_t

  exact, f1 = thresh(exact_raw), thresh(f1_raw)
  out = {"exact": 100.0 * sum(exact.values()) / len(exact),
         "f1": 100.0 * sum(f1.values()) / len(f1)}
  out["best_exact"], out["best_exact_thresh"] = best(exact_raw)
  out["best_f1"], out["best_f1_thresh"] = best(f1_raw)
  return out


# ------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def tokenizer():
  return tokenization.load_tokenizer(VOCAB)


@pytest.fixture(scope="module")
def dev_v1():
  return json.loads((DATA / "dev-v1.1.json").read_text())["data"]


@pytest.fixture(scope="module")
def dev_v2():
  return json.loads((DATA / "dev-v2.0.rebuilt.json").read_text())["data"]


def write_split(root, task_name, split, articles):
  path = pathlib.Path(root) / task_name / f"{split}.json"
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps({"version": "test", "data": articles}))
  return path


def slice_articles(articles, paragraphs):
  """The first `paragraphs` paragraphs of the first article."""
  first = copy.deepcopy(articles[0])
  first["paragraphs"] = first["paragraphs"][:paragraphs]
  return [first]


def make_task(cls, tokenizer, root, **overrides):
  values = dict(raw_data_dir=str(root), max_seq_length=64, doc_stride=16,
                max_query_length=24, beam_size=3, n_best_size=5)
  values.update(overrides)
  return cls(FinetuningConfig(**values), tokenizer)


def golds_of(articles):
  return {qa["id"]: [a["text"] for a in qa["answers"]]
          for art in articles for p in art["paragraphs"] for qa in p["qas"]}


# ------------------------------------------------------------ squad_eval

def test_normalize_answer():
  norm = squad_eval.normalize_answer
  assert norm("The  Denver\tBroncos!") == "denver broncos"
  assert norm("an apple, a pear and THE plum.") == "apple pear and plum"
  # Articles only as whole words; punctuation goes before article removal.
  assert norm("theatre anthem") == "theatre anthem"
  assert norm("the-end") == "theend"
  assert norm("  ") == ""


def test_f1_partial_overlap_by_hand():
  # pred {quick, brown, fox}, gold {quick, fox, jumps}: 2 shared tokens,
  # precision 2/3, recall 2/3, F1 2/3.
  assert squad_eval.f1_score("the quick brown fox", "quick fox jumps") == (
      pytest.approx(2 / 3))
  # pred {fox}, gold {quick, fox}: P 1, R 1/2 -> F1 2/3.
  assert squad_eval.f1_score("Fox.", "a quick fox") == pytest.approx(2 / 3)
  # Repeated tokens count with multiplicity: pred {new, new, york}, gold
  # {new, york}: shared 2, P 2/3, R 1 -> 0.8.
  assert squad_eval.f1_score("new new york", "New York") == pytest.approx(0.8)
  assert squad_eval.exact_match("Denver Broncos.", "the denver broncos") == 1
  assert squad_eval.exact_match("Denver", "Denver Broncos") == 0


def test_max_over_gold_answers():
  golds = {"q": ["Santa Clara, California", "Levi's Stadium"]}
  res = squad_eval.evaluate_v1(golds, {"q": "Levi's stadium"})
  assert res["exact_match"] == 100.0 and res["f1"] == 100.0
  # "Santa Clara": 0.8 against the first answer (P 1, R 2/3), 0 else.
  res = squad_eval.evaluate_v1(golds, {"q": "Santa Clara"})
  assert res["exact_match"] == 0.0
  assert res["f1"] == pytest.approx(80.0)


def test_unanswerable_questions():
  golds = {"no": [], "yes": ["Denver Broncos"]}
  res = squad_eval.evaluate_v2(golds, {"no": "", "yes": "Denver Broncos"})
  assert res["exact"] == 100.0 and res["f1"] == 100.0
  assert res["NoAns_total"] == 1 and res["HasAns_total"] == 1
  res = squad_eval.evaluate_v2(golds, {"no": "Denver", "yes": ""})
  assert res["exact"] == 0.0 and res["f1"] == 0.0
  assert res["NoAns_f1"] == 0.0 and res["HasAns_f1"] == 0.0
  # v2.0 scores two empty answers 1; v1.1 shares no token and scores 0.
  assert squad_eval.f1_score("", "") == 1.0
  assert squad_eval.f1_score("", "", empty_matches=False) == 0.0
  # A gold answer that normalises to nothing counts as no answer in v2.0.
  assert squad_eval.v2_gold_answers(["the", "."]) == [""]


def test_threshold_search_hand_made():
  # q1 answerable, right, na .1; q2 answerable, wrong, na .7;
  # q3 / q4 unanswerable but answered, na .9 / .3. All-null scores 2 of 4;
  # passing q1 gives 3, then q4 (-1), q2 (+0), q3 (-1): best 75% at 0.1.
  golds = {"q1": ["Paris"], "q2": ["Rome"], "q3": [], "q4": []}
  preds = {"q1": "Paris", "q2": "Milan", "q3": "x", "q4": "y"}
  na = {"q1": 0.1, "q2": 0.7, "q3": 0.9, "q4": 0.3}
  res = squad_eval.evaluate_v2(golds, preds, na, na_prob_thresh=0.5)
  assert res["best_exact"] == 75.0 and res["best_exact_thresh"] == 0.1
  assert res["best_f1"] == 75.0 and res["best_f1_thresh"] == 0.1
  # At 0.5 q1 and q4 are answered: 1 + 0 + 1 + 0 -> 50%.
  assert res["exact"] == 50.0
  # The best threshold reproduces the best score.
  at_best = squad_eval.evaluate_v2(golds, preds, na, na_prob_thresh=0.1)
  assert at_best["exact"] == res["best_exact"]
  # When answering nothing is best the threshold stays at 0.0 (as the
  # official script); here every answer is wrong.
  wrong = dict(preds, q1="Lyon")
  res = squad_eval.evaluate_v2(golds, wrong, na)
  assert res["best_exact"] == 50.0 and res["best_exact_thresh"] == 0.0


def test_matches_official_v1_on_dev_slice(dev_v1):
  articles = slice_articles(dev_v1, 2)
  golds = golds_of(articles)
  gold_preds = {q: answers[0] for q, answers in golds.items()}
  assert _official_v1_evaluate(articles, gold_preds) == {
      "exact_match": 100.0, "f1": 100.0}
  ours = squad_eval.evaluate_v1(golds, gold_preds)
  assert ours["exact_match"] == 100.0 and ours["f1"] == 100.0

  preds = dict(gold_preds)
  preds["56be4db0acb8001400a502ec"] = "The Denver Broncos!"  # EM 1, F1 1
  preds["56be4db0acb8001400a502ed"] = "Panthers"  # vs Carolina Panthers: 2/3
  preds["56be4db0acb8001400a502ee"] = "Santa Clara"  # best gold: 0.8
  del preds["56be4db0acb8001400a502ef"]  # missing: 0
  preds["56be4db0acb8001400a502f0"] = "golden"  # vs gold: 0
  n = len(golds)
  expected = {"exact_match": 100.0 * (n - 4) / n,
              "f1": 100.0 * (n - 4 + 2 / 3 + 0.8) / n}
  official = _official_v1_evaluate(articles, preds)
  ours = squad_eval.evaluate_v1(golds, preds)
  for key, value in expected.items():
    assert official[key] == pytest.approx(value)
    assert ours[key] == pytest.approx(value)


def test_matches_official_v2_on_dev_slice(dev_v2):
  articles = [dev_v2[0], dev_v2[1]]
  golds = golds_of(articles)
  rng = random.Random(0)
  preds, na = {}, {}
  for qid, answers in golds.items():
    choice = rng.random()
    preds[qid] = (answers[0] if answers and choice < 0.5 else
                  "" if choice < 0.7 else "the wrong answer")
    na[qid] = round(rng.uniform(-5, 5), 1)
  assert sum(not a for a in golds.values()) > 10
  official = _official_v2_evaluate(articles, preds, na, -1.0)
  ours = squad_eval.evaluate_v2(golds, preds, na, -1.0)
  for key, value in official.items():
    assert ours[key] == pytest.approx(value), key


# -------------------------------------------------------- examples, features

def test_examples_and_errors(tmp_path, tokenizer, dev_v1, dev_v2):
  write_split(tmp_path, "squadv1", "dev", slice_articles(dev_v1, 2))
  task = make_task(SQuADv1, tokenizer, tmp_path)
  examples = task.get_examples("dev")
  assert len(examples) == len(golds_of(slice_articles(dev_v1, 2)))
  ex = examples[0]
  assert ex.qid == "56be4db0acb8001400a502ec"
  assert ex.doc_tokens[ex.start_word:ex.end_word + 1] == ["Denver",
                                                          "Broncos"]
  assert ex.answers == ["Denver Broncos"] * 3
  # Questions of one paragraph share its words.
  assert examples[1].doc_tokens is ex.doc_tokens
  limited = make_task(SQuADv1, tokenizer, tmp_path, eval_examples_limit=7)
  assert len(limited.get_examples("dev")) == 7

  write_split(tmp_path, "squad", "train", [dev_v2[0]])
  v2 = make_task(SQuAD, tokenizer, tmp_path).get_examples("train")
  impossible = [e for e in v2 if e.is_impossible]
  assert impossible and all(e.start_word == -1 and not e.answers
                            for e in impossible)

  with pytest.raises(UserError, match=r"squadv1: .*squadv1/train.json not "
                     r"found \(SQuAD files go in the data folder's "
                     r"squadv1/"):
    task.get_examples("train")
  bad = tmp_path / "squadv1" / "test.json"
  bad.write_text('{"data": [')
  with pytest.raises(UserError, match="test.json is not valid JSON"):
    task.get_examples("test")
  bad.write_text('[1, 2]')
  with pytest.raises(UserError, match="not in the SQuAD layout"):
    task.get_examples("test")
  bad.write_text('{"data": [{"paragraphs": [{"qas": []}]}]}')
  with pytest.raises(UserError, match='"context"'):
    task.get_examples("test")


def test_split_context_char_map():
  words, spans, char_to_word = split_context(" Steve  Smith's\ncar")
  assert words == ["Steve", "Smith's", "car"]
  assert spans == [[1, 6], [8, 15], [16, 19]]
  assert char_to_word[8] == 1 and char_to_word[0] == -1


def test_max_context_one_window_per_token():
  spans = [(0, 5), (2, 5), (4, 3)]
  best = max_context_span(spans, 7)
  # Score min(left, right) + 0.01 x length. Token 2: 2.05 in window 0
  # (0.05 in 1); token 3: 1.05 in windows 0 and 1, the first wins; token 4:
  # 2.05 in window 1; token 6: 0.05 in window 1 beats 0.03 in window 2.
  assert best.tolist() == [0, 0, 0, 0, 1, 1, 1]


def test_featurize_real_example(tmp_path, tokenizer, dev_v1):
  write_split(tmp_path, "squadv1", "dev", slice_articles(dev_v1, 1))
  task = make_task(SQuADv1, tokenizer, tmp_path)
  examples = task.get_examples("dev")[:3]
  f = task.featurize(examples, is_training=True)
  sp = tokenizer.special_ids
  rows = np.nonzero(f["example_index"] == 0)[0]
  assert len(rows) >= 4  # a 124-word context in 64-token windows
  question = tokenizer.tokenize_batch([examples[0].question])[0]
  covered = collections.Counter()
  answer_rows = 0
  for r in rows:
    ids, seg = f["input_ids"][r], f["segment_ids"][r]
    n = int(f["input_mask"][r].sum())
    off = len(question) + 2
    assert ids[0] == sp["cls"] and ids[off - 1] == sp["sep"]
    assert ids[1:off - 1].tolist() == question
    assert ids[n - 1] == sp["sep"] and np.all(ids[n:] == sp["pad"])
    assert np.all(seg[:off] == 0) and np.all(seg[off:n] == 1)
    assert np.all(seg[n:] == 0)
    # [CLS], the context and its [SEP]: the original's
    # input_mask * segment_ids + one_hot(0).
    assert f["answer_mask"][r].tolist() == (
        [1] + [0] * (off - 1) + [1] * (n - off) + [0] * (64 - n))
    assert np.all(f["_token_to_orig_map"][r][off:n - 1] >= 0)
    assert np.all(f["_token_to_orig_map"][r][n - 1:] == -1)
    for pos in np.nonzero(f["_token_is_max_context"][r])[0]:
      covered[int(f["_span_start"][r]) + pos - off] += 1
    s, e = f["start_positions"][r], f["end_positions"][r]
    if s:
      answer_rows += 1
      pieces = [tokenizer.vocab[i] for i in ids[s:e + 1]]
      assert pieces == ["denver", "broncos"]
      words = f["_token_to_orig_map"][r][[s, e]]
      assert examples[0].doc_tokens[words[0]:words[1] + 1] == [
          "Denver", "Broncos"]
      chars = (f["_token_char_start"][r][s], f["_token_char_end"][r][e])
      assert examples[0].context[chars[0]:chars[1]] == "Denver Broncos"
    else:
      assert e == 0
  assert answer_rows >= 2  # the stride makes windows overlap
  # Each context sub-token is the max-context token of exactly one window.
  num_pieces = max(covered) + 1
  assert sorted(covered) == list(range(num_pieces))
  assert set(covered.values()) == {1}
  # A long question is cut to max_query_length.
  short = make_task(SQuADv1, tokenizer, tmp_path, max_query_length=4)
  f = short.featurize(examples[:1], is_training=False)
  assert f["input_ids"][0][5] == sp["sep"]
  assert f["input_ids"][0][1:5].tolist() == question[:4]


def test_featurize_subword_answer_text(tmp_path, tokenizer):
  context = "The leader was John Smith (1895-1943). Steve Smith's car."
  articles = [{"title": "t", "paragraphs": [{"context": context, "qas": [
      {"id": "a", "question": "Born?", "answers": [
          {"text": "1895", "answer_start": context.index("1895")}]},
      {"id": "b", "question": "Who?", "answers": [
          {"text": "Steve Smith", "answer_start": context.index("Steve")}]},
  ]}]}]
  write_split(tmp_path, "squadv1", "train", articles)
  task = make_task(SQuADv1, tokenizer, tmp_path)
  examples = task.get_examples("train")
  f = task.featurize(examples, is_training=True)
  for r, text in ((0, "1895"), (1, "Steve Smith")):
    s, e = f["start_positions"][r], f["end_positions"][r]
    chars = f["_token_char_start"][r][s], f["_token_char_end"][r][e]
    assert context[chars[0]:chars[1]] == text


# ------------------------------------------------------- head, loss, scorer

def tiny_config(tokenizer):
  return get_model_config("tiny", tokenizer.vocab_size, dict(
      hidden_size=16, num_attention_heads=2, intermediate_size=32,
      embedding_size=16, hidden_dropout_prob=0.0))


def set_dense(layer, kernel, bias=None):
  layer.kernel.assign(np.asarray(kernel, np.float32))
  layer.bias.assign(np.zeros(layer.bias.shape, np.float32) if bias is None
                    else np.asarray(bias, np.float32))


def force_head(head, hidden_size):
  """Start logit = feature 0; end logit follows feature 1 of the end token
  (through the activation, and xlnet's LayerNorm) and ignores the
  start."""
  e0 = np.zeros((hidden_size, 1))
  e0[0] = 1
  set_dense(head.start_dense, e0)
  kernel = np.zeros((2 * hidden_size, head.width))
  # The token's half: the second for the release's head, the first for
  # XLNet's.
  token = slice(hidden_size, None) if head.style == "electra" else slice(
      0, hidden_size)
  kernel[token, :hidden_size] = np.eye(hidden_size)
  set_dense(head.end_hidden, kernel)
  e1 = np.zeros((head.width, 1))
  e1[1] = 5
  set_dense(head.end_dense, e1)


def answer_row(features):
  """The row with the gold span where its start has most context."""
  for r in range(len(features["example_index"])):
    s = features["start_positions"][r]
    if s and features["_token_is_max_context"][r][s]:
      return r
  raise AssertionError("no row holds the answer")


def crafted_hidden(features, hidden_size, row):
  """Zeros, except a clear start / end signal on one row's gold span."""
  n, t = features["input_ids"].shape
  hidden = np.zeros((n, t, hidden_size), np.float32)
  hidden[row, features["start_positions"][row], 0] = 10.0
  hidden[row, features["end_positions"][row], 1] = 10.0
  return hidden


def feed(features):
  return {k: v for k, v in features.items() if not k.startswith("_")}


def run_head(task, tokenizer, features, hidden, training, answerable=None):
  head = task.build_head(tiny_config(tokenizer))
  head(hidden[:1], features["answer_mask"][:1])  # builds the weights
  force_head(head, hidden.shape[-1])
  if answerable is not None:
    set_dense(head.answer_dense, np.zeros((head.answer_dense.kernel.shape[0],
                                           1)), [answerable])
  loss, outputs = task.loss_and_outputs(head, hidden, feed(features),
                                        training)
  return np.asarray(loss), {k: np.asarray(v) for k, v in outputs.items()}


def test_the_release_head_computes_what_the_original_does(tokenizer,
                                                          tmp_path):
  """tests/reference/squad_head.npz: the release's own QA head (its
  defaults: joint prediction, the answerability classifier on 1.1) on
  fixed hidden states and weights. Ours (qa_head electra) with the same
  weights: the per-row training loss (answerability included, labels both
  ways, one gold span outside the window) and the beam within 1e-5."""
  ref = np.load(pathlib.Path(__file__).parent / "reference" /
                "squad_head.npz")
  hidden = ref["hidden"]
  n, t, h = hidden.shape
  k = int(ref["beam_size"])
  task = make_task(SQuADv1, tokenizer, tmp_path, beam_size=k,
                   answerable_weight=float(ref["answerable_weight"]))
  assert task.config.qa_head == "electra"  # the default
  head = task.build_head(get_model_config("tiny", tokenizer.vocab_size, dict(
      hidden_size=h, num_attention_heads=1, intermediate_size=16,
      embedding_size=h, hidden_dropout_prob=0.0)))
  answer_mask = ref["input_mask"] * ref["segment_ids"]
  answer_mask[:, 0] = 1  # [CLS]: the null answer (its answer_mask)
  head(hidden[:1], answer_mask[:1])
  for layer, name in ((head.start_dense, "dense"),
                      (head.end_hidden, "qa_hidden"),
                      (head.end_dense, "dense_1"),
                      (head.answer_hidden, "dense_2"),
                      (head.answer_dense, "dense_3")):
    set_dense(layer, ref[f"weight:{name}/kernel"], ref[f"weight:{name}/bias"])
  features = {"answer_mask": answer_mask, "example_index": np.arange(n),
              "start_positions": ref["start_positions"],
              "end_positions": ref["end_positions"],
              "is_impossible": ref["is_impossible"].astype(np.float32)}
  loss, _ = task.loss_and_outputs(head, hidden, features, training=True)
  np.testing.assert_allclose(np.asarray(loss), ref["loss"], atol=1e-5)
  res = {key: np.asarray(v) for key, v in head(
      hidden, answer_mask, start_positions=ref["start_positions"],
      training=False).items()}
  for key in ("start_top_log_probs", "end_top_log_probs",
              "answerable_logit"):
    np.testing.assert_allclose(res[key], ref[f"infer:{key}"], atol=1e-5,
                               err_msg=key)
  for key in ("start_top_index", "end_top_index"):
    np.testing.assert_array_equal(res[key], ref[f"infer:{key}"])
  assert res["start_top_index"].shape == (n, k)


def test_head_shapes_and_random_hidden(tmp_path, tokenizer, dev_v2):
  write_split(tmp_path, "squad", "dev", [dev_v2[0]])
  task = make_task(SQuAD, tokenizer, tmp_path)
  f = task.featurize(task.get_examples("dev")[:4], is_training=False)
  n, t = f["input_ids"].shape
  hidden = np.random.default_rng(0).normal(size=(n, t, 16)).astype("float32")
  head = task.build_head(tiny_config(tokenizer))
  loss, out = task.loss_and_outputs(head, hidden, feed(f), training=False)
  assert np.asarray(loss).shape == (n,)
  assert np.all(np.isfinite(np.asarray(loss)))
  out = {k: np.asarray(v) for k, v in out.items()}
  assert out["start_top_index"].shape == (n, 3)
  assert out["start_top_log_probs"].shape == (n, 3)
  assert out["end_top_index"].shape == (n, 3, 3)
  assert out["end_top_log_probs"].shape == (n, 3, 3)
  assert out["answerable_logit"].shape == (n,)
  assert np.all(np.diff(out["start_top_log_probs"], axis=1) <= 0)
  # Every beam position lies where a span may start or end.
  for r in range(n):
    assert np.all(f["answer_mask"][r][out["start_top_index"][r]] == 1)
    assert np.all(f["answer_mask"][r][out["end_top_index"][r]] == 1)
  train_loss, train_out = task.loss_and_outputs(head, hidden, feed(f), True)
  assert np.asarray(train_loss).shape == (n,) and train_out == {}


def test_forced_logits_predict_the_gold_span(tmp_path, tokenizer, dev_v1):
  write_split(tmp_path, "squadv1", "dev", slice_articles(dev_v1, 1))
  task = make_task(SQuADv1, tokenizer, tmp_path)
  examples = task.get_examples("dev")[:1]
  f = task.featurize(examples, is_training=False)
  row = answer_row(f)
  hidden = crafted_hidden(f, 16, row)
  # The release's head trains its answerability logit on 1.1 too: made
  # near-certain "answerable" here, so the loss is the span's.
  loss, out = run_head(task, tokenizer, f, hidden, training=False,
                       answerable=-20.0)
  assert "answerable_logit" not in out  # 1.1 predicts without it
  s, e = f["start_positions"][row], f["end_positions"][row]
  assert out["start_top_index"][row, 0] == s
  assert out["end_top_index"][row, 0, 0] == e
  assert loss[row] < 0.01  # the gold span is near-certain
  scorer = task.get_scorer(examples, f)
  scorer.update(out)
  assert scorer.predictions()[examples[0].qid]["text"] == "Denver Broncos"
  assert scorer.get_results() == {"exact_match": 100.0, "f1": 100.0,
                                  "total": 1.0}


def test_scorer_filters_invalid_spans(tmp_path, tokenizer, dev_v1):
  write_split(tmp_path, "squadv1", "dev", slice_articles(dev_v1, 1))
  task = make_task(SQuADv1, tokenizer, tmp_path, max_answer_length=5)
  examples = task.get_examples("dev")[:2]
  f = task.featurize(examples, is_training=False)
  n = len(f["example_index"])
  # Every row: starts at [CLS], then a question token, then the row's gold
  # span (or, less likely, its first context token); the invalid spans
  # score best.
  start = np.zeros((n, 3), np.int32)
  end = np.zeros((n, 3, 3), np.int32)
  start_lp = np.log(np.tile([0.4, 0.4, 0.2], (n, 1)))
  end_lp = np.log(np.tile([[0.5, 0.3, 0.2]], (n, 3, 1)))
  for r in range(n):
    off = int(np.argmax(f["segment_ids"][r]))
    s = f["start_positions"][r] or off
    e = f["end_positions"][r] or off
    assert s + 5 < 64
    start[r] = [0, 1, s]
    end[r] = [[0, 1, 2], [1, 2, 3], [s - 1, s + 5, e]]  # before s, too long
    if not f["start_positions"][r]:
      start_lp[r, 2] = np.log(0.1)
  outputs = dict(start_top_index=start, start_top_log_probs=start_lp,
                 end_top_index=end, end_top_log_probs=end_lp,
                 example_index=f["example_index"])
  scorer = task.get_scorer(examples, f)
  for a in range(0, n, 2):  # batches, rows in order
    scorer.update({k: v[a:a + 2] for k, v in outputs.items()})
  preds = scorer.predictions()
  assert preds[examples[0].qid]["text"] == "Denver Broncos"
  assert preds[examples[1].qid]["text"] == "Carolina Panthers"
  nbest = preds[examples[0].qid]["nbest"]
  assert nbest[0]["score"] == pytest.approx(2 * np.log(0.2))
  assert sum(x["probability"] for x in nbest) == pytest.approx(1.0)
  # Rows out of order are refused.
  shuffled = task.get_scorer(examples, f)
  shuffled.update(dict(outputs, example_index=f["example_index"][::-1]))
  with pytest.raises(ValueError, match="in order"):
    shuffled.get_results()


@pytest.mark.parametrize("logit,expected", [(-5.0, "Denver Broncos"),
                                            (5.0, "")])
def test_v2_null_threshold(tmp_path, tokenizer, dev_v1, logit, expected):
  write_split(tmp_path, "squad", "dev", slice_articles(dev_v1, 1))
  task = make_task(SQuAD, tokenizer, tmp_path)
  examples = task.get_examples("dev")[:1]
  f = task.featurize(examples, is_training=False)
  hidden = crafted_hidden(f, 16, answer_row(f))
  _, out = run_head(task, tokenizer, f, hidden, False, answerable=logit)
  assert np.allclose(out["answerable_logit"], logit)
  scorer = task.get_scorer(examples, f)
  scorer.update(out)
  pred = scorer.predictions()[examples[0].qid]
  assert pred["text"] == expected and pred["best_text"] == "Denver Broncos"
  assert pred["null"] == pytest.approx(logit)
  results = scorer.get_results()
  assert results["exact_match"] == (100.0 if expected else 0.0)
  # As the official script on the written file: a "" written there stays
  # wrong at every threshold.
  assert results["best_f1"] == (100.0 if expected else 0.0)
  assert task.metric == "f1"


def test_v2_losses_and_no_classifier_null(tmp_path, tokenizer, dev_v2):
  write_split(tmp_path, "squad", "train", [dev_v2[0]])
  task = make_task(SQuAD, tokenizer, tmp_path)
  examples = task.get_examples("train")
  examples = [e for e in examples if e.is_impossible][:1] + [
      e for e in examples if not e.is_impossible][:1]
  f = task.featurize(examples, is_training=True)
  assert f["is_impossible"][f["example_index"] == 0].tolist() == [1.0] * (
      int(np.sum(f["example_index"] == 0)))
  assert not f["start_positions"][f["example_index"] == 0].any()
  hidden = np.zeros(f["input_ids"].shape + (16,), np.float32)
  # Zero states: uniform start and end over the answer mask, logit 0.
  loss, _ = run_head(task, tokenizer, f, hidden, True, answerable=0.0)
  uniform = np.log(f["answer_mask"].sum(axis=1))
  assert np.allclose(loss, uniform + 0.5 * np.log(2.0), atol=1e-4)
  plain = make_task(SQuAD, tokenizer, tmp_path, answerable_classifier=False)
  loss, out = run_head(plain, tokenizer, f, hidden, False)
  assert np.allclose(loss, uniform, atol=1e-4)
  assert "answerable_logit" not in out
  assert np.allclose(out["cls_log_prob"], -2 * uniform, atol=1e-4)
  scorer = plain.get_scorer(examples, f)
  scorer.update(out)
  for pred in scorer.predictions().values():
    # Null and best span tie under uniform scores: diff 0 > -2.75.
    assert pred["null"] == pytest.approx(0.0, abs=1e-4)
    assert pred["text"] == ""


def test_linear_head_is_berts_independent_start_and_end(tmp_path,
                                                        tokenizer, dev_v2):
  """qa_head linear: loss (CE(start) + CE(end)) / 2 over the answer mask,
  the same top ends for every start, and the [CLS] null, against NumPy."""
  write_split(tmp_path, "squad", "train", [dev_v2[0]])
  task = make_task(SQuAD, tokenizer, tmp_path, qa_head="linear",
                   answerable_classifier=False)
  assert task.head_kind == "squad_linear"
  f = task.featurize(task.get_examples("train")[:3], is_training=True)
  n, t = f["input_ids"].shape
  rng = np.random.default_rng(1)
  hidden = rng.normal(size=(n, t, 16)).astype("float32")
  head = task.build_head(tiny_config(tokenizer))
  head(hidden[:1], f["answer_mask"][:1])
  assert not hasattr(head, "end_hidden")
  ws, we = rng.normal(size=(2, 16, 1))
  set_dense(head.start_dense, ws, [0.3])
  set_dense(head.end_dense, we, [-0.2])

  def log_softmax(x):
    x = np.where(f["answer_mask"] > 0, x, -1e9)
    return x - np.log(np.exp(x - x.max(1, keepdims=True)).sum(
        1, keepdims=True)) - x.max(1, keepdims=True)
  start = log_softmax(hidden @ ws[:, 0] + 0.3)
  end = log_softmax(hidden @ we[:, 0] - 0.2)
  rows = np.arange(n)
  want = -(start[rows, f["start_positions"]] +
           end[rows, f["end_positions"]]) / 2
  loss, _ = task.loss_and_outputs(head, hidden, feed(f), training=True)
  np.testing.assert_allclose(np.asarray(loss), want, rtol=1e-5, atol=1e-5)
  _, out = task.loss_and_outputs(head, hidden, feed(f), training=False)
  out = {k: np.asarray(v) for k, v in out.items()}
  np.testing.assert_array_equal(out["end_top_index"],
                                np.broadcast_to(np.argsort(-end, 1)[:, None,
                                                                    :3],
                                                (n, 3, 3)))
  np.testing.assert_allclose(out["cls_log_prob"], start[:, 0] + end[:, 0],
                             rtol=1e-5, atol=1e-5)


def _spans_outputs(features, nulls):
  """Head outputs with one candidate span per row: the gold span where the
  row holds it (score 0), else the row's first context token (score -10);
  the answerability logit of each row is its example's null score."""
  n = len(features["example_index"])
  start = np.zeros((n, 1), np.int32)
  end = np.zeros((n, 1, 1), np.int32)
  start_lp = np.full((n, 1), -5.0)
  end_lp = np.full((n, 1, 1), -5.0)
  for r in range(n):
    s, e = features["start_positions"][r], features["end_positions"][r]
    if s and features["_token_is_max_context"][r][s]:
      start[r, 0], end[r, 0, 0] = s, e
      start_lp[r], end_lp[r] = 0.0, 0.0
    else:
      off = int(np.argmax(features["segment_ids"][r]))
      start[r, 0], end[r, 0, 0] = off, off
  logits = np.array([nulls[i] for i in features["example_index"]],
                    np.float32)
  return dict(start_top_index=start, start_top_log_probs=start_lp,
              end_top_index=end, end_top_log_probs=end_lp,
              answerable_logit=logits,
              example_index=features["example_index"])


def test_v2_figures_are_the_official_script_on_the_written_files(
    tmp_path, tokenizer, dev_v2):
  """best_exact / best_f1 as evaluate-v2.0.py computes them from the
  predictions and null odds written, also when the best threshold is above
  qa_na_threshold (where the written text is already "")."""
  articles = slice_articles(dev_v2, 3)
  write_split(tmp_path, "squad", "dev", articles)
  task = make_task(SQuAD, tokenizer, tmp_path)  # qa_na_threshold -2.75
  examples = task.get_examples("dev")
  answerable = [e for e in examples if e.answers][:2]
  unanswerable = [e for e in examples if not e.answers][:1]
  examples = answerable + unanswerable
  f = task.featurize(examples, is_training=False)
  # Right answers to both answerable questions, one above the threshold
  # (written ""); the unanswerable one answered but null above threshold.
  nulls = [0.0, -5.0, 3.0]
  scorer = task.get_scorer(examples, f)
  scorer.update(_spans_outputs(f, nulls))
  preds = scorer.predictions()
  for e in answerable:  # the crafted spans are the gold answers
    assert preds[e.qid]["best_text"] in e.answers
  results = scorer.get_results()
  path = tmp_path / "out" / "squad_dev_predictions_trial1.json"
  scorer.write_predictions(str(path))
  written = json.loads(path.read_text())
  odds = json.loads(path.with_name(path.stem + "_null_odds.json")
                    .read_text())
  assert written[answerable[0].qid] == ""  # null 0.0 > -2.75
  official = _official_v2_evaluate(articles_of(articles, examples), written,
                                   odds, 1.0)  # the script's default
  for key, value in official.items():
    assert results[key.replace("exact", "exact_match") if key == "exact"
                   else key] == pytest.approx(value), key
  assert results["best_f1"] == pytest.approx(200.0 / 3)
  # Searching the spans before the threshold (the old way) claimed 100%.
  before = squad_eval.evaluate_v2(
      golds_of(articles_of(articles, examples)),
      {q: p["best_text"] for q, p in preds.items()},
      {q: p["null"] for q, p in preds.items()}, -2.75)
  assert before["best_f1"] == 100.0 != results["best_f1"]


def articles_of(articles, examples):
  """`articles` with only the questions of `examples`."""
  keep = {e.qid for e in examples}
  out = copy.deepcopy(articles)
  for article in out:
    for p in article["paragraphs"]:
      p["qas"] = [qa for qa in p["qas"] if qa["id"] in keep]
  return out


def test_write_predictions(tmp_path, tokenizer, dev_v1):
  write_split(tmp_path, "squad", "dev", slice_articles(dev_v1, 1))
  task = make_task(SQuAD, tokenizer, tmp_path)
  examples = task.get_examples("dev")[:1]
  f = task.featurize(examples, is_training=False)
  hidden = crafted_hidden(f, 16, answer_row(f))
  _, out = run_head(task, tokenizer, f, hidden, False, answerable=-4.0)
  scorer = task.get_scorer(examples, f)
  scorer.update(out)
  path = tmp_path / "out" / "squad_preds.json"
  scorer.write_predictions(str(path))
  qid = examples[0].qid
  assert json.loads(path.read_text()) == {qid: "Denver Broncos"}
  nbest = json.loads((tmp_path / "out" / "squad_preds_nbest.json")
                     .read_text())
  assert nbest[qid][0]["text"] == "Denver Broncos"
  assert 1 <= len(nbest[qid]) <= 5
  odds = json.loads((tmp_path / "out" / "squad_preds_null_odds.json")
                    .read_text())
  assert odds[qid] == pytest.approx(-4.0)
