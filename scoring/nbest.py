"""N-best rescoring (Salazar et al., 2020; Electric section 3.2): pick
argmax_x acoustic(x) + lambda * PLL(x) per utterance, lambda swept on a dev
list and applied to a test list. Corpus WER (all errors / all reference
words) by jiwer, beside the first-best (acoustic score alone), the oracle
(the fewest errors in each list) and, when the lists carry it, the
system's own LM-rescored choice (score_with_lm).

Input: the mlm-scoring JSON layout {utt_id: {"ref": str, "hyp_1": {"score":
float, "text": str, ...}, "hyp_2": ...}}; hypotheses are taken in hyp_N
order, so ties go to the lower N.
"""

import dataclasses
import json
import re

import numpy as np

from util import text_files
from util.errors import UserError


@dataclasses.dataclass
class NBestList:
  """One n-best file as [U, H] arrays (padded with -inf scores)."""
  name: str
  utt_ids: list
  refs: list
  hyps: list  # per utterance, its hypothesis texts
  scores: np.ndarray  # acoustic
  system: np.ndarray = None  # score_with_lm, when every hypothesis has it
  errors: np.ndarray = None  # word errors of each hypothesis (jiwer)

  @property
  def ref_words(self):
    return sum(len(r.split()) for r in self.refs)

  def texts(self, choice):
    return [h[c] for h, c in zip(self.hyps, choice)]

  def wer(self, choice):
    """Corpus WER of one choice per utterance, from the error counts."""
    rows = np.arange(len(self.hyps))
    return float(self.errors[rows, choice].sum() / max(self.ref_words, 1))


def _jiwer():
  try:
    import jiwer
  except ImportError:
    raise UserError("n-best WER needs jiwer: pip install jiwer") from None
  return jiwer


def load_nbest(path, limit=0):
  """Reads an n-best JSON file (the first `limit` utterances when > 0)."""
  text = text_files.read_text(path)
  try:
    data = json.loads(text)
  except json.JSONDecodeError as e:
    raise UserError(f"{path}: not valid JSON ({e.msg} at line "
                    f"{e.lineno})") from None
  except (ValueError, RecursionError) as e:  # huge numbers, deep nesting
    raise UserError(f"{path}: not usable JSON ({str(e)[:80]})") from None
  if not isinstance(data, dict) or not data:
    raise UserError(f"{path}: expected a non-empty JSON object "
                    "{utt_id: {\"ref\": ..., \"hyp_1\": ...}}")
  items = list(data.items())[:limit or None]
  refs, hyps, scores, system = [], [], [], []
  for utt, entry in items:
    ref, texts, acoustic, with_lm = _read_utterance(path, utt, entry)
    refs.append(ref)
    hyps.append(texts)
    scores.append(acoustic)
    system.append(with_lm)
  width = max(len(h) for h in hyps)
  out = NBestList(path, [u for u, _ in items], refs, hyps,
                  _pad(scores, width))
  if not out.ref_words:
    raise UserError(f"{path}: every reference is empty")
  if all(s is not None for s in system):
    out.system = _pad(system, width)
  out.errors = word_errors(refs, hyps, width)
  return out


def _read_utterance(path, utt, entry):
  where = f"{path}: utterance {utt}"
  if not isinstance(entry, dict) or not isinstance(entry.get("ref"), str):
    raise UserError(f"{where} has no string 'ref'")
  keys = sorted((int(m.group(1)), k) for k in entry
                if (m := re.fullmatch(r"hyp_(\d+)", k)))
  if not keys:
    raise UserError(f"{where} has no hypotheses (hyp_1, hyp_2, ...)")
  texts, acoustic, with_lm = [], [], []
  for _, key in keys:
    hyp = entry[key]
    if (not isinstance(hyp, dict) or not isinstance(hyp.get("text"), str)
        or not _is_number(hyp.get("score"))):
      raise UserError(f"{where}, {key}: needs a string 'text' and a "
                      "numeric 'score'")
    texts.append(hyp["text"])
    acoustic.append(float(hyp["score"]))
    with_lm.append(float(hyp["score_with_lm"])
                   if _is_number(hyp.get("score_with_lm")) else None)
  return (entry["ref"], texts, acoustic,
          None if None in with_lm else with_lm)


def _is_number(x):
  return isinstance(x, (int, float)) and not isinstance(x, bool) and \
      np.isfinite(x)


def _pad(rows, width, fill=-np.inf):
  out = np.full((len(rows), width), fill)
  for i, row in enumerate(rows):
    out[i, :len(row)] = row
  return out


def word_errors(refs, hyps, width):
  """[U, width] substitutions + deletions + insertions of each hypothesis
  against its reference (jiwer's alignment); padding counts as huge."""
  jiwer = _jiwer()
  flat_refs = [r for r, h in zip(refs, hyps) for _ in h]
  flat_hyps = [t for h in hyps for t in h]
  out = jiwer.process_words(flat_refs, flat_hyps)
  counts = [sum((c.ref_end_idx - c.ref_start_idx) if c.type != "insert"
                else (c.hyp_end_idx - c.hyp_start_idx)
                for c in chunks if c.type != "equal")
            for chunks in out.alignments]
  errors = np.full((len(hyps), width), np.iinfo(np.int32).max // 4,
                   np.int64)
  start = 0
  for i, h in enumerate(hyps):
    errors[i, :len(h)] = counts[start:start + len(h)]
    start += len(h)
  return errors


def corpus_wer(refs, hyps):
  """jiwer's corpus-level WER of the chosen hypotheses."""
  return float(_jiwer().wer(list(refs), list(hyps)))


def pll_matrix(nbest, plls):
  """[U, H] PLLs of the hypotheses, from a {text: PLL} dict."""
  return _pad([[plls[t] for t in h] for h in nbest.hyps],
              nbest.scores.shape[1], 0.0)


def sweep(nbest, pll, lambdas):
  """[(lambda, WER)] of acoustic + lambda * PLL, and the best lambda (the
  lowest WER; the smallest such lambda on ties)."""
  curve = [(float(lam), nbest.wer(np.argmax(nbest.scores + lam * pll, 1)))
           for lam in sorted(lambdas)]
  best = min(curve, key=lambda item: item[1])[0]
  return curve, best


def report(nbest, pll, lam):
  """WERs (jiwer, on the chosen texts) of one list at `lam`."""
  choices = {"first_best": np.argmax(nbest.scores, 1),
             "rescored": np.argmax(nbest.scores + lam * pll, 1),
             "oracle": np.argmin(nbest.errors, 1)}
  if nbest.system is not None:
    choices["system_lm"] = np.argmax(nbest.system, 1)
  out = {k: corpus_wer(nbest.refs, nbest.texts(c))
         for k, c in choices.items()}
  out["utterances"] = len(nbest.refs)
  return out


def evaluate(dev, test, pll_fn, lambdas):
  """Tunes lambda on `dev`, applies it to `test` (may be None). pll_fn
  scores the distinct hypothesis texts of both in one call."""
  lists = [x for x in (dev, test) if x is not None]
  texts = sorted({t for x in lists for h in x.hyps for t in h})
  plls = dict(zip(texts, np.asarray(pll_fn(texts), np.float64)))
  dev_pll = pll_matrix(dev, plls)
  curve, best = sweep(dev, dev_pll, lambdas)
  out = {"lambda": best, "sweep": curve,
         "dev": dict(report(dev, dev_pll, best), file=dev.name)}
  if test is not None:
    out["test"] = dict(report(test, pll_matrix(test, plls), best),
                       file=test.name)
  return out


def format_results(results):
  lines = ["lambda  dev WER %"]
  lines += [f"{lam:6.3f}  {100 * wer:8.3f}" for lam, wer in results["sweep"]]
  lines.append(f"best lambda {results['lambda']:g} (tuned on dev)")
  lines.append("")
  columns = ["first_best", "rescored", "oracle"]
  if "system_lm" in results["dev"]:
    columns.append("system_lm")
  lines.append(f"{'set':<5} {'utts':>6}  " +
               "  ".join(f"{c:>10}" for c in columns) + "   (WER %)")
  for split in ("dev", "test"):
    if split in results:
      r = results[split]
      lines.append(f"{split:<5} {r['utterances']:6d}  " + "  ".join(
          f"{100 * r[c]:10.3f}" if c in r else f"{'-':>10}"
          for c in columns))
  return "\n".join(lines)
