"""The figures results/original_parity/README.md states beyond results.md
(issue 63), from the same records: where a side's seed range leaves the
original's, each fine-tuning difference's 95% Welch interval, the two
evaluators' offset on identical weights and two one-sided tests (TOST) at
stated margins. Prints one `name: figure` line each; the test checks that
the README says each figure.

    python benchmarks/original_parity/claims.py [RECORDS]
"""

import json
import os
import sys

import numpy as np
from scipy import stats

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import collect_parity  # noqa: E402  (beside this file, not a package)

RECORDS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "results", "original_parity")
STEP = 4000
# Equivalence margins, in each metric's own unit (TOST below).
MARGINS = {"disc_loss": 0.001, "disc_auc": 0.01, "masked_lm_loss": 0.05}


def outside(ours, original):
  """How far `ours`' range lies outside `original`'s (signed; 0 if they
  share a value)."""
  if max(ours) < min(original):
    return max(ours) - min(original)
  if min(ours) > max(original):
    return min(ours) - max(original)
  return 0.0


def tost_p(a, b, margin):
  """Welch TOST of |mean(a) - mean(b)| < margin: the larger one-sided p."""
  a, b = np.asarray(a, float), np.asarray(b, float)
  low = stats.ttest_ind(a + margin, b, equal_var=False, alternative="greater")
  high = stats.ttest_ind(a - margin, b, equal_var=False, alternative="less")
  return max(low.pvalue, high.pvalue)


def holm(pvalues):
  """Holm's step-down adjustment of one family of p-values ({name: p}):
  the k-th smallest times (m - k + 1), kept monotone, capped at 1."""
  order = sorted(pvalues, key=pvalues.get)
  adjusted, running = {}, 0.0
  for k, name in enumerate(order):
    running = max(running, min(1.0, (len(order) - k) * pvalues[name]))
    adjusted[name] = running
  return adjusted


def _seeds(runs, side, step, key):
  return [collect_parity.value(side, run["eval"][step], (key, "", key))
          for _, run in sorted(runs[side].items())]


def _mlm_loss(path):
  with open(path) as f:
    return json.load(f)["masked_lm_loss"]


def figures(records=RECORDS):
  """{name: formatted figure}."""
  runs = collect_parity.read_pretraining(records)
  out = {}
  for side in ("ours", "ours_origdense"):
    for key in ("disc_auc", "disc_loss"):
      for step in sorted(runs["original"][1]["eval"]):
        gap = outside(_seeds(runs, side, step, key),
                      _seeds(runs, "original", step, key))
        if gap:
          out[f"{side} {key} outside at {step}"] = f"{abs(gap):.4f}"
  for key, margin in MARGINS.items():
    p = tost_p(_seeds(runs, "ours_origdense", STEP, key),
               _seeds(runs, "original", STEP, key), margin)
    out[f"TOST ours_origdense {key} at {margin}"] = f"{p:.2f}"
  cross = {}  # seed: ours' evaluator on the original's last weights
  for seed, run in sorted(runs["original"].items()):
    with open(os.path.join(records, "cross_eval", "float32",
                           f"original_seed{seed}", f"step_{STEP}.json")) as f:
      cross[seed] = json.load(f)["masked_lm_loss"]
    offset = run["eval"][STEP]["masked_lm_loss"] - cross[seed]
    out[f"evaluator offset seed {seed}"] = f"{offset:+.3f}"
  # The MLM-loss gap on one evaluator: our float32 runs' own eval (the
  # same masks as the cross-eval of their seed) minus the original's.
  for side in ("ours_origdense_fp32", "ours_origorder_fp32"):
    for seed, run in sorted(runs.get(side, {}).items()):
      if STEP in run["eval"]:
        gap = run["eval"][STEP]["masked_lm_loss"] - cross[seed]
        out[f"one-evaluator gap {side} seed {seed}"] = f"{gap:+.3f}"
  # Our runs under the original's evaluator (orig_eval/): where our seed
  # mean leaves the original's range from step 1,500 (the issue's
  # criterion), the gap and its TOST at the last step.
  for side, seeds in sorted(collect_parity.read_pretraining(
      records, "orig_eval").items()):
    steps = [s for s in sorted(runs["original"][1]["eval"]) if s >= 1500]
    key = "masked_lm_loss"
    mean = {s: np.mean([r["eval"][s][key] for r in seeds.values()])
            for s in steps}
    left = [s for s in steps if not min(_seeds(runs, "original", s, key))
            <= mean[s] <= max(_seeds(runs, "original", s, key))]
    out[f"original's evaluator {side} mean outside from 1500"] = (
        f"{len(left)} of {len(steps)} steps")
    ours = [r["eval"][STEP][key] for _, r in sorted(seeds.items())]
    original = _seeds(runs, "original", STEP, key)
    out[f"original's evaluator {side} gap at {STEP}"] = (
        f"{np.mean(ours) - np.mean(original):+.4f}")
    out[f"original's evaluator {side} TOST at {MARGINS[key]}"] = (
        f"{tost_p(ours, original, MARGINS[key]):.2f}")
  # One set of weights under both evaluators over eval-mask seeds
  # (run_parity.py evaluator_offset): the original's minus ours.
  folder = os.path.join(records, "evaluator_offset")
  for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
    # ours on its own rows, then on the rows the original's read
    for mine, label in (("ours", "mask seeds"),
                        ("ours_origrows", "mask seeds on the original's rows")):
      diffs = []
      for k in range(1, 1000):
        files = [os.path.join(folder, name, f"{who}_masks{k}.json")
                 for who in ("original", mine)]
        if not all(os.path.exists(f) for f in files):
          break
        theirs, ours = (_mlm_loss(f) for f in files)
        diffs.append(theirs - ours)
      if len(diffs) > 1:
        p = stats.ttest_1samp(diffs, 0.0).pvalue
        out[f"evaluators' offset over {label} {name}"] = (
            f"{np.mean(diffs):+.3f} [{min(diffs):+.3f}, {max(diffs):+.3f}] "
            f"over {len(diffs)} seeds, p = {p:.1g}")
  for (lr, task), sides in sorted(collect_parity.read_finetuning(
      records).items()):
    original = list(sides["original"].values())
    for side in ("ours", "ours_orighead"):
      ours = list(sides[side].values())
      ci = stats.ttest_ind(ours, original,
                           equal_var=False).confidence_interval()
      out[f"{side} {task} {lr:g} interval"] = f"[{ci.low:.1f}, {ci.high:+.1f}]"
  out.update(_electric(os.path.join(records, "electric")))
  out.update(_small(os.path.join(records, "small")))
  return out


def _electric(folder):
  """Electric (issue 68): each of our seeds' last weights under the
  original's evaluator (orig_eval/) against its own eval, and how many of
  the plan's metrics then fall inside the original's seed range."""
  theirs = collect_parity.read_pretraining(folder, "orig_eval").get("ours")
  if not theirs:
    return {}
  with open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         "plan_electric.json")) as f:
    metrics = [tuple(m) for m in json.load(f)["eval_metrics"]]
  runs = collect_parity.read_pretraining(folder)
  out = {}
  for seed, run in sorted(theirs.items()):
    last = run["eval"][STEP]
    offset = (last["masked_lm_loss"] -
              runs["ours"][seed]["eval"][STEP]["masked_lm_loss"])
    out[f"electric evaluator offset seed {seed}"] = f"{offset:+.3f}"
    inside = [m for m in metrics if not outside(
        [collect_parity.value("original", last, m)],
        [collect_parity.value("original", r["eval"][STEP], m)
         for r in runs["original"].values()])]
    out[f"electric original's evaluator seed {seed} inside at {STEP}"] = (
        f"{len(inside)} of {len(metrics)}")
  out.update(_ranges_apart(folder, "electric", metrics))
  return out


def _apart(mine, keys, theirs, theirs_keys, metrics):
  """"metric at step" wherever the seed ranges of two sides' runs share no
  value (keys: whose metric names each side's records carry)."""
  return [f"{m[0]} at {step}" for m in metrics
          for step in sorted(next(iter(theirs.values()))["eval"])
          if outside([collect_parity.value(keys, r["eval"][step], m)
                      for r in mine.values()],
                     [collect_parity.value(theirs_keys, r["eval"][step], m)
                      for r in theirs.values()])]


def _ranges_apart(folder, label, metrics, side="ours"):
  """Where `side`'s seed range leaves the original's, on ours' evaluator
  and on the original's (orig_eval/, where run): "metric at step", listed."""
  runs = collect_parity.read_pretraining(folder)
  if side not in runs:
    return {}
  out = {}
  # (ours' records carry ours' metric names; the original's evaluator's
  # its own.)
  for name, kind, keys in (("ours'", "pretrain", "ours"),
                           ("the original's", "orig_eval", "original")):
    mine = collect_parity.read_pretraining(folder, kind).get(side)
    if mine:
      out[f"{label} {name} evaluator ranges apart"] = ", ".join(_apart(
          mine, keys, runs["original"], "original", metrics)) or "none"
  return out


def _small(folder):
  """ELECTRA-Small (issue 68): where the ranges part; ours from the
  original's initial weights (ours_originit) against the original's run
  of the same seed, which started from them (all but its glorot kernels),
  per seed at the last step; and _information."""
  runs = collect_parity.read_pretraining(folder)
  last = max(runs["original"][1]["eval"])
  out = _ranges_apart(folder, "small", collect_parity.EVAL_METRICS)
  out.update(_ranges_apart(folder, "small originit",
                           collect_parity.EVAL_METRICS, "ours_originit"))
  # The same test between two sides of our own code: how often two seeds
  # a side leave each other's range with no difference in the code.
  if "ours_originit" in runs:
    out["small ours vs ours_originit ranges apart"] = ", ".join(_apart(
        runs["ours_originit"], "ours", runs["ours"], "ours",
        collect_parity.EVAL_METRICS)) or "none"
  for m in collect_parity.EVAL_METRICS:
    diffs = [collect_parity.value("ours_originit", run["eval"][last], m) -
             collect_parity.value("original",
                                  runs["original"][seed]["eval"][last], m)
             for seed, run in sorted(runs.get("ours_originit", {}).items())
             if last in run["eval"]]
    if diffs:
      out[f"small originit {m[0]} minus original per seed at {last}"] = (
          ", ".join(f"{d:+.4f}" for d in diffs))
  out.update(_family(runs, last))
  out.update(_information(folder, runs, last))
  return out


def _family(runs, last):
  """The four metrics' Welch p (ours vs original, at the last step) as one
  family: each p as results.md gives it and Holm-adjusted; and the TOST
  at MARGINS where a metric has one."""
  welch, tost = {}, {}
  for m in collect_parity.EVAL_METRICS:
    a, b = (_seeds(runs, side, last, m[0]) for side in ("original", "ours"))
    if min(len(a), len(b)) > 1:
      welch[m[0]] = stats.ttest_ind(b, a, equal_var=False).pvalue
      if m[0] in MARGINS:
        tost[m[0]] = tost_p(b, a, MARGINS[m[0]])
  if not welch:
    return {}
  adjusted = holm(welch)
  family = ", ".join(f"{k} {welch[k]:.3f} -> {adjusted[k]:.3f}"
                     for k in welch)
  margins = ", ".join(f"{k} within {MARGINS[k]:g}: p = {p:.3f}"
                      for k, p in tost.items())
  return {f"small Holm-adjusted Welch p at {last}": family,
          f"small TOST at {last}": margins}


def _information(folder, runs, last):
  """How much each Small run's discriminator knows beyond the replaced
  tokens' base rate p at step `last`: the entropy H(p) minus its loss
  (p = 1 - its accuracy, as it flags none); our code's runs against the
  original's."""
  out = {}
  # On each evaluator: ours' (pretrain/) and the original's (orig_eval/,
  # whose records carry the original's metric names).
  theirs = collect_parity.read_pretraining(folder, "orig_eval")
  info = {}  # ours' evaluator: side -> [information per seed]
  for where, found, keys in (("", runs, None),
                             (" on the original's evaluator", theirs,
                              "original")):
    for side in ("original", "ours", "ours_originit"):
      if where and side == "original":
        continue  # its own runs' records are on its evaluator already
      for seed, run in sorted(found.get(side, {}).items()):
        if last not in run["eval"]:
          continue
        p = 1 - run["eval"][last]["disc_accuracy"]
        entropy = -(p * np.log(p) + (1 - p) * np.log(1 - p))
        loss = collect_parity.value(keys or side, run["eval"][last],
                                    collect_parity.EVAL_METRICS[1])
        out[f"small {side} seed {seed} disc information at {last}"
            f"{where}"] = f"{entropy - loss:+.4f}"
        if not where:
          info.setdefault(side, []).append(entropy - loss)
  # Our code's runs (both inits) against the original's, on ours' evaluator.
  ours = info.get("ours", []) + info.get("ours_originit", [])
  if len(ours) > 1 and len(info.get("original", [])) > 1:
    welch = stats.ttest_ind(ours, info["original"], equal_var=False).pvalue
    ranks = stats.mannwhitneyu(ours, info["original"], method="exact").pvalue
    out[f"small disc information ours vs original at {last}"] = (
        f"{np.mean(ours):+.4f} vs {np.mean(info['original']):+.4f}, Welch "
        f"p = {welch:.3f}, Mann-Whitney p = {ranks:.3f} (n = {len(ours)} vs "
        f"{len(info['original'])})")
  return out


def main(argv=None):
  argv = sys.argv[1:] if argv is None else argv
  for name, figure in figures(*argv[:1]).items():
    print(f"{name}: {figure}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
