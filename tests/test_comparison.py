"""run_comparison.py: objectives planned for equal FLOPs, and the harness end
to end at a toy budget (two objectives, one task, one seed) on the embedded
sample corpus and the real RTE and BLiMP files."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from comparison import plan
from comparison import report
from comparison.config import ComparisonConfig
from comparison.plan import objective_names
from configure_pretraining import PretrainingConfig
from tests.pretraining_runs import ROOT
from tests.shared_data import SHARED
from pretrain import flops
from util.config import apply_overrides
from util.errors import UserError

TOY = ["--objectives", "mlm,electra", "--budget-flops", "2e12",
       "--num-checkpoints", "2", "--finetune-checkpoints", "final",
       "--tasks", "rte", "--seeds", "1",
       "--glue-dir", os.path.join(SHARED, "glue"),
       "--blimp-dir", os.path.join(SHARED, "blimp"), "--blimp-limit", "1",
       "--finetune-hparams", json.dumps({
           "train_examples_limit": 64, "eval_examples_limit": 64,
           "max_seq_length": 64, "num_train_epochs": 1.0,
           "train_batch_size": 16}),
       "--scoring-hparams", json.dumps({"top_k": 4}),
       "--pretrain-hparams", json.dumps({"num_eval_steps": 2})]


def run_cli(*args):
  return subprocess.run(
      [sys.executable, os.path.join(ROOT, "run_comparison.py"), *args],
      capture_output=True, text=True, timeout=900, cwd=ROOT,
      env=dict(os.environ, PYTHONPATH=ROOT))


def config(**kw):
  return ComparisonConfig(output_dir="/tmp/unused", **kw)


@pytest.mark.parametrize("budget", [3e12, 4e13, 1e15])
def test_every_objective_spends_the_budget(budget):
  names = ",".join(objective_names())
  # Small steps cost ~30x tiny ones: the same number of steps or so.
  for size, names, scale in (("tiny", names, 1), ("small", names + ",ale",
                                                  30)):
    c = config(objectives=names, model_size=size, budget_flops=budget * scale)
    budget_here = budget * scale
    _, runs = plan.plan_runs(c, vocab_size=8000)
    for run in runs:
      pretrain_config = apply_overrides(PretrainingConfig(), run.hparams)
      pretrain_config.vocab_size = 8000
      # The FLOPs come from pretrain/flops.py for the run as it will train.
      assert flops.total_train_flops(pretrain_config) == pytest.approx(run.flops)
      assert run.flops == pytest.approx(budget_here, rel=0.05), run.name
      assert run.checkpoint_steps[-1] == run.steps == pretrain_config.num_train_steps
      assert pretrain_config.save_checkpoints_steps * c.num_checkpoints == run.steps
      assert pretrain_config.keep_checkpoint_max >= c.num_checkpoints
      assert pretrain_config.save_checkpoints_secs > 0  # resume points between them
  # A costlier step buys fewer steps: BERT's is the cheapest.
  c = config(objectives="mlm,electra,script", budget_flops=1e14)
  steps = {r.name: r.steps for r in plan.plan_runs(c, 8000)[1]}
  assert steps["mlm"] > steps["electra"] > steps["script"]


def test_ablations_share_electras_preset_and_aliases_resolve():
  values = plan.preset("replace_mlm", "small")
  assert values["objective"] == "replace_mlm"
  assert values["learning_rate"] == plan.preset("electra", "small")[
      "learning_rate"]
  assert plan.preset("bert", "tiny")["objective"] == "mlm"
  with pytest.raises(UserError, match="unknown objective 'gpt'"):
    plan.preset("gpt", "tiny")
  with pytest.raises(UserError, match="no preset for ale at model_size tiny"):
    plan.preset("ale", "tiny")


def test_a_new_preset_file_is_found(tmp_path, monkeypatch):
  """configs/<name>_<size>.json is the preset of <name>: a new file needs
  no list in the code."""
  (tmp_path / "electra_tiny.json").write_text('{"temperature": 1.0}')
  (tmp_path / "mine_tiny.json").write_text(
      '{"objective": "electra", "temperature": 2.0}')
  monkeypatch.setattr(plan, "PRESETS", str(tmp_path))
  assert plan.preset("mine", "tiny") == {"objective": "electra",
                                         "temperature": 2.0}
  assert plan.preset("electra_15", "tiny") == {"objective": "electra_15",
                                               "temperature": 1.0}


def test_bad_flags_are_one_line_before_any_work(tmp_path):
  for args, message in (
      ([], "--output-dir is required"),
      (["--output-dir", str(tmp_path), "--tasks", "rte"],
       "fine-tuning needs --glue-dir"),
      (["--output-dir", str(tmp_path), "--glue-dir", str(tmp_path / "no")],
       "glue_dir not found"),
      (["--output-dir", str(tmp_path), "--tasks", "", "--objectives",
        "electra,electra"], "named twice"),
      (["--output-dir", str(tmp_path), "--tasks", "", "--pretrain-hparams",
        '{"lerning_rate": 1}', "--dry-run"], "unknown hparam 'lerning_rate'")):
    result = run_cli(*args)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr


def test_dry_run_plans_from_the_vocabulary_and_writes_nothing(tmp_path):
  out = tmp_path / "cmp"
  result = run_cli("--output-dir", str(out), "--tasks", "", "--objectives",
                   "mlm,electra", "--budget-flops", "1e13", "--dry-run")
  assert result.returncode == 0, result.stderr
  # No TFRecords are built (minutes on a real corpus) and no folder made.
  assert not out.exists()
  c = config(objectives="mlm,electra", budget_flops=1e13)
  with open(os.path.join(ROOT, "sample_data", "vocab_8k.txt")) as f:
    vocab_size = sum(1 for _ in f)
  assert plan.format_plan(*plan.plan_runs(c, vocab_size)) in result.stdout


def test_harness_end_to_end_and_resume(tmp_path):
  out = str(tmp_path / "cmp")
  # Two jobs at once (the objectives' pretraining side by side); how many is
  # no part of the experiment, so the rerun below without it finds all done.
  result = run_cli("--output-dir", out, *TOY, "--parallel-jobs", "2")
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr
  for name in ("results.json", "results.md", "glue_vs_flops.png",
               "pretrain_curves.png"):
    assert os.path.getsize(os.path.join(out, name)) > 0
  for name in ("glue_vs_flops.png", "pretrain_curves.png"):
    with open(os.path.join(out, name), "rb") as f:
      assert f.read(8) == b"\x89PNG\r\n\x1a\n"
  with open(os.path.join(out, "results.json")) as f:
    results = json.load(f)
  assert results["budget_flops"] == 2e12
  runs = results["objectives"]
  assert set(runs) == {"mlm", "electra"}
  for name, r in runs.items():
    # Equal compute: each run within 5% of the budget and of the other.
    assert abs(r["flops"] / 2e12 - 1) < 0.05, name
    rte = r["tasks"]["rte"]
    assert len(rte["seeds"]) == 1 and rte["median"] == rte["seeds"][0]
    assert 0 <= rte["median"] <= 100 and rte["metric"] == "accuracy"
    assert r["glue_score"] == pytest.approx(rte["median"])
    assert 0 <= r["blimp"] <= 100 and r["blimp_pairs"] == 67
    # Every checkpoint evaluated, at its share of the run's FLOPs.
    steps = [c["step"] for c in r["checkpoints"]]
    assert steps == [r["steps"] // 2, r["steps"]]
    assert [c["eval"]["global_step"] for c in r["checkpoints"]] == steps
    assert r["checkpoints"][0]["flops"] == pytest.approx(r["flops"] / 2)
  assert "disc_auc" in runs["electra"]["eval"]
  assert "masked_lm_accuracy" in runs["mlm"]["eval"]
  assert abs(runs["mlm"]["flops"] / runs["electra"]["flops"] - 1) < 0.05
  assert runs["mlm"]["steps"] > runs["electra"]["steps"]
  with open(os.path.join(out, "results.md")) as f:
    table = f.read()
  assert "| mlm |" in table and "| electra |" in table and "RTE" in table
  margin = runs["electra"]["glue_score"] - runs["mlm"]["glue_score"]
  assert results["versus_baseline"]["electra"]["margin"] == pytest.approx(
      margin)
  assert (f"- electra vs mlm: GLUE {margin:+.1f} (1 vs 1 seeds): not "
          "tested") in table
  assert "[" in result.stdout and "ETA" in result.stdout
  assert "[pretrain-electra]" in result.stdout  # its lines told apart

  # Rerun on "a new machine": the job records kept, the TFRecords gone.
  # The data is built again; nothing else is left to do, the same results.
  shutil.rmtree(os.path.join(out, "data"))
  again = run_cli("--output-dir", out, *TOY)
  assert again.returncode == 0, again.stderr
  assert "[1/1] data" in again.stdout
  # 11: ELECTRA's BLiMP twice (appendix G, and mlm as every model's).
  assert "11 jobs, 11 already done" in again.stdout
  with open(os.path.join(out, "results.json")) as f:
    assert json.load(f)["objectives"] == runs

  # --only runs just the matching jobs that are not done: here one eval.
  half = runs["mlm"]["steps"] // 2
  os.remove(os.path.join(out, "jobs", f"eval-mlm-{half}.json"))
  only = run_cli("--output-dir", out, *TOY, "--only", "eval-mlm-*")
  assert only.returncode == 0, only.stderr
  assert "2 jobs, 1 already done" in only.stdout
  assert f"[2/2] eval-mlm-{half}" in only.stdout
  with open(os.path.join(out, "results.json")) as f:
    again_eval = json.load(f)["objectives"]["mlm"]["checkpoints"][0]["eval"]
  assert again_eval == pytest.approx(runs["mlm"]["checkpoints"][0]["eval"])
  none = run_cli("--output-dir", out, *TOY, "--only", "nothing-*")
  assert none.returncode == 2
  assert "no planned job matches --only 'nothing-*'" in none.stderr

  # Another budget in the same directory would mix two experiments.
  changed = [a if a != "2e12" else "3e12" for a in TOY]
  refused = run_cli("--output-dir", out, *changed)
  assert refused.returncode == 2
  assert "budget_flops" in refused.stderr.strip().splitlines()[-1]


def test_verdicts_over_bert_test_the_pretraining_seed_means():
  """Issue 51: a margin is judged by Welch's test over pretraining runs
  (comparison/stats.py), not by fine-tuning seeds' spread."""
  from scipy import stats as sp  # pylint: disable=g-import-not-at-top
  def run(means):  # GLUE of each pretraining run, as summarize() keeps them
    return {"glue_score": float(np.median(means)), "tasks": {}, "steps": 1,
            "flops": 1.0,
            "glue_runs": {f"r{k}": m for k, m in enumerate(means)}}
  objectives = {"mlm": run([48.0, 50.0, 51.0]),
                "electra": run([55.0, 56.0, 57.5]),
                "electric": run([49.0, 52.0, 54.5]),
                "script": run([40.0, 41.0, 42.0]),
                "ale": {"tasks": {}, "steps": 1, "flops": 1.0}}  # not yet
  versus = report.versus_baseline(objectives)
  assert set(versus) == {"electra", "electric", "script"}
  welch = sp.ttest_ind([55.0, 56.0, 57.5], [48.0, 50.0, 51.0],
                       equal_var=False).pvalue
  assert versus["electra"]["welch_p"] == pytest.approx(welch)
  assert versus["electra"]["verdict"] == f"ahead (p = {welch:.2g})"
  assert versus["electric"]["verdict"].startswith("not established (p = ")
  assert versus["script"]["verdict"].startswith("behind (p = ")
  # No verdict before BERT has its score, nor without a BERT run.
  assert report.versus_baseline(dict(objectives, mlm={"tasks": {}})) == {}
  assert report.versus_baseline({"electra": objectives["electra"]}) == {}
  # One pretraining run each: nothing to test, however many fine-tunes.
  one = report.versus_baseline({"mlm": run([50.0]), "electra": run([60.0])})
  assert one["electra"]["margin"] == 10.0
  assert one["electra"]["verdict"] == "not tested (1 vs 1 pretraining seeds)"


def test_pretraining_seeds_plan_one_run_each_with_its_own_seed():
  c = config(objectives="mlm:2,electra,electra_15:1", pretrain_seeds=2,
             budget_flops=1e14)
  _, runs = plan.plan_runs(c, 8000)
  # Every objective's first run, then the second ones.
  assert [(r.name, r.objective, r.pretrain_seed) for r in runs] == [
      ("mlm", "mlm", 1), ("electra", "electra", 1),
      ("electra_15", "electra_15", 1), ("mlm.seed2", "mlm", 2),
      ("electra.seed2", "electra", 2)]
  by_name = {r.name: r for r in runs}
  # Seed 1 is the run as planned without seeds; seed 2 differs only there.
  assert "seed" not in by_name["mlm"].hparams
  assert by_name["mlm.seed2"].hparams == dict(by_name["mlm"].hparams,
                                              seed=PretrainingConfig.seed + 1)
  assert by_name["mlm.seed2"].steps == by_name["mlm"].steps
  for bad, message in (("electra:0", "whole number >= 1"),
                       ("electra:two", "whole number >= 1"),
                       ("mlm,mlm:2", "named twice")):
    with pytest.raises(UserError, match=message):
      config(objectives=bad).objective_seeds  # noqa: B018


class FakeRunner:
  def __init__(self, results):
    self.results = results

  def result(self, key):
    return self.results.get(key)


def test_scores_pool_pretraining_and_finetuning_seeds():
  """Every (pretraining, fine-tuning) seed pair is one sample: GLUE is the
  pair's task mean, its median and spread are over pairs; chunk stays out
  of the GLUE mean; w/o STS-B drops STS-B from each pair's mean."""
  c = config(objectives="mlm:2", tasks="sts,rte,chunk", seeds=2,
             budget_flops=1e14, num_checkpoints=1)
  _, runs = plan.plan_runs(c, 8000)
  step = runs[0].steps
  scores = {("mlm", 1): (30.0, 50.0, 80.0), ("mlm", 2): (40.0, 54.0, 82.0),
            ("mlm.seed2", 1): (70.0, 52.0, 84.0),
            ("mlm.seed2", 2): (60.0, 56.0, 86.0)}
  metric = {"sts": "spearman", "rte": "accuracy", "chunk": "f1"}
  results = {}
  for (run, seed), values in scores.items():
    for task, value in zip(("sts", "rte", "chunk"), values):
      results[f"finetune-{run}-{step}-{task}-{seed}"] = {metric[task]: value}
  results[f"eval-mlm-{step}"] = {"masked_lm_accuracy": 0.30}
  results[f"eval-mlm.seed2-{step}"] = {"masked_lm_accuracy": 0.40}
  out = report.collect(c, 1e14, runs, FakeRunner(results))["objectives"]
  o = out["mlm"]
  assert o["pretrain_seeds"] == 2 and o["runs"] == ["mlm", "mlm.seed2"]
  pretrain_config = apply_overrides(PretrainingConfig(), runs[0].hparams)
  pretrain_config.vocab_size = 8000
  # The matmuls it ran: fewer than the paper's count, which prices lookups.
  assert o["matmul_flops"] == pytest.approx(
      flops.model_flops_per_step(pretrain_config) * step)
  assert o["matmul_flops"] < o["flops"]
  glue = [np.mean(v[:2]) for v in scores.values()]  # 40, 47, 61, 58
  assert o["glue_score"] == pytest.approx(np.median(glue))  # 52.5
  assert o["glue_spread"] == pytest.approx(np.ptp(glue))
  assert o["glue_no_sts_score"] == pytest.approx(53.0)  # rte alone
  assert o["glue_no_sts_spread"] == pytest.approx(6.0)
  assert o["tasks"]["chunk"]["median"] == pytest.approx(83.0)
  assert o["tasks"]["sts"]["spread"] == pytest.approx(40.0)
  assert o["eval"]["masked_lm_accuracy"] == pytest.approx(0.35)
  table = report.markdown(report.collect(c, 1e14, runs, FakeRunner(results)))
  assert "| mlm (x2) |" in table and "GLUE w/o STS-B" in table
  assert "Chunk" in table.splitlines()[0]


def test_tagging_tasks_need_a_conll_folder(tmp_path):
  c = ComparisonConfig(output_dir=str(tmp_path), tasks="chunk")
  with pytest.raises(UserError, match="chunk need --conll-dir"):
    c.validate()
  c = ComparisonConfig(output_dir=str(tmp_path), tasks="pos",
                       conll_dir=str(tmp_path))
  with pytest.raises(UserError, match="has no train.txt"):
    c.validate()


def test_blimp_jobs_own_estimator_and_the_same_one_for_all(tmp_path):
  from comparison import runner
  c = config(objectives="mlm,electra,replace_mlm", budget_flops=1e14,
             blimp_dir=str(tmp_path), tasks="")
  _, runs = plan.plan_runs(c, 8000)
  jobs = {r.name: runner.blimp_jobs(c, r) for r in runs}
  # BERT's own estimator is mlm; Replace MLM has none of its own.
  assert jobs == {"mlm": [("", "mlm")],
                  "electra": [("", "electra"), ("mlm", "mlm-electra")],
                  "replace_mlm": [("mlm", "mlm-replace_mlm")]}
  keys = [j.key for j in runner.build_jobs(c, runs)
          if j.key.startswith("blimp")]
  assert keys == ["blimp-mlm", "blimp-electra", "blimp-mlm-electra",
                  "blimp-mlm-replace_mlm"]
  fake = FakeRunner({"blimp-mlm": {"overall": 0.6, "pairs": 10},
                     "blimp-electra": {"overall": 0.5, "pairs": 10},
                     "blimp-mlm-electra": {"overall": 0.55, "pairs": 10}})
  out = report.collect(c, 1e14, runs, fake)["objectives"]
  assert (out["mlm"]["blimp"], out["mlm"]["blimp_same"]) == (60.0, 60.0)
  assert out["electra"]["blimp"] == 50.0
  assert out["electra"]["blimp_same"] == pytest.approx(55.0)
  assert "blimp" not in out["replace_mlm"]


def test_baselines_are_the_majority_class_and_most_frequent_tag(tmp_path):
  """GLUE's training majority class scored on dev (MRPC 68.4, RTE 52.7
  as the issue measured; a constant's MCC and Spearman are 0), and chunk
  and POS by each word's most frequent training tag, checked here against
  a count of our own on a small CoNLL file."""
  from finetune import baselines
  glue = os.path.join(SHARED, "glue")
  assert baselines.baseline_score("mrpc", glue, "accuracy") == \
      pytest.approx(100 * 279 / 408)
  assert baselines.baseline_score("rte", glue, "accuracy") == \
      pytest.approx(100 * 146 / 277)
  assert baselines.baseline_score("cola", glue, "mcc") == 0.0
  assert baselines.baseline_score("sts", glue, "spearman") == 0.0
  for task in ("chunk", "pos"):
    (tmp_path / task).mkdir()
    (tmp_path / task / "train.txt").write_text(
        "the DT B-NP\ncat NN I-NP\nruns VBZ B-VP\n\n"
        "a DT B-NP\ndog NN I-NP\nsits VBZ B-VP\n\ncat NN B-NP\n\n")
    (tmp_path / task / "dev.txt").write_text(
        "the DT B-NP\ndog NN I-NP\nruns VBZ B-VP\n\nruns NN B-NP\n\n"
        "cow NN B-NP\n\n")
  # "runs" is tagged VBZ (a verb chunk) as in training, wrongly here; the
  # unseen "cow" takes the commonest tag (NN; the chunk tag B-NP).
  assert baselines.baseline_score("pos", str(tmp_path), "accuracy") == \
      pytest.approx(100 * 4 / 5)
  # Chunks: 4 gold, 4 predicted, 3 right.
  assert baselines.baseline_score("chunk", str(tmp_path), "f1") == \
      pytest.approx(75.0)
  row = report.baseline_row(["rte", "sts"], {"rte": 52.0, "sts": 0.0})
  table = report.markdown({"tasks": ["rte", "sts"], "objectives": {},
                           "seeds": 3, "budget_flops": 1.0, "machine": "cpu",
                           "baseline": row})
  assert "| baseline (no text) | - | - | - | 52.0 | 0.0 | 26.0 | 52.0 | - |" \
      in table
