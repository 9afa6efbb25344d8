"""The slot's plan (slot/plan.py): a budget that does not fit the
measured speeds is cut to what fits; an objective's own preset and
folders."""

import pytest

from slot.plan import fit_budget


def test_a_budget_that_does_not_fit_is_cut_to_what_fits():
  entries = [{"train_flops_per_step": 1e12, "step_s": 0.02},
             {"train_flops_per_step": 5e11, "step_s": 0.01}]
  # 1e15 FLOPs: 1,000 steps x 20 ms + 2,000 x 10 ms = 40 s.
  assert fit_budget(entries, 1e15, 60) == (1e15, pytest.approx(40))
  budget, need = fit_budget(entries, 1e15, 30)
  assert need == pytest.approx(40) and budget == pytest.approx(0.75e15)
  assert fit_budget(entries, 1e15, -5)[0] == 0


def test_gdes_has_a_preset_and_folders_of_its_own():
  """configs/electra_gdes_tiny.json: ELECTRA-tiny with GDES embeddings, a
  name the slot's flags take and its folders keep."""
  import argparse  # pylint: disable=g-import-not-at-top
  import json as json_lib  # pylint: disable=g-import-not-at-top
  import os  # pylint: disable=g-import-not-at-top
  from comparison.plan import preset  # pylint: disable=g-import-not-at-top
  from slot import plan  # pylint: disable=g-import-not-at-top
  from slot.flags import objective_seeds  # pylint: disable=g-import-not-at-top
  from tests.slot_data import ROOT  # pylint: disable=g-import-not-at-top
  values = preset("electra_gdes", "tiny")
  with open(os.path.join(ROOT, "configs", "electra_tiny.json")) as f:
    electra = json_lib.load(f)
  assert values == dict(electra, weight_sharing="gdes")
  assert objective_seeds("electra:3,electra_gdes:3") == [
      ("electra", 1, 3), ("electra_gdes", 1, 3)]
  args = argparse.Namespace(objectives="electra,electra_gdes:2", size="tiny")
  assert [r[3] for r in plan.plan(args)] == [
      "electra_tiny", "electra_gdes_tiny", "electra_gdes_tiny.seed2"]
