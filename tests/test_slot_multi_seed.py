"""The slot's several-seeds step (pretrain/multi_seed.py through
slot/units.py): MultiSeedTrainer.train, stopped at a mark and resumed as
the slot does, ends each seed where its own JaxTrainer.train ends, and
its eval is the seed's own; a budget that does not fit the measured
speeds is cut to what fits (slot/plan.py fit_budget)."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from slot.plan import fit_budget

SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    from pretrain import arrays
    from pretrain.config import PretrainingConfig
    from pretrain.jax_trainer import JaxTrainer
    from pretrain.multi_seed import MultiSeedTrainer
    model_dir = sys.argv[1]
    loaded = arrays.synthetic(64, 32, 300, seed=3, heldout_examples=16)
    def trainer(seed):
      config = PretrainingConfig(
          pretrain_tfrecords="synthetic", model_dir=model_dir, seed=seed,
          objective="electra", max_seq_length=32, train_batch_size=8,
          eval_batch_size=8, learning_rate=1e-3, num_warmup_steps=2,
          num_train_steps=10, num_eval_steps=2, mixed_precision="float32",
          model_size="tiny", model_hparam_overrides={
              "hidden_size": 32, "intermediate_size": 64,
              "num_attention_heads": 2, "embedding_size": 16})
      config.validate()
      return JaxTrainer(config, loaded)
    out = {"alone": {}, "together": {}}
    for seed in (7, 8):
      t = trainer(seed)
      history = t.train(10, chunk=5)
      out["alone"][seed] = {"state": [np.asarray(v).tolist() for v in
                                      t.state[0][:3]],
                            "loss": history[-1]["loss"],
                            "eval": t.evaluate()}
    multi = MultiSeedTrainer([trainer(7), trainer(8)])
    measured = multi.measure(5, calls=1)
    histories = multi.train(10, chunk=5, stop_at=5)  # a mark, as the slot
    mid = [t.evaluate() for t in multi.trainers]
    more = multi.train(10, chunk=5)
    for seed, t, h in zip((7, 8), multi.trainers, more):
      out["together"][seed] = {"state": [np.asarray(v).tolist() for v in
                                         t.state[0][:3]],
                               "loss": h[-1]["loss"], "eval": t.evaluate(),
                               "step": t.step}
    out["measured"] = measured
    out["mid_steps"] = [e["global_step"] for e in mid]
    print("RESULTS " + json.dumps(out))
""")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  from tests import slot_data  # pylint: disable=g-import-not-at-top
  root = tmp_path_factory.mktemp("multi_seed_slot")
  env = slot_data.slot_env(str(root), KERAS_BACKEND="jax")
  env.pop("XLA_FLAGS", None)
  done = subprocess.run([sys.executable, "-c", SCRIPT, str(root / "m")],
                        env=env, capture_output=True, text=True,
                        timeout=900, cwd=slot_data.ROOT)
  assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
  line = [l for l in done.stdout.splitlines() if l.startswith("RESULTS ")]
  return json.loads(line[-1][len("RESULTS "):])


@pytest.mark.parametrize("seed", ["7", "8"])
def test_each_seed_of_the_step_trains_as_alone(runs, seed):
  alone, together = runs["alone"][seed], runs["together"][seed]
  assert together["step"] == 10
  for a, b in zip(alone["state"], together["state"]):
    np.testing.assert_allclose(np.array(b), np.array(a), rtol=0, atol=1e-5)
  assert together["loss"] == pytest.approx(alone["loss"], abs=1e-5)
  for key, value in alone["eval"].items():
    assert together["eval"][key] == pytest.approx(value, abs=1e-5), key
  other = runs["alone"]["8" if seed == "7" else "7"]
  assert not np.allclose(np.array(other["state"][0]),
                         np.array(alone["state"][0]), atol=1e-3)


def test_the_step_is_timed_for_all_seeds(runs):
  measured = runs["measured"]
  assert measured["seeds_per_step"] == 2 and measured["chunk"] == 5
  assert measured["seq_per_s"] == pytest.approx(2 * 8 / measured["step_s"])
  assert runs["mid_steps"] == [5, 5]


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
