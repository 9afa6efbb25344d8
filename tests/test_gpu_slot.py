"""The GPU slot's prepared command (gpu_slot.sh -> run_gpu_slot.py), end to
end on the CPU with a micro model in bf16 mixed precision, TensorFlow
blocked as on the slot; the weights it returns load on the CPU side
(--init-checkpoint)."""

import filecmp
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from interop import npz_weights
from interop.weights import export_weights
from loading import sources
from loading.runs import restore_model
from pretrain.multi_seed import seed_config
from tests import slot_data

ROOT = slot_data.ROOT
slot_env = slot_data.slot_env


def run_slot(env, *flags, timeout=900):
  return subprocess.run(["bash", os.path.join(ROOT, "gpu_slot.sh"), *flags],
                        env=env, capture_output=True, text=True,
                        timeout=timeout, cwd=ROOT)


@pytest.fixture(scope="module")
def slot_run(tmp_path_factory):
  root = tmp_path_factory.mktemp("slot")
  data_dir = slot_data.build_data(str(root / "data"))
  slot_data.export_arrays(data_dir, str(root / "arrays"))
  slot_data.export_tasks(data_dir, str(root / "arrays"))
  out = str(root / "out")
  env = slot_env(str(root), OUT=out, SLOT_USE_INSTALLED_KERAS="1",
                 SLOT_DATA=str(root / "arrays"))
  done = run_slot(
      env, "--size", "tiny", "--batch", "8", "--chunk", "5",
      "--measure-calls", "1", "--train-seconds", "8", "--eval-steps", "2",
      "--hf-steps", "1", "--time-limit", "1200", "--precision", "bfloat16",
      "--finetune-seeds", "2", "--checkpoints", "2",
      "--hparams", json.dumps(slot_data.MICRO))
  assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
  with open(os.path.join(out, "slot.json")) as f:
    return out, json.load(f), done.stdout


def test_the_command_measures_trains_and_reports(slot_run):
  out, result, stdout = slot_run
  assert result["tensorflow_imported"] is False
  assert result["platform"] == "cpu" and result["peak_bf16_tflops"] > 0
  hf = result["hf_pytorch_electra"]
  assert "step_s" in hf or "error" in hf
  by_name = {e["objective"]: e for e in result["objectives"]}
  assert sorted(by_name) == ["electra", "mlm"]
  for e in by_name.values():
    assert e["precision"] == "bfloat16"  # the slot's mixed precision
    assert e["steps"] == e["planned_steps"] > 0 and e["steps"] % 5 == 0
    assert e["seq_per_s"] > 0 and 0 < e["mfu"] < 1
    assert np.isfinite(e["last_train_logs"]["loss"])
    assert e["warmup_steps"] == round(0.1 * e["steps"])
    # The held-out curve: half way and at the end (--checkpoints 2).
    assert len(e["curve"]) == 2 and e["curve"][-1]["global_step"] == (
        e["steps"])
    assert e["curve"][0]["global_step"] < e["steps"]
  # Equal FLOPs, up to the last chunk of steps.
  flops = [e["train_flops"] for e in by_name.values()]
  chunk_flops = max(5 * e["train_flops_per_step"] for e in by_name.values())
  assert abs(flops[0] - flops[1]) <= chunk_flops
  assert 0 <= by_name["electra"]["eval"]["disc_auc"] <= 1
  assert "masked_lm_accuracy" in by_name["mlm"]["eval"]
  if "step_s" in hf:
    assert by_name["electra"]["speedup_vs_hf_pytorch"] > 0
  assert "MFU" in stdout and "targets:" in stdout
  # What comes back from a slot: at most 8 files of 16 MiB, 2 folders deep.
  files = [os.path.join(b, f) for b, _, fs in os.walk(out) for f in fs]
  assert len(files) <= 8
  assert all(os.path.getsize(f) <= 16 * 2 ** 20 for f in files)
  assert os.path.isfile(os.path.join(out, "slot.log"))
  assert {os.path.relpath(os.path.dirname(f), out) for f in files} == {
      ".", "electra_tiny", "bert_tiny"}
  # Also kept on the slot, where a later call on the warm machine finds them.
  kept = os.path.join(os.path.dirname(out), "slot_weights")
  for e in result["objectives"]:
    # Trained by run_pretraining.py: its run directory, config and marks.
    assert e["model_dir"] == "$TMPDIR/slot_runs/" + e["folder"]
    run_dir = os.path.join(os.path.dirname(out), "slot_runs", e["folder"])
    with open(os.path.join(run_dir, "pretrain_config.json")) as f:
      saved = json.load(f)
    assert saved["num_train_steps"] == e["steps"]
    assert saved["num_warmup_steps"] == e["warmup_steps"]
    assert os.path.isfile(os.path.join(
        run_dir, f"ckpt-{e['curve'][0]['global_step']}.npz"))
    # The record names the place by its name; here $TMPDIR is out's parent.
    assert e["weights_dir"] == "$TMPDIR/slot_weights/" + e["folder"]
    for name in e["weights"]:
      assert filecmp.cmp(os.path.join(kept, name), os.path.join(out, name),
                         shallow=False)


def test_the_record_names_no_path_of_this_machine(slot_run):
  out, result, _ = slot_run

  def strings(value):
    if isinstance(value, dict):
      value = list(value.values())
    if isinstance(value, list):
      return [s for v in value for s in strings(v)]
    return [value] if isinstance(value, str) else []

  # Paths are relative to the repository (the test's data lies outside
  # it, so "../"), or named by their place.
  assert not [s for s in strings(result) if os.path.isabs(s)]
  assert out not in json.dumps(result)
  assert "$OUT" in result["command"]  # the folder, by its name
  assert all(e["weights_dir"].startswith("$TMPDIR/")
             for e in result["objectives"])


@pytest.mark.parametrize("folder,objective,roles", [
    ("electra_tiny", "electra", ["discriminator", "generator"]),
    ("bert_tiny", "mlm", ["generator"])])
def test_returned_weights_load_for_fine_tuning(slot_run, folder, objective,
                                               roles):
  path = os.path.join(slot_run[0], folder)
  source = sources.open_source(path)
  assert source.kind == "npz" and source.config.objective == objective
  assert source.config.model_hparam_overrides["hidden_size"] == 32
  assert os.path.isfile(source.config.vocab_file)
  manifest, saved = npz_weights.read(path)
  assert manifest["dtype"] == "float16" and sorted(saved) == roles
  assert manifest["step"] == next(
      e["steps"] for e in slot_run[1]["objectives"]
      if e["objective"] == objective)
  model = restore_model(sources.find_pretrained(path))  # TF, as fine-tuning
  for role in roles:
    for name, value in export_weights(model, role).items():
      np.testing.assert_array_equal(value, saved[role][name], err_msg=name)
  features = model.dummy_features(2)
  out = model(features, training=False)
  assert np.isfinite(float(out["loss"]))


def test_the_command_refuses_without_wheels_or_data(tmp_path):
  env = slot_env(str(tmp_path), OUT=str(tmp_path / "out"),
                 SLOT_WHEELS=str(tmp_path / "no_wheels"))
  done = run_slot(env, timeout=60)
  assert done.returncode == 2
  assert "no keras wheel" in done.stderr and "prepare_gpu_slot.py" in (
      done.stderr)
  env = slot_env(str(tmp_path), OUT=str(tmp_path / "out"),
                 SLOT_USE_INSTALLED_KERAS="1",
                 SLOT_DATA=str(tmp_path / "no_data"))
  done = run_slot(env, timeout=60)
  assert done.returncode == 2 and "no pretraining arrays" in done.stderr
  env.pop("OUT")
  done = run_slot(env, timeout=60)
  assert done.returncode == 2 and "set OUT" in done.stderr


def test_a_failure_keeps_what_was_measured(slot_run, tmp_path):
  arrays = os.path.join(os.path.dirname(slot_run[0]), "arrays")
  out = str(tmp_path / "out")
  env = slot_env(str(tmp_path), OUT=out, SLOT_USE_INSTALLED_KERAS="1",
                 SLOT_DATA=arrays)
  # A range the config checks once the runs are planned, after the peak
  # (an unknown objective is refused before anything: test_slot_flags).
  done = run_slot(env, "--size", "tiny", "--hparams",
                  '{"learning_rate": -1.0}', "--hf-steps", "0", timeout=300)
  assert done.returncode == 2
  assert "error: hparam 'learning_rate' must be > 0" in (done.stderr +
                                                         done.stdout)
  with open(os.path.join(out, "slot.json")) as f:
    result = json.load(f)
  assert "learning_rate" in result["error"]
  assert result["peak_bf16_tflops"] > 0 and not result["tensorflow_imported"]


def test_two_seeds_train_in_one_step(tmp_path):
  """--seeds-per-step 2: BERT's two pretraining seeds as one vmapped
  program (run_pretraining.py --seeds), each written and evaluated as its
  own run; MFU per run, per step and over the slot."""
  arrays = str(tmp_path / "arrays")
  slot_data.export_arrays(slot_data.build_data(str(tmp_path / "data")),
                          arrays)
  out = str(tmp_path / "out")
  env = slot_env(str(tmp_path), OUT=out, SLOT_USE_INSTALLED_KERAS="1",
                 SLOT_DATA=arrays)
  done = run_slot(env, "--size", "tiny", "--objectives", "mlm:2",
                  "--seeds-per-step", "2", "--batch", "8", "--chunk", "5",
                  "--measure-calls", "1", "--budget-flops", "1e9",
                  "--eval-steps", "2", "--hf-steps", "0",
                  "--finetune-seeds", "0", "--time-limit", "1200",
                  "--hparams", json.dumps(slot_data.MICRO), timeout=600)
  assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
  with open(os.path.join(out, "slot.json")) as f:
    result = json.load(f)
  assert result["tensorflow_imported"] is False
  first, second = result["objectives"]
  assert [first["folder"], second["folder"]] == ["bert_tiny",
                                                 "bert_tiny.seed2"]
  for e in (first, second):
    assert e["unit"] == "mlm+mlm.seed2" and e["seeds_per_step"] == 2
    assert e["steps"] == 5 and e["unit_mfu"] == pytest.approx(2 * e["mfu"])
    assert e["eval"]["global_step"] == 5
  assert first["step_s"] == second["step_s"]  # one step for both
  assert first["eval"] != second["eval"]  # their own seeds
  assert result["aggregate_mfu"] == pytest.approx(
      (first["model_flops"] + second["model_flops"]) / first["train_s"] /
      (result["peak_bf16_tflops"] * 1e12))
  assert "for 2 seeds (mlm+mlm.seed2)" in done.stdout
  assert "aggregate MFU" in done.stdout
  weights = [npz_weights.read(os.path.join(out, e["folder"]))[1]
             for e in (first, second)]
  name = sorted(weights[0]["generator"])[0]
  assert not np.array_equal(weights[0]["generator"][name],
                            weights[1]["generator"][name])


def test_a_later_call_fills_in_one_task_and_seed(slot_run, tmp_path):
  """--pretrained with --finetune-tasks and --finetune-first-seed: only the
  trials a time limit skipped, the same dev outputs' names; an unknown task
  is one line."""
  arrays = os.path.join(os.path.dirname(slot_run[0]), "arrays")
  out = str(tmp_path / "out")
  env = slot_env(str(tmp_path), OUT=out, SLOT_USE_INSTALLED_KERAS="1",
                 SLOT_DATA=arrays)
  weights = os.path.join(slot_run[0], "electra_tiny")
  done = run_slot(env, "--pretrained", weights, "--finetune-tasks", "rte",
                  "--finetune-first-seed", "2", "--finetune-seeds", "2",
                  "--precision", "bfloat16", timeout=600)
  assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
  with np.load(os.path.join(out, "finetune_outputs.npz")) as data:
    assert sorted({k.rsplit("/", 1)[0] for k in data.files}) == [
        "electra_tiny/rte/1235"]
  done = run_slot(env, "--pretrained", weights, "--finetune-tasks",
                  "rte,mnli", timeout=300)
  assert done.returncode == 2
  assert "error: --finetune-tasks: mnli not in the fine-tuning arrays" in (
      done.stdout + done.stderr)


def _dev_gold(task, n):
  """The first n dev labels of a GLUE slice, read straight from the TSV."""
  from tests.shared_data import SHARED  # pylint: disable=g-import-not-at-top
  folder, column = {"rte": ("RTE", "label"), "sts": ("STS-B", "score")}[task]
  with open(os.path.join(SHARED, "glue", folder, "dev.tsv")) as f:
    header, *rows = [line.rstrip("\n").split("\t") for line in f]
  values = [r[header.index(column)] for r in rows if r != [""]][:n]
  return (np.array([v == "not_entailment" for v in values], np.int64)
          if task == "rte" else np.array(values, np.float64))


def test_the_slot_fine_tunes_what_it_pretrained(slot_run):
  out, result, stdout = slot_run
  trials = result["finetune"]
  assert sorted({(t["model"], t["task"], t["seed"]) for t in trials}) == [
      (m, t, s) for m in ("bert_tiny", "electra_tiny") for t in ("rte", "sts")
      for s in (1234, 1235)]
  assert all(np.isfinite(t["final_loss"]) and t["steps"] > 0 for t in trials)
  # Steps as run_finetuning.py counts them: rows x epochs / batch (STS
  # trains on both orders of each pair).
  assert {t["task"]: t["steps"] for t in trials} == {"rte": 6, "sts": 12}
  with np.load(os.path.join(out, "finetune_outputs.npz")) as data:
    rows = {k: data[k].shape[0] for k in data.files}
  assert rows["electra_tiny/rte/1234/predictions"] == 32
  assert rows["bert_tiny/sts/1235/predictions"] == 32
  assert not result["tensorflow_imported"]


def test_collect_scores_with_each_tasks_metric(slot_run, tmp_path):
  import collect_gpu_slot  # pylint: disable=g-import-not-at-top
  from scipy import stats  # pylint: disable=g-import-not-at-top
  from sklearn.metrics import accuracy_score  # pylint: disable=g-import-not-at-top
  out = slot_run[0]
  arrays = os.path.join(os.path.dirname(out), "arrays", "finetune")
  target = str(tmp_path / "results")
  assert collect_gpu_slot.main([out, "--output-dir", target,
                                "--finetune-data", arrays]) == 0
  with open(os.path.join(target, "results.json")) as f:
    results = json.load(f)
  with np.load(os.path.join(out, "finetune_outputs.npz")) as data:
    outputs = {k: data[k] for k in data.files}
  rte, sts = _dev_gold("rte", 32), _dev_gold("sts", 32)
  for folder, name in (("electra_tiny", "electra"), ("bert_tiny", "mlm")):
    tasks = results["objectives"][name]["tasks"]
    expected_rte = [100 * accuracy_score(
        rte, outputs[f"{folder}/rte/{s}/predictions"]) for s in (1234, 1235)]
    # A constant prediction has no correlation: 0, as finetune/metrics.py
    # scores it (scipy's nan would poison the medians).
    expected_sts = [np.nan_to_num(100 * stats.spearmanr(
        sts, outputs[f"{folder}/sts/{s}/predictions"])[0])
                    for s in (1234, 1235)]
    np.testing.assert_allclose(tasks["rte"]["seeds"], expected_rte)
    np.testing.assert_allclose(tasks["sts"]["seeds"], expected_sts,
                               atol=1e-6)
    glue = [(a + b) / 2 for a, b in zip(expected_rte, expected_sts)]
    assert results["objectives"][name]["glue_score"] == pytest.approx(
        np.median(glue))
    assert results["objectives"][name]["steps"] > 0
  assert results["baseline"]["tasks"]["rte"]["median"] > 40
  with open(os.path.join(target, "results.md")) as f:
    table = f.read()
  assert "| electra |" in table and "baseline (no text)" in table
  assert "ELECTRA Table 1" in table
  # The final checkpoint carries the GLUE summary the plot draws.
  final = results["objectives"]["electra"]["checkpoints"][-1]
  assert final["glue_score"] == results["objectives"]["electra"]["glue_score"]
  assert "disc_auc" in final["eval"]
  # The folder it wrote holds what it needs to score everything again.
  assert collect_gpu_slot.main([target, "--output-dir", target]) == 0
  with open(os.path.join(target, "results.json")) as f:
    assert json.load(f) == results
  for name in ("glue_vs_flops.png", "pretrain_curves.png",
               "records/1/finetune_outputs.npz", "records/1/slot.json",
               "finetune.json"):
    assert os.path.getsize(os.path.join(target, name)) > 0


def test_collect_joins_slots_a_later_trial_replacing_an_earlier(
    slot_run, tmp_path, capsys):
  """A first call that pretrained and fine-tuned seed 1234, a second
  (--pretrained) that fine-tuned seed 1235 and redid one 1234 trial: scored
  together as one run of both seeds, the redone trial's outputs counting."""
  import collect_gpu_slot  # pylint: disable=g-import-not-at-top
  from sklearn.metrics import accuracy_score  # pylint: disable=g-import-not-at-top
  out, result, _ = slot_run
  arrays = os.path.join(os.path.dirname(out), "arrays", "finetune")
  with np.load(os.path.join(out, "finetune_outputs.npz")) as data:
    outputs = {k: data[k] for k in data.files}
  redone = "electra_tiny/rte/1234/predictions"
  first, second = tmp_path / "first", tmp_path / "second"
  parts = {first: ({k: v for k, v in outputs.items() if "/1234/" in k},
                   result),
           second: (dict({k: v for k, v in outputs.items() if "/1235/" in k},
                         **{redone: 1 - outputs[redone]}),
                    {k: v for k, v in result.items() if k != "objectives"})}
  for folder, (part, record) in parts.items():
    folder.mkdir()
    np.savez_compressed(folder / "finetune_outputs.npz", **part)
    (folder / "slot.json").write_text(json.dumps(record))
  target = str(tmp_path / "results")
  assert collect_gpu_slot.main([str(first), str(second), "--output-dir",
                                target, "--finetune-data", arrays]) == 0
  with open(os.path.join(target, "results.json")) as f:
    results = json.load(f)
  assert results["seeds"] == 2
  assert results["objectives"]["electra"]["steps"] == next(
      e["steps"] for e in result["objectives"] if e["folder"] ==
      "electra_tiny")
  rte = _dev_gold("rte", 32)
  assert results["objectives"]["electra"]["tasks"]["rte"]["seeds"][0] == (
      pytest.approx(100 * accuracy_score(rte, 1 - outputs[redone])))
  # Its records scored again from the folder it wrote, in the same order.
  assert collect_gpu_slot.main([target, "--output-dir", target]) == 0
  with open(os.path.join(target, "results.json")) as f:
    assert json.load(f) == results
  # Two records that pretrained the same run cannot be told apart (the
  # second written otherwise, so it is not a byte copy, which is refused
  # earlier: tests/test_slot_records.py).
  (second / "slot.json").write_text(json.dumps(result, indent=1))
  with pytest.raises(SystemExit) as failed:
    collect_gpu_slot.main([str(first), str(second), "--output-dir",
                           str(tmp_path / "fresh"), "--finetune-data", arrays])
  assert failed.value.code != 0
  assert not (tmp_path / "fresh").exists()
  assert "electra_tiny was pretrained by two of the records" in (
      capsys.readouterr().err)


def test_only_seeds_every_model_finished_are_compared():
  from comparison import slot_report  # pylint: disable=g-import-not-at-top
  full = {"rte": 50.0, "sts": 60.0}
  scores = {"a": {1: full, 2: full, 3: full}, "b": {1: full, 2: full,
                                                    3: {"rte": 55.0}}}
  kept, left_out = slot_report.complete_seeds(scores, ["rte", "sts"])
  assert kept == {"a": {1: full, 2: full}, "b": {1: full, 2: full}}
  assert left_out == 3  # a's seed 3 (two trials) and b's one
  table = slot_report.markdown({
      "tasks": ["rte"], "objectives": {}, "seeds": 2, "budget_flops": 1e12,
      "machine": "m", "finetune_trials_left_out": 3})
  assert "Left out: 3 fine-tuning trials" in table


def test_a_plan_of_objectives_and_seeds_at_a_fixed_budget():
  from slot import flags  # pylint: disable=g-import-not-at-top
  from slot import plan  # pylint: disable=g-import-not-at-top
  later = flags.parse_args(["--out", "x", "--size", "tiny",
                            "--objectives", "mlm:3-3,electra_15:2-3"])
  assert plan.plan(later) == [
      ("electra_15.seed2", "electra_15", 2, "electra_15_tiny.seed2"),
      ("mlm.seed3", "mlm", 3, "bert_tiny.seed3"),
      ("electra_15.seed3", "electra_15", 3, "electra_15_tiny.seed3")]
  args = flags.parse_args(["--out", "x", "--size", "tiny",
                           "--objectives", "mlm:2,electra,replace_mlm"])
  assert plan.plan(args) == [
      ("mlm", "mlm", 1, "bert_tiny"), ("electra", "electra", 1,
                                        "electra_tiny"),
      ("replace_mlm", "replace_mlm", 1, "replace_mlm_tiny"),
      ("mlm.seed2", "mlm", 2, "bert_tiny.seed2")]
  # The ablation runs on ELECTRA's preset with its own objective, seed 2
  # one above seed 1 in FOLDER.seed2 (as run_comparison.py plans them).
  config = plan.slot_config("replace_mlm", args, _Arrays(), "d", "m")
  assert config.objective == "replace_mlm" and config.data_dir == "d"
  second = seed_config(plan.slot_config("mlm", args, _Arrays(), "d",
                                        "bert_tiny"), 2)
  assert second.seed == config.seed + 1
  assert second.model_dir == "bert_tiny.seed2"  # plan()'s folder
  entries = [{"train_flops_per_step": 5.95e11},
             {"train_flops_per_step": 3.3e11}]
  assert plan.budget_steps(entries, 5.9512e15, 100) == [10000, 18000]


class _Arrays:
  meta = {"max_seq_length": 32}

  @staticmethod
  def num_examples(split):
    return 64


DEADLINE = """
import json, os, sys, time
from slot import pretrain_phase
from slot.clock import Clock
data_dir, model_dir, micro = sys.argv[1], sys.argv[2], sys.argv[3]
hparams = dict(json.loads(micro), num_train_steps=10 ** 6,
               iterations_per_loop=5, train_batch_size=8, max_seq_length=32,
               num_warmup_steps=0, mixed_precision="float32")
stopped = pretrain_phase._run_script(
    ["--data-dir", data_dir, "--model-dir", model_dir, "--hparams",
     json.dumps(hparams)], time.time(), Clock())
print("STOPPED", stopped, flush=True)
"""


def test_the_deadline_makes_the_script_save_and_stop(tmp_path):
  """The slot's time limit is the script's preemption: SIGTERMs from the
  deadline on (here at once, before its loop is ready) make
  run_pretraining.py save and stop, far short of its 10^6 steps, with its
  weights at the saved step; the slot's process goes on."""
  data_dir = str(tmp_path / "dd")
  slot_data.export_arrays(slot_data.build_data(str(tmp_path / "data")),
                          os.path.join(data_dir, "pretrain_arrays"))
  model_dir = str(tmp_path / "run")
  env = slot_env(str(tmp_path), KERAS_BACKEND="jax")
  done = subprocess.run(
      [sys.executable, "-c", DEADLINE, data_dir, model_dir,
       json.dumps(slot_data.MICRO)], env=env, capture_output=True,
      text=True, timeout=600, cwd=ROOT)
  assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
  assert "STOPPED True" in done.stdout
  assert "SIGTERM: saved step" in done.stdout, done.stdout[-2000:]
  with open(os.path.join(model_dir, "checkpoint.json")) as f:
    step = int(json.load(f)["latest"][len("ckpt-"):-len(".npz")])
  assert 0 < step < 10 ** 6 and step % 5 == 0
  assert npz_weights.read_manifest(model_dir)["step"] == step
