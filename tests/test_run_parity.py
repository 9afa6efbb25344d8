"""benchmarks/original_parity/run_parity.py pretrain: a run whose last
eval is recorded is skipped on any machine (a fresh one has no
checkpoints to find it done by), the others run in the plan's order."""

import argparse
import os

from tests import parity_scripts

HERE = parity_scripts.HERE
run_parity = parity_scripts.load("run_parity")
collect = parity_scripts.load("collect_parity")


def test_recorded_runs_are_skipped(tmp_path, monkeypatch):
  plan = os.path.join(HERE, "plan_electric.json")
  steps = run_parity.load_plan(plan)["pretrain"]["num_train_steps"]
  done = tmp_path / "pretrain" / "original_seed1"
  done.mkdir(parents=True)
  (done / f"step_{steps}.json").write_text("{}")
  partial = tmp_path / "pretrain" / "ours_seed1"  # evals short of the end
  partial.mkdir()
  (partial / "step_500.json").write_text("{}")
  ran = []
  for side in ("original", "ours"):
    monkeypatch.setattr(run_parity, f"pretrain_{side}",
                        lambda args, plan, seed, name, record, side=side:
                        ran.append(record))
  run_parity.pretrain(argparse.Namespace(plan=plan, records=str(tmp_path),
                                         only=None))
  assert ran == ["ours_seed1", "original_seed2", "ours_seed2"]


def test_the_original_evaluators_table_pairs_each_seed(tmp_path):
  """collect_parity's one-evaluator table: ours under the original's
  evaluator (orig_eval/) minus the original's run of the same seed."""
  import json
  losses = {("pretrain", "original", 1): 6.0, ("pretrain", "original", 2): 6.2,
            ("orig_eval", "ours_origorder_fp32", 1): 6.05,
            ("orig_eval", "ours_origorder_fp32", 2): 6.5}
  for (kind, side, seed), loss in losses.items():
    folder = tmp_path / kind / f"{side}_seed{seed}"
    folder.mkdir(parents=True)
    (folder / "step_500.json").write_text(json.dumps({
        "global_step": 500, "masked_lm_loss": loss, "masked_lm_accuracy": 0.1,
        "disc_auc_real_tokens": 0.5, "disc_loss_real_tokens": 0.3,
        "disc_auc": 0.6, "disc_loss": 0.4}))
  runs = collect.read_pretraining(str(tmp_path))
  lines = collect.original_evaluator_table(str(tmp_path), runs)
  row = [line for line in lines if line.startswith("| 500 ")][-1]  # MLM loss
  # Means 6.1 and 6.275; per seed +0.05, +0.30; ranges [6.0, 6.2] and
  # [6.05, 6.5] overlap.
  assert row == ("| 500 | 6.1000 [6.0000, 6.2000] | 6.2750 [6.0500, 6.5000] "
                 "| +0.1750 | +0.0500, +0.3000 | yes |")


def test_ours_originit_starts_from_the_originals_initial_weights(
    tmp_path, monkeypatch):
  """Side ours_originit: the original's --init-only checkpoint of the same
  seed, made once, is its init_checkpoint; plain ours has none."""
  import json
  plan = run_parity.load_plan(os.path.join(HERE, "plan_small.json"))
  made, argvs = [], []

  def original_pretrain(args, plan, name, seed, *flags):
    made.append((name, seed, flags))
    folder = tmp_path / "models" / name
    folder.mkdir(parents=True)
    (folder / "model.ckpt-0.index").write_text("")
  monkeypatch.setattr(run_parity, "_original_pretrain", original_pretrain)
  monkeypatch.setattr(run_parity.subprocess, "run",
                      lambda argv, **kw: argvs.append(argv))
  for name in ("_train_log_from_stdout", "_copy_records"):
    monkeypatch.setattr(run_parity, name, lambda *a, **kw: None)
  args = argparse.Namespace(data_dir=str(tmp_path), plan="plan_small.json")
  for record in ("ours_originit_seed2", "ours_originit_seed2", "ours_seed2"):
    run_parity.pretrain_ours(args, plan, 2, "small_" + record, record)
  assert made == [("small_originit_seed2", 2, ("--init-only",))]
  trained = [json.loads(a[a.index("--hparams") + 1]) for a in argvs
             if a[1].endswith("run_pretraining.py")]
  start = str(tmp_path / "models" / "small_originit_seed2" / "model.ckpt-0")
  assert [h.get("init_checkpoint") for h in trained] == [start, start, None]
  assert all(h["seed"] == 2 for h in trained)


def test_a_new_side_plots_in_a_colour_of_its_own(tmp_path, monkeypatch):
  """A side given only its OURS label plots, its seeds in one colour that
  no other side has."""
  from matplotlib.axes import Axes
  monkeypatch.setitem(collect.OURS, "ours_new", "ours, new")
  monkeypatch.setattr(collect, "PRETRAIN_SIDES",
                      collect.PRETRAIN_SIDES + ("ours_new",))
  record = {"masked_lm_loss": 6.0, "masked_lm_accuracy": 0.1,
            "disc_auc": 0.5, "disc_loss": 0.3}
  runs = {side: {seed: {"eval": {250: record, 500: record},
                        "train": {100: 27.0, 200: 26.0}} for seed in (1, 2)}
          for side in ("original", "ours", "ours_new")}
  drawn = []
  plot = Axes.plot
  monkeypatch.setattr(Axes, "plot", lambda self, *a, **k: (
      drawn.append((k.get("label"), k["color"])), plot(self, *a, **k))[1])
  path = tmp_path / "curves.png"
  collect.plot(runs, ["a CPU"], str(path))
  assert path.stat().st_size > 0
  colours, side = {}, None
  for label, colour in drawn:  # a side's first seed carries its label
    side = label.split(" (")[0] if label else side
    colours.setdefault(side, set()).add(colour)
  assert set(colours) == {"original", "ours", "ours, new"}
  new = colours["ours, new"]
  assert len(new) == 1 and not new & (colours["original"] | colours["ours"])
