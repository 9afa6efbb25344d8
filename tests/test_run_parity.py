"""benchmarks/original_parity/run_parity.py pretrain: a run whose last
eval is recorded is skipped on any machine (a fresh one has no
checkpoints to find it done by), the others run in the plan's order."""

import argparse
import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.join(ROOT, "benchmarks", "original_parity")
_spec = importlib.util.spec_from_file_location(
    "run_parity", os.path.join(HERE, "run_parity.py"))
run_parity = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_parity)


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
