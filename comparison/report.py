"""results.json, the Markdown table and the plots of a comparison.

GLUE score: the mean over the tasks run of each task's GLUE metric (MCC for
CoLA, Spearman for STS-B, accuracy for the rest; finetune/scorer.py), per
fine-tuning seed; the table gives the median over seeds, as the papers
report, and the seed spread (max - min). Scores are x100, as in the papers.
"""

import json
import os

import numpy as np

from comparison.plan import ALIASES
from finetune.scorer import GLUE_METRICS
from util import storage
from util.machine import cpu_kind

TASK_TITLES = {"cola": "CoLA", "sst": "SST-2", "mrpc": "MRPC", "sts": "STS-B",
               "rte": "RTE", "qnli": "QNLI", "mnli": "MNLI", "qqp": "QQP",
               "wnli": "WNLI"}
# The eval metrics each objective's curve shows (the first one present).
DISC_CURVE = ("disc_auc", "nce_auc")
GEN_CURVE = ("masked_lm_accuracy", "cloze_accuracy")


def _stats(values):
  return {"median": float(np.median(values)),
          "spread": float(np.max(values) - np.min(values)),
          "seeds": [float(v) for v in values]}


def _checkpoint_results(config, run, step, runner):
  """Fine-tuning and eval results of one checkpoint (what is done so far)."""
  out = {"step": step, "flops": run.checkpoint_flops(step), "tasks": {}}
  evaluation = runner.result(f"eval-{run.name}-{step}")
  if evaluation:
    out["eval"] = evaluation
  per_seed = {}
  for task in config.task_names:
    metric = GLUE_METRICS.get(task, "accuracy")
    values = []
    for seed in range(1, config.seeds + 1):
      r = runner.result(f"finetune-{run.name}-{step}-{task}-{seed}")
      if r is not None:
        values.append(r[metric])  # the scorer reports 0-100
        per_seed.setdefault(seed, {})[task] = r[metric]
    if values:
      out["tasks"][task] = dict(_stats(values), metric=metric)
  complete = [np.mean(list(s.values())) for s in per_seed.values()
              if len(s) == len(config.task_names)]
  if complete and config.task_names:
    stats = _stats(complete)
    out.update(glue_score=stats["median"], glue_spread=stats["spread"],
               glue_seeds=stats["seeds"])
  return out


def collect(config, budget, runs, runner, command=""):
  results = {"budget_flops": budget, "command": command,
             "machine": cpu_kind(), "model_size": config.model_size,
             "max_seq_length": config.max_seq_length,
             "tasks": config.task_names, "seeds": config.seeds,
             "pretrain_hparams": config.pretrain_hparams,
             "finetune_hparams": config.finetune_hparams, "objectives": {}}
  for run in runs:
    checkpoints = [_checkpoint_results(config, run, step, runner)
                   for step in run.checkpoint_steps]
    final = checkpoints[-1]
    entry = {"flops": run.flops, "steps": run.steps,
             "flops_per_step": run.flops_per_step,
             "tasks": final["tasks"], "checkpoints": checkpoints}
    for key in ("glue_score", "glue_spread", "glue_seeds", "eval"):
      if key in final:
        entry[key] = final[key]
    blimp = runner.result(f"blimp-{run.name}")
    if blimp:
      entry["blimp"] = 100 * blimp["overall"]
      entry["blimp_pairs"] = blimp["pairs"]
    results["objectives"][run.name] = entry
  results["versus_baseline"] = versus_baseline(results["objectives"])
  return results


def versus_baseline(objectives):
  """Each objective's GLUE margin over BERT's and whether the seeds show it.

  A margin counts only when it is larger than the larger of the two seed
  spreads (max - min over seeds); otherwise neither objective is shown
  better. Empty until BERT and another objective have a GLUE score.
  """
  # The papers' baseline (ELECTRA Table 1 and Table 4): the run named mlm
  # or its alias bert.
  base = next((n for n in objectives if ALIASES.get(n, n) == "mlm"), None)
  ref = objectives.get(base, {})
  if "glue_score" not in ref:
    return {}
  out = {}
  for name, o in objectives.items():
    if name == base or "glue_score" not in o:
      continue
    margin = o["glue_score"] - ref["glue_score"]
    spread = max(o["glue_spread"], ref["glue_spread"])
    verdict = ("ahead" if margin > spread else
               "behind" if -margin > spread else "not shown different")
    out[name] = {"baseline": base, "margin": margin, "spread": spread,
                 "verdict": verdict}
  return out


def _cell(stats):
  if not stats:
    return "-"
  return f"{stats['median']:.1f} ({stats['spread']:.1f})"


def markdown(results):
  tasks = results["tasks"]
  head = (["objective", "steps", "train FLOPs"] +
          [TASK_TITLES.get(t, t) for t in tasks] + ["GLUE", "BLiMP"])
  lines = ["| " + " | ".join(head) + " |",
           "|" + "---|" * len(head)]
  for name, o in results["objectives"].items():
    glue = ({"median": o["glue_score"], "spread": o["glue_spread"]}
            if "glue_score" in o else None)
    row = [name, str(o["steps"]), f"{o['flops']:.2e}"]
    row += [_cell(o["tasks"].get(t)) for t in tasks]
    row += [_cell(glue), f"{o['blimp']:.1f}" if "blimp" in o else "-"]
    lines.append("| " + " | ".join(row) + " |")
  metrics = ", ".join(f"{TASK_TITLES.get(t, t)} {GLUE_METRICS.get(t, 'acc')}"
                      for t in tasks)
  lines += ["", f"Dev-set scores x100 ({metrics}): the median over "
            f"{results['seeds']} fine-tuning seeds, the seed spread (max - "
            "min) in parentheses; GLUE = the mean of the tasks above. BLiMP: "
            "share of minimal pairs where the model's pseudo-log-likelihood "
            "prefers the grammatical sentence. Every run spent "
            f"{results['budget_flops']:.2e} train FLOPs (ELECTRA appendix E "
            f"convention); {results['machine']}."]
  versus = results.get("versus_baseline") or {}
  if versus:
    lines += ["", "Against BERT (GLUE, median of seeds; a margin counts when "
              "it is larger than the larger seed spread of the two):"]
  for name, v in versus.items():
    lines.append(f"- {name}: {v['margin']:+.1f} over {v['baseline']}, "
                 f"larger spread {v['spread']:.1f}: {v['verdict']}")
  return "\n".join(lines) + "\n"


def _legend(ax):
  if ax.get_legend_handles_labels()[0]:  # nothing to label before results
    ax.legend(fontsize=8)


def plot(results, path_glue, path_curves):
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  # One colour per objective in every panel, whichever have points yet.
  colors = {name: f"C{i}" for i, name in enumerate(results["objectives"])}
  fig, ax = plt.subplots(figsize=(5.5, 3.8), dpi=100)
  for name, o in results["objectives"].items():
    points = [c for c in o["checkpoints"] if "glue_score" in c]
    if not points:
      continue
    x = [c["flops"] for c in points]
    y = [c["glue_score"] for c in points]
    low = [c["glue_score"] - min(c["glue_seeds"]) for c in points]
    high = [max(c["glue_seeds"]) - c["glue_score"] for c in points]
    ax.errorbar(x, y, yerr=[low, high], marker="o", capsize=3, label=name,
                color=colors[name])
  ax.set_xlabel("pretraining FLOPs")
  ax.set_ylabel("GLUE dev score (median of seeds)")
  ax.set_title(f"{results['model_size']} models, equal FLOPs", fontsize=10)
  ax.grid(alpha=0.3)
  _legend(ax)
  fig.tight_layout()
  fig.savefig(path_glue)
  plt.close(fig)

  fig, axes = plt.subplots(1, 2, figsize=(9, 3.5), dpi=100)
  for name, o in results["objectives"].items():
    for ax, keys in zip(axes, (DISC_CURVE, GEN_CURVE)):
      points = [(c["flops"], next((c["eval"][k] for k in keys
                                   if k in c.get("eval", {})), None))
                for c in o["checkpoints"]]
      points = [p for p in points if p[1] is not None]
      if points:
        ax.plot(*zip(*points), marker="o", label=name, color=colors[name])
  axes[0].set_ylabel("discriminator AUC (Electric: NCE AUC)")
  axes[1].set_ylabel("generator / MLM accuracy at masks")
  for ax in axes:
    ax.set_xlabel("pretraining FLOPs")
    ax.grid(alpha=0.3)
    _legend(ax)
  fig.tight_layout()
  fig.savefig(path_curves)
  plt.close(fig)


def write(config, budget, runs, runner, command=""):
  results = collect(config, budget, runs, runner, command)
  out = config.output_dir
  storage.write_text_atomic(os.path.join(out, "results.json"),
                            json.dumps(results, indent=2))
  storage.write_text_atomic(os.path.join(out, "results.md"),
                            markdown(results))
  plot(results, os.path.join(out, "glue_vs_flops.png"),
       os.path.join(out, "pretrain_curves.png"))
  return results

