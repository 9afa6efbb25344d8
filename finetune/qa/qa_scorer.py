"""SQuAD postprocessing: n-best spans, null score, EM/F1, prediction files.

Answer text: the context's characters from the start sub-token's first to
the end sub-token's last (offsets from the features; see qa_data).

Null score (2.0, as the ELECTRA release): with the answerability classifier
it is the smallest answerability logit over the example's rows; without it,
min over rows of (log p_start([CLS]) + log p_end([CLS] | [CLS])) minus the
best span's score. The prediction is "" when it exceeds qa_na_threshold.

The figures reported are the official evaluation script's on the files
written (the predictions after the threshold, the null odds as its
no-answer probabilities), as the ELECTRA release computes them:
  evaluate-v2.0.py dev.json P.json --na-prob-file P_null_odds.json \
      --na-prob-thresh QA_NA_THRESHOLD
(the default --na-prob-thresh 1.0 gives the same when qa_na_threshold is
at most 1.0). So best_exact / best_f1 search thresholds up to
qa_na_threshold only (above it the written predictions are already ""); a
large qa_na_threshold searches them all.
"""

import collections
import json
import math
import os

import numpy as np

from finetune import task
from finetune.qa import squad_eval
from util import outputs
from util import storage

# Unanswerable without any row: an infinite null score, written finite so
# the file stays strict JSON.
_MAX_NULL = 1e30


def prediction_files(path, v2):
  """path ({qid: text}), its n-best file and, for 2.0, its null odds."""
  root, ext = os.path.splitext(path)
  ext = ext or ".json"
  return [path, root + "_nbest" + ext] + (
      [root + "_null_odds" + ext] if v2 else [])


def _softmax(scores):
  if not scores:
    return []
  x = np.exp(np.asarray(scores, np.float64) - max(scores))
  return (x / x.sum()).tolist()


class SQuADScorer(task.Scorer):
  """n-best spans per example over all its rows, text, null score, EM/F1."""

  def __init__(self, config, examples, features, v2):
    super().__init__()
    self.config = config
    self.examples = examples
    self.v2 = v2
    self.meta = {k: features[k] for k in (
        "example_index", "_token_to_orig_map", "_token_is_max_context",
        "_token_char_start", "_token_char_end")}
    self._predictions = None

  def update(self, outputs):
    super().update(outputs)
    self._predictions = None

  def _rows(self):
    """Collected outputs, checked against the features' row order."""
    n = len(self.meta["example_index"])
    if not self.outputs:
      raise ValueError("the SQuAD scorer got no outputs")
    out = {k: v[:n] for k, v in self.collected().items()}
    got = out.get("example_index")
    if len(out["start_top_index"]) < n or (
        got is not None and np.any(got != self.meta["example_index"])):
      raise ValueError("SQuAD outputs do not match the feature rows: "
                       "rows must come in order, each exactly once")
    return out

  def _candidates(self, out, r):
    """Valid (score, row, start, end, start_lp, end_lp) spans of row r."""
    c, m = self.config, self.meta
    starts = np.broadcast_to(out["start_top_index"][r][:, None],
                             out["end_top_index"][r].shape)
    ends = out["end_top_index"][r]
    start_lp = np.broadcast_to(out["start_top_log_probs"][r][:, None],
                               ends.shape)
    end_lp = out["end_top_log_probs"][r]
    to_orig = m["_token_to_orig_map"][r]
    valid = ((to_orig[starts] >= 0) & (to_orig[ends] >= 0) &
             m["_token_is_max_context"][r][starts] & (ends >= starts) &
             (ends - starts < c.max_answer_length))
    return [(float(start_lp[i] + end_lp[i]), r, int(starts[i]), int(ends[i]),
             float(start_lp[i]), float(end_lp[i]))
            for i in zip(*np.nonzero(valid))]

  def _nbest(self, example, candidates):
    m, nbest, seen = self.meta, [], set()
    for score, r, s, e, slp, elp in sorted(candidates, key=lambda x: -x[0]):
      if len(nbest) >= self.config.n_best_size:
        break
      text = example.context[m["_token_char_start"][r][s]:
                             m["_token_char_end"][r][e]]
      if text in seen:
        continue
      seen.add(text)
      nbest.append({"text": text, "score": score, "start_log_prob": slp,
                    "end_log_prob": elp})
    for entry, p in zip(nbest, _softmax([x["score"] for x in nbest])):
      entry["probability"] = p
    return nbest

  def _null_score(self, out, rows, nbest):
    """Larger = more likely unanswerable; compared to qa_na_threshold."""
    if "answerable_logit" in out:
      return float(np.min(out["answerable_logit"][rows]))
    if not nbest:
      return math.inf
    return float(np.min(out["cls_log_prob"][rows])) - nbest[0]["score"]

  def predictions(self):
    """{"text": final, "best_text": best span, "null": score, "nbest"}
    per qid, computed once."""
    if self._predictions is not None:
      return self._predictions
    out = self._rows()
    rows_of = collections.defaultdict(list)
    for r, i in enumerate(self.meta["example_index"]):
      rows_of[int(i)].append(r)
    preds = {}
    for i, example in enumerate(self.examples):
      rows = rows_of.get(i, [])
      candidates = [x for r in rows for x in self._candidates(out, r)]
      nbest = self._nbest(example, candidates)
      best = nbest[0]["text"] if nbest else ""
      pred = {"text": best, "best_text": best, "nbest": nbest}
      if self.v2:
        pred["null"] = min(self._null_score(out, rows, nbest) if rows else
                           math.inf, _MAX_NULL)
        if pred["null"] > self.config.qa_na_threshold:
          pred["text"] = ""
      preds[example.qid] = pred
    self._predictions = preds
    return preds

  def get_results(self):
    preds = self.predictions()
    if not self.v2:
      golds = {ex.qid: ex.answers for ex in self.examples if ex.answers}
      res = squad_eval.evaluate_v1(
          golds, {q: p["text"] for q, p in preds.items()})
      return {k: float(v) for k, v in res.items()}
    # On what write_predictions writes (see the module docstring).
    golds = {ex.qid: ex.answers for ex in self.examples}
    res = squad_eval.evaluate_v2(
        golds, {q: p["text"] for q, p in preds.items()},
        {q: p["null"] for q, p in preds.items()},
        self.config.qa_na_threshold)
    res["exact_match"] = res.pop("exact")
    return {k: float(v) for k, v in res.items()}

  def write_predictions(self, path):
    """path: {qid: text}; beside it <name>_nbest.json and, for 2.0,
    <name>_null_odds.json ({qid: null score})."""
    preds = self.predictions()
    values = [{q: p["text"] for q, p in preds.items()},
              {q: p["nbest"] for q, p in preds.items()}]
    if self.v2:
      values.append({q: p["null"] for q, p in preds.items()})
    if os.path.dirname(path):
      storage.makedirs(os.path.dirname(path))
    for name, value in zip(prediction_files(path, self.v2), values):
      outputs.write_text(name, json.dumps(value, indent=2) + "\n")
