"""SQuAD 1.1 / 2.0 exact match and F1, as the official scripts compute them.

Written from the behaviour of the official `evaluate-v1.1.py` and
`evaluate-v2.0.py` (no download). Gold answers are given per question id as
a list of texts, predictions as {qid: text}:
  evaluate_v1(golds, preds)  -> {"exact_match", "f1", "total"}
  evaluate_v2(golds, preds, na_probs, na_prob_thresh)
      -> {"exact", "f1", "total", "HasAns_*", "NoAns_*",
          "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"}
All scores are percentages, as the scripts print them.

The two scripts differ on empty answers: v2.0 drops gold answers that
normalise to nothing (an unanswerable question keeps [""]) and gives F1 1
when prediction and gold are both empty; v1.1 keeps every gold answer and
gives F1 0 when no token is shared, even for two empty answers.
"""

import collections
import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text):
  """Lower case, drop punctuation, then articles, then collapse spaces."""
  text = text.lower()
  text = "".join(ch for ch in text if ch not in _PUNCTUATION)
  text = _ARTICLES.sub(" ", text)
  return " ".join(text.split())


def answer_tokens(text):
  return normalize_answer(text).split() if text else []


def exact_match(prediction, gold):
  return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction, gold, empty_matches=True):
  """Token-level F1 of bags of normalised words.

  empty_matches (v2.0): when either side is empty, 1 if both are, else 0.
  Without it (v1.1) two empty answers share no token and score 0.
  """
  pred_toks, gold_toks = answer_tokens(prediction), answer_tokens(gold)
  if empty_matches and (not pred_toks or not gold_toks):
    return float(pred_toks == gold_toks)
  common = collections.Counter(pred_toks) & collections.Counter(gold_toks)
  num_same = sum(common.values())
  if num_same == 0:
    return 0.0
  precision = num_same / len(pred_toks)
  recall = num_same / len(gold_toks)
  return 2 * precision * recall / (precision + recall)


def evaluate_v1(golds, predictions):
  """The v1.1 script: max over gold answers; a missing prediction scores 0."""
  em = f1 = 0.0
  for qid, answers in golds.items():
    if qid not in predictions:
      continue
    pred = predictions[qid]
    em += max(exact_match(pred, a) for a in answers)
    f1 += max(f1_score(pred, a, empty_matches=False) for a in answers)
  total = len(golds)
  if not total:
    return {"exact_match": 0.0, "f1": 0.0, "total": 0}
  return {"exact_match": 100.0 * em / total, "f1": 100.0 * f1 / total,
          "total": total}


def v2_gold_answers(answers):
  """Gold answers as v2.0 scores them: [""] for an unanswerable question."""
  kept = [a for a in answers if normalize_answer(a)]
  return kept or [""]


def raw_scores_v2(golds, predictions):
  """Per-question EM and F1 before any no-answer threshold.

  As the official script, questions without a prediction are left out.
  """
  exact, f1 = {}, {}
  for qid, answers in golds.items():
    if qid not in predictions:
      continue
    pred = predictions[qid]
    answers = v2_gold_answers(answers)
    exact[qid] = max(exact_match(pred, a) for a in answers)
    f1[qid] = max(f1_score(pred, a) for a in answers)
  return exact, f1


def apply_no_answer_threshold(scores, na_probs, has_answer, thresh):
  """A question whose no-answer score exceeds `thresh` is predicted ""."""
  return {qid: float(not has_answer[qid]) if na_probs[qid] > thresh else s
          for qid, s in scores.items()}


def _summary(exact, f1, qids):
  total = len(qids)
  return {"exact": 100.0 * sum(exact[q] for q in qids) / total,
          "f1": 100.0 * sum(f1[q] for q in qids) / total, "total": total}


def find_best_threshold(predictions, scores, na_probs, has_answer):
  """The v2.0 script's search: start with every question answered "" and
  lower the threshold past one question at a time, by no-answer score.

  Returns (best score in %, threshold); the threshold stays 0.0 when
  answering nothing is best, exactly as the script does.
  """
  cur = best = sum(1 for q in has_answer if not has_answer[q])
  best_thresh = 0.0
  for qid in sorted(na_probs, key=lambda q: na_probs[q]):
    if qid not in scores:
      continue
    if has_answer[qid]:
      cur += scores[qid]
    elif predictions[qid]:
      cur -= 1
    if cur > best:
      best, best_thresh = cur, na_probs[qid]
  return 100.0 * best / len(scores), best_thresh


def evaluate_v2(golds, predictions, na_probs=None, na_prob_thresh=1.0):
  """The v2.0 script's figures; `na_probs` maps qid to a no-answer score
  (a probability there; any score where larger means "no answer")."""
  has_answer = {qid: bool(answers) for qid, answers in golds.items()}
  exact_raw, f1_raw = raw_scores_v2(golds, predictions)
  given_na = na_probs is not None
  if not given_na:
    na_probs = {qid: 0.0 for qid in predictions}
  exact = apply_no_answer_threshold(exact_raw, na_probs, has_answer,
                                    na_prob_thresh)
  f1 = apply_no_answer_threshold(f1_raw, na_probs, has_answer,
                                 na_prob_thresh)
  if not exact:
    return {"exact": 0.0, "f1": 0.0, "total": 0}
  out = _summary(exact, f1, list(exact))
  for prefix, wanted in (("HasAns", True), ("NoAns", False)):
    # The script fails on a missing prediction here; we skip it instead.
    qids = [q for q, has in has_answer.items()
            if has == wanted and q in exact]
    if qids:
      for key, value in _summary(exact, f1, qids).items():
        out[f"{prefix}_{key}"] = value
  if given_na:
    out["best_exact"], out["best_exact_thresh"] = find_best_threshold(
        predictions, exact_raw, na_probs, has_answer)
    out["best_f1"], out["best_f1_thresh"] = find_best_threshold(
        predictions, f1_raw, na_probs, has_answer)
  return out
