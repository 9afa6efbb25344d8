"""results.json, the Markdown table and the plots of a comparison.

GLUE score: the mean over the GLUE tasks run of each task's GLUE metric
(MCC for CoLA, Spearman for STS-B, accuracy for the rest;
finetune/metrics.py), per pair of pretraining and fine-tuning seed; the
table gives the median over those pairs, as the papers report medians, and
their spread (max - min). Token-level tasks (chunk F1, POS accuracy) are
columns of their own, outside the GLUE mean. Scores are x100.
"""

import json
import os

import numpy as np

from comparison import stats
from comparison.plan import own_pll_method
from comparison.plan import ALIASES
from finetune import baselines
from finetune.metrics import GLUE_METRICS
from util import storage
from util.machine import cpu_kind

TASK_TITLES = {"cola": "CoLA", "sst": "SST-2", "mrpc": "MRPC", "sts": "STS-B",
               "rte": "RTE", "qnli": "QNLI", "mnli": "MNLI", "qqp": "QQP",
               "wnli": "WNLI", "chunk": "Chunk", "pos": "POS"}
TASK_METRICS = dict(GLUE_METRICS, chunk="f1", pos="accuracy")
# The eval metrics each objective's curve shows (the first one present).
DISC_CURVE = ("disc_auc", "nce_auc")
GEN_CURVE = ("masked_lm_accuracy", "cloze_accuracy")


def _stats(values):
  return {"median": float(np.median(values)),
          "spread": float(np.max(values) - np.min(values)),
          "seeds": [float(v) for v in values]}


def _glue_tasks(tasks):
  return [t for t in tasks if t in GLUE_METRICS]


def _scores(config, runs, step, runner):
  """{(run, fine-tuning seed): {task: score}} of the runs' checkpoint at
  `step`, for what is done so far."""
  out = {}
  for run in runs:
    for task in config.task_names:
      metric = TASK_METRICS.get(task, "accuracy")
      for seed in range(1, config.seeds + 1):
        r = runner.result(f"finetune-{run.name}-{step}-{task}-{seed}")
        if r is not None:  # the scorer reports 0-100
          out.setdefault((run.name, seed), {})[task] = r[metric]
  return out


def summarize(tasks, scores):
  """Per task and for the GLUE mean (with and without STS-B): the median
  and spread over every (pretraining, fine-tuning) seed pair."""
  out = {"tasks": {}}
  for task in tasks:
    values = [s[task] for s in scores.values() if task in s]
    if values:
      out["tasks"][task] = dict(_stats(values),
                                metric=TASK_METRICS.get(task, "accuracy"))
  glue = _glue_tasks(tasks)
  for key, members in (("glue", glue),
                       ("glue_no_sts", [t for t in glue if t != "sts"])):
    if not members or (key == "glue_no_sts" and members == glue):
      continue
    complete = {pair: np.mean([s[t] for t in members])
                for pair, s in scores.items() if all(t in s for t in members)}
    if complete:
      stats = _stats(list(complete.values()))
      by_run = {}  # the pretraining seed is the unit (comparison/stats.py)
      for (run, _), value in complete.items():
        by_run.setdefault(run, []).append(value)
      out.update({f"{key}_score": stats["median"],
                  f"{key}_spread": stats["spread"],
                  f"{key}_seeds": stats["seeds"],
                  f"{key}_runs": {str(r): float(np.mean(v))
                                  for r, v in by_run.items()}})
  return out


def mean_eval(evals):
  """Each eval metric's mean over the pretraining seeds that have it."""
  keys = sorted({k for e in evals for k, v in e.items()
                 if isinstance(v, (int, float))})
  return {k: float(np.mean([e[k] for e in evals if k in e])) for k in keys}


def _checkpoint_results(config, runs, step, runner):
  """Fine-tuning and eval results of one checkpoint of an objective's runs
  (all its pretraining seeds: they share the steps)."""
  out = {"step": step, "flops": runs[0].checkpoint_flops(step)}
  evals = {r.name: runner.result(f"eval-{r.name}-{step}") for r in runs}
  evals = {k: v for k, v in evals.items() if v}
  if evals:
    out["eval"] = mean_eval(list(evals.values()))
    out["eval_runs"] = evals
  out.update(summarize(config.task_names,
                       _scores(config, runs, step, runner)))
  return out


SUMMARY_KEYS = ("glue_score", "glue_spread", "glue_seeds",
                "glue_no_sts_score", "glue_no_sts_spread",
                "glue_no_sts_seeds", "glue_runs", "glue_no_sts_runs", "eval",
                "eval_runs")


def collect(config, budget, runs, runner, command=""):
  results = {"budget_flops": budget, "command": command,
             "machine": cpu_kind(), "model_size": config.model_size,
             "max_seq_length": config.max_seq_length,
             "tasks": config.task_names, "seeds": config.seeds,
             "pretrain_hparams": config.pretrain_hparams,
             "finetune_hparams": config.finetune_hparams, "objectives": {}}
  groups = {}
  for run in runs:
    groups.setdefault(run.objective or run.name, []).append(run)
  for name, group in groups.items():
    first = group[0]
    checkpoints = [_checkpoint_results(config, group, step, runner)
                   for step in first.checkpoint_steps]
    final = checkpoints[-1]
    entry = {"flops": first.flops, "steps": first.steps,
             "flops_per_step": first.flops_per_step,
             "matmul_flops": first.matmul_flops_per_step * first.steps,
             "pretrain_seeds": len(group), "runs": [r.name for r in group],
             "tasks": final["tasks"], "checkpoints": checkpoints}
    entry.update({k: final[k] for k in SUMMARY_KEYS if k in final})
    same = config.blimp_same_method
    for key, prefix in (("blimp", "blimp-"),
                        ("blimp_same", f"blimp-{same}-")):
      done = [b for b in (runner.result(prefix + r.name) for r in group) if b]
      if done:  # the mean over pretraining seeds
        entry[key] = 100 * float(np.mean([b["overall"] for b in done]))
        entry[key + "_pairs"] = done[0]["pairs"]  # per model scored
    entry["blimp_method"] = own_pll_method(first)
    if same and same == entry["blimp_method"] and "blimp" in entry:
      entry["blimp_same"] = entry["blimp"]  # its own is the same one
    results["objectives"][name] = entry
  results["blimp_same_method"] = same
  results["versus_baseline"] = versus_baseline(results["objectives"])
  return results


def versus_baseline(objectives):
  """Each objective's GLUE margin over BERT's, tested over pretraining
  seeds (comparison/stats.py), with and without STS-B. Empty until BERT
  and another objective have a GLUE score."""
  # The papers' baseline (ELECTRA Table 1 and Table 4): the run named mlm
  # or its alias bert.
  base = next((n for n in objectives if ALIASES.get(n, n) == "mlm"), None)
  ref = objectives.get(base, {})
  if "glue_runs" not in ref:
    return {}
  out = {}
  for name, o in objectives.items():
    if name == base or "glue_runs" not in o:
      continue
    out[name] = dict(_verdict(o, ref, "glue"), baseline=base)
    if "glue_no_sts_runs" in o and "glue_no_sts_runs" in ref:
      out[name]["without_sts"] = _verdict(o, ref, "glue_no_sts")
  return out


def _verdict(o, ref, key):
  """`o` against `ref` over their pretraining runs' `key` means."""
  return stats.compare(list(o[f"{key}_runs"].values()),
                       list(ref[f"{key}_runs"].values()))


def _cell(stats):
  if not stats:
    return "-"
  if stats["spread"] is None:  # one number, no seeds
    return f"{stats['median']:.1f}"
  return f"{stats['median']:.1f} ({stats['spread']:.1f})"


def markdown(results):
  tasks = results["tasks"]
  same = results.get("blimp_same_method", "")
  glue = _glue_tasks(tasks)
  no_sts = "sts" in glue and len(glue) > 1
  head = (["objective", "steps", "train FLOPs", "matmul FLOPs"] +
          [TASK_TITLES.get(t, t) for t in tasks] + ["GLUE"] +
          ["GLUE w/o STS-B"] * no_sts + ["BLiMP (own)"] +
          [f"BLiMP ({same})"] * bool(same))
  lines = ["| " + " | ".join(head) + " |",
           "|" + "---|" * len(head)]
  rows = dict(results["objectives"])
  if results.get("baseline"):
    rows["baseline (no text)"] = dict(results["baseline"], steps="-",
                                      flops=None)
  for name, o in rows.items():
    seeds = o.get("pretrain_seeds", 1)
    row = [name + (f" (x{seeds})" if seeds > 1 else ""), str(o["steps"])]
    row += [f"{o[k]:.2e}" if o.get(k) else "-"
            for k in ("flops", "matmul_flops")]
    row += [_cell(o["tasks"].get(t)) for t in tasks]
    for key in ["glue"] + ["glue_no_sts"] * no_sts:
      row.append(_cell({"median": o[f"{key}_score"],
                        "spread": o[f"{key}_spread"]}
                       if f"{key}_score" in o else None))
    for key in ["blimp"] + ["blimp_same"] * bool(same):
      row.append(f"{o[key]:.1f}" if key in o else "-")
    lines.append("| " + " | ".join(row) + " |")
  metrics = ", ".join(f"{TASK_TITLES.get(t, t)} {TASK_METRICS.get(t, 'acc')}"
                      for t in tasks)
  glue_names = ", ".join(TASK_TITLES.get(t, t) for t in glue)
  lines += ["", f"Dev-set scores x100 ({metrics}). Each cell: the median "
            f"over every pair of pretraining seed (x N after the name) and "
            f"{results['seeds']} fine-tuning seeds, the spread (max - min) "
            f"over those pairs in parentheses. GLUE: for each seed pair the "
            f"mean of {glue_names}, then the median over pairs (not the mean "
            "of the medians above). BLiMP: share of minimal pairs where the "
            "model's pseudo-log-likelihood prefers the grammatical sentence, "
            "by each objective's own estimator (BERT: masked-LM PLL; ELECTRA: "
            "appendix G; - where it has none)"
            + (f" and by {same} for every model (the masked-LM PLL of BERT "
               "and of the ELECTRA family's generator)" if same == "mlm" else
               f" and by {same} for every model" if same else "") + "; the "
            "mean over pretraining seeds. "
            f"Every run spent {results['budget_flops']:.2e} train FLOPs "
            "by ELECTRA appendix E's convention (embedding lookups priced as "
            "dense matmuls, backward = forward); matmul FLOPs: the matrix "
            "multiplies the run really executed (no lookups, backward = 2x "
            f"forward). {results['machine']}."]
  if results.get("baseline"):
    lines[-1] += (" Baseline (no text): GLUE tasks' training majority class "
                  "(CoLA MCC and STS-B Spearman of a constant are 0); chunk "
                  "and POS: each word's most frequent training tag.")
  versus = results.get("versus_baseline") or {}
  if versus:
    lines += ["", "Against BERT: the difference of the GLUE means over "
              "pretraining seeds (each seed's mean over its fine-tuning "
              "seeds), Welch's t-test p (the verdict, at 0.05) and the exact "
              "permutation p with the smallest p those seed counts allow "
              "(comparison/stats.py):"]
  for name, v in versus.items():
    line = f"- {name} vs {v['baseline']}: GLUE {_test_line(v)}"
    if "without_sts" in v:
      line += f"; without STS-B {_test_line(v['without_sts'])}"
    lines.append(line)
  return "\n".join(lines) + "\n"


def _p(value):
  return "-" if value is None else f"{value:.2g}"


def _test_line(v):
  n_a, n_b = v["seeds"]
  return (f"{v['margin']:+.1f} ({n_a} vs {n_b} seeds): {v['verdict']}; "
          f"permutation p = {_p(v['permutation_p'])} (smallest possible "
          f"{_p(v['smallest_p'])})")


def _legend(ax, **below):
  if ax.get_legend_handles_labels()[0]:  # nothing to label before results
    ax.legend(fontsize=8, **below)


def _seed_label(name, results):
  o = results["objectives"][name]
  return (f"{name} ({o.get('pretrain_seeds', 1)} pretraining x "
          f"{results.get('seeds', 1)} fine-tuning seeds)")


def plot(results, path_glue, path_curves):
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  # One colour per objective in every panel, whichever have points yet.
  colors = {name: f"C{i}" for i, name in enumerate(results["objectives"])}
  fig, ax = plt.subplots(figsize=(5.5, 3.8), dpi=100)
  scored = {name: [c for c in o["checkpoints"] if "glue_score" in c]
            for name, o in results["objectives"].items()}
  # Final models only (equal FLOPs): one column per objective.
  by_name = all(len(points) <= 1 for points in scored.values())
  for i, (name, points) in enumerate(scored.items()):
    if not points:
      continue
    x = [i] * len(points) if by_name else [c["flops"] for c in points]
    y = [c["glue_score"] for c in points]
    low = [c["glue_score"] - min(c["glue_seeds"]) for c in points]
    high = [max(c["glue_seeds"]) - c["glue_score"] for c in points]
    ax.errorbar(x, y, yerr=[low, high], marker="o", capsize=3,
                label=_seed_label(name, results), color=colors[name])
  if by_name:
    ax.set_xticks(range(len(scored)), list(scored), rotation=20, fontsize=8)
    ax.set_xlabel("objective (each at the same train FLOPs)")
    if "glue_score" in (results.get("baseline") or {}):
      ax.axhline(results["baseline"]["glue_score"], color="grey", ls="--",
                 label="no text (majority class)")
  else:
    ax.set_xlabel("pretraining FLOPs (ELECTRA appendix E)")
  ax.set_ylabel("GLUE dev score x100\n(median; bars: min-max of seed pairs)",
                fontsize=8)
  ax.set_title(f"GLUE after fine-tuning: {results['model_size']} models, "
               f"{results.get('budget_flops', 0):.3g} train FLOPs each",
               fontsize=9)
  ax.grid(alpha=0.3)
  # Below the axes: inside, it would hide the points.
  _legend(ax, loc="upper center", bbox_to_anchor=(0.5, -0.3))
  fig.savefig(path_glue, bbox_inches="tight")
  plt.close(fig)

  fig, axes = plt.subplots(1, 2, figsize=(9, 3.5), dpi=100)
  for name, o in results["objectives"].items():
    for ax, keys in zip(axes, (DISC_CURVE, GEN_CURVE)):
      points = [(c["flops"], next((c["eval"][k] for k in keys
                                   if k in c.get("eval", {})), None))
                for c in o["checkpoints"]]
      points = [p for p in points if p[1] is not None]
      if points:
        ax.plot(*zip(*points), marker="o", color=colors[name],
                label=f"{name} (mean of {o.get('pretrain_seeds', 1)} "
                "pretraining seeds)")
  axes[0].set_ylabel("discriminator AUC (Electric: NCE AUC)")
  axes[1].set_ylabel("generator / MLM accuracy at masks")
  axes[0].set_title("Held-out replaced-token detection", fontsize=9)
  axes[1].set_title("Held-out masked-token prediction", fontsize=9)
  for ax in axes:
    ax.set_xlabel("pretraining FLOPs")
    ax.grid(alpha=0.3)
    _legend(ax)
  fig.tight_layout()
  fig.savefig(path_curves)
  plt.close(fig)


def task_baselines(config, raw_data_dir):
  """{task: the no-text baseline's dev score} (finetune/baselines.py),
  computed once and kept in OUTPUT_DIR/baselines.json."""
  path = os.path.join(config.output_dir, "baselines.json")
  kept = json.loads(storage.read_text(path)) if storage.exists(path) else {}
  todo = [t for t in config.task_names if t not in kept]
  for task in todo:
    kept[task] = baselines.baseline_score(task, raw_data_dir(task),
                                          TASK_METRICS.get(task, "accuracy"))
  if todo:
    storage.write_text_atomic(path, json.dumps(kept, indent=2))
  return {t: kept[t] for t in config.task_names}


def baseline_row(tasks, scores):
  """The baselines as a results entry: per task, and the GLUE means."""
  glue = _glue_tasks(tasks)
  row = {"tasks": {t: {"median": v, "spread": None} for t, v in
                   scores.items()}}
  for key, members in (("glue", glue),
                       ("glue_no_sts", [t for t in glue if t != "sts"])):
    if members:
      row[f"{key}_score"] = float(np.mean([scores[t] for t in members]))
      row[f"{key}_spread"] = None
  return row


def write(config, budget, runs, runner, command="", raw_data_dir=None):
  results = collect(config, budget, runs, runner, command)
  if raw_data_dir and config.task_names:
    results["baseline"] = baseline_row(
        config.task_names, task_baselines(config, raw_data_dir))
  out = config.output_dir
  storage.write_text_atomic(os.path.join(out, "results.json"),
                            json.dumps(results, indent=2))
  storage.write_text_atomic(os.path.join(out, "results.md"),
                            markdown(results))
  plot(results, os.path.join(out, "glue_vs_flops.png"),
       os.path.join(out, "pretrain_curves.png"))
  return results

