"""BLiMP (Warstadt et al., 2020): a pair is right when PLL(good) > PLL(bad)
(a tie counts as wrong). Accuracy per paradigm (file / UID), per phenomenon
(linguistics_term) and overall (over all pairs), for any folder of *.jsonl
files with sentence_good, sentence_bad and, optionally, UID and
linguistics_term (default: the file name and "unknown").
"""

import collections
import dataclasses
import json
import os

import numpy as np

from util import storage
from util import text_files
from util.errors import UserError


@dataclasses.dataclass
class Pair:
  good: str
  bad: str
  paradigm: str
  phenomenon: str


def load_pairs(directory, limit=0):
  """Every pair of every *.jsonl in `directory` (the first `limit` of each
  file when > 0), in file-name order."""
  if not storage.isdir(directory):
    what = "is a file, not a folder" if storage.exists(directory) else (
        "not found")
    raise UserError(f"BLiMP folder {directory} {what}")
  files = sorted(f for f in storage.listdir(directory)
                 if f.endswith(".jsonl"))
  if not files:
    raise UserError(f"no *.jsonl files in {directory}")
  pairs = []
  for name in files:
    pairs += _read_file(os.path.join(directory, name), name[:-6], limit)
  return pairs


def _read_file(path, default_uid, limit):
  pairs = []
  for number, line in enumerate(text_files.read_lines(path), 1):
    if not line.strip():
      continue
    if limit and len(pairs) >= limit:
      break
    where = f"{path}:{number}"
    try:
      row = json.loads(line)
    except json.JSONDecodeError as e:
      raise UserError(f"{where}: not valid JSON ({e.msg})") from None
    except (ValueError, RecursionError) as e:  # huge numbers, deep nesting
      raise UserError(f"{where}: not usable JSON ({str(e)[:80]})") from None
    if not isinstance(row, dict):
      raise UserError(f"{where}: expected a JSON object")
    for key in ("sentence_good", "sentence_bad"):
      if not isinstance(row.get(key), str):
        raise UserError(f"{where}: no string field '{key}'")
    pairs.append(Pair(row["sentence_good"], row["sentence_bad"],
                      str(row.get("UID") or default_uid),
                      str(row.get("linguistics_term") or "unknown")))
  return pairs


def evaluate(pairs, pll_fn):
  """pll_fn(list of sentences) -> PLLs. Every distinct sentence is scored
  once. Returns {"overall", "pairs", "by_paradigm", "by_phenomenon"}; each
  group is {name: {"accuracy", "pairs"}}."""
  if not pairs:
    raise UserError("no BLiMP pairs to evaluate")
  texts = sorted({p.good for p in pairs} | {p.bad for p in pairs})
  scores = dict(zip(texts, np.asarray(pll_fn(texts), np.float64)))
  right = [scores[p.good] > scores[p.bad] for p in pairs]
  return {"overall": float(np.mean(right)), "pairs": len(pairs),
          "by_paradigm": _grouped(pairs, right, "paradigm"),
          "by_phenomenon": _grouped(pairs, right, "phenomenon")}


def _grouped(pairs, right, key):
  groups = collections.defaultdict(list)
  for pair, ok in zip(pairs, right):
    groups[getattr(pair, key)].append(ok)
  return {name: {"accuracy": float(np.mean(oks)), "pairs": len(oks)}
          for name, oks in sorted(groups.items())}


def format_results(results):
  lines = []
  for title, key in (("phenomenon", "by_phenomenon"),
                     ("paradigm", "by_paradigm")):
    width = max(len(n) for n in results[key])
    lines.append(f"{title:<{width}}  accuracy  pairs")
    for name, r in results[key].items():
      lines.append(f"{name:<{width}}  {100 * r['accuracy']:8.2f}  "
                   f"{r['pairs']:5d}")
    lines.append("")
  lines.append(f"overall accuracy {100 * results['overall']:.2f} "
               f"({results['pairs']} pairs)")
  return "\n".join(lines)
