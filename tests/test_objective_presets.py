"""Every objective's presets load, and each trains on the test corpus: the
loss falls over a few dozen steps, eval reports its metrics (PLL for the
one-pass scorers), and the model variants train end to end."""

import glob
import json
import os

import numpy as np
import pytest

import run_pretraining
from configure_pretraining import PretrainingConfig
from pretrain.objectives import build_model
from util.config import parse_config
from tests.pretraining_runs import ROOT
from tests.pretraining_runs import eval_results_from
from tests.pretraining_runs import hparams
from tests.pretraining_runs import losses_from
from tests.pretraining_runs import variables

OBJECTIVES = ("mlm", "electra", "electric", "script")
SIZES = ("tiny", "small", "base", "large")


def preset(name):
  return os.path.join(ROOT, "configs", f"{name}.json")


def test_every_objective_has_a_preset_of_every_size():
  for objective in OBJECTIVES:
    for size in SIZES:
      config, _ = parse_config(PretrainingConfig, [
          "--data-dir", "/tmp/unused", "--model-name", "m",
          "--hparams", preset(f"{objective}_{size}")])
      config.validate()
      assert (config.objective, config.model_size) == (objective, size)
  assert len(glob.glob(os.path.join(ROOT, "configs", "*.json"))) >= 16


def test_lite_electra_preset_has_the_reports_parameter_count():
  """Lite ELECTRA report Table V: ALE-Small 4.8M vs ELECTRA-Small 13.5M."""
  counts = {}
  for name in ("ale_small", "electra_small"):
    config = PretrainingConfig(**json.load(open(preset(name))),
                               vocab_size=30522, data_dir="/x",
                               model_name="m")
    config.validate()
    model = build_model(config)
    model.build_variables()
    counts[name] = sum(int(np.prod(v.shape))
                       for v in model.pair.discriminator.trainable_variables)
  assert abs(counts["ale_small"] / 4.8e6 - 1) < 0.01
  assert abs(counts["electra_small"] / 13.5e6 - 1) < 0.01


def train(data_dir, name, *extra):
  run_pretraining.main(["--data-dir", data_dir, "--model-name", name,
                        *extra])
  return os.path.join(data_dir, "models", name)


# A few dozen steps of the tiny preset at the test corpus' length.
SHORT = dict(max_seq_length=64, train_batch_size=16, eval_batch_size=16,
             num_train_steps=40, num_warmup_steps=5, iterations_per_loop=10,
             save_checkpoints_steps=40, num_eval_steps=2,
             shuffle_buffer_size=100)


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_tiny_preset_loss_falls_and_eval_reports(data_dir, capsys,
                                                 objective):
  train(data_dir, f"preset_{objective}", "--hparams",
        preset(f"{objective}_tiny"), "--hparams", json.dumps(SHORT),
        "--do-eval")
  out = capsys.readouterr().out
  losses = losses_from(out)
  assert len(losses) == 4 and np.all(np.isfinite(losses)), out
  assert losses[-1] < 0.9 * losses[0], losses
  assert "for the whole run (ELECTRA appendix E" in out
  results = eval_results_from(out)
  expected = {
      "mlm": ("masked_lm_accuracy", "masked_lm_loss"),
      "electra": ("masked_lm_accuracy", "disc_auc", "disc_precision",
                  "disc_recall"),
      "electric": ("cloze_accuracy", "nce_auc", "pll_per_token"),
      "script": ("masked_lm_accuracy", "disc_auc", "pll_per_token"),
  }[objective]
  for key in expected:
    assert key in results and np.isfinite(results[key]), key
  if "pll_per_token" in results:
    assert results["pll_per_token"] < 0


# Variants combined in four runs, to keep the suite short.
@pytest.mark.parametrize("extra", [
    {"objective": "electra_15", "two_tower_generator": True},
    {"objective": "replace_mlm", "unigram_generator": True},
    {"objective": "all_tokens_mlm", "weight_sharing": "gdes",
     "cross_layer_sharing": True},
    {"training_algorithm": "adversarial", "weight_sharing": "none"},
])
def test_variants_train(data_dir, capsys, extra):
  name = "variant_" + "_".join(f"{k}_{v}" for k, v in extra.items())
  train(data_dir, name, "--hparams", hparams(num_train_steps=20, **extra))
  out = capsys.readouterr().out
  losses = losses_from(out)
  assert len(losses) == 2 and np.all(np.isfinite(losses)), out
  if "training_algorithm" in extra:
    assert "policy_loss" in out and "baseline_loss" in out


def generator_side(weights):
  """Everything but the discriminator (and RNG states)."""
  return {k: v for k, v in weights.items()
          if "discriminator" not in k and "seed_generator" not in k}


def test_two_stage_freezes_the_generator_and_resumes_in_stage_two(data_dir,
                                                                  capsys):
  """Stage one trains the generator alone; at the switch the discriminator
  is initialised from it and the generator stays frozen, also across a
  resume (ELECTRA section 3.2)."""
  two_stage = dict(training_algorithm="two_stage", generator_hidden_size=1.0,
                   two_stage_generator_steps=20, save_checkpoints_steps=20,
                   keep_checkpoint_max=5)
  model_dir = train(data_dir, "two_stage", "--hparams",
                    hparams(num_train_steps=40, **two_stage))
  out = capsys.readouterr().out
  assert "two-stage training: step 20" in out
  stage_one, stage_two = out.split("two-stage training")
  assert "disc_loss 0.0000" in stage_one.splitlines()[-2]
  assert "disc_loss 0.0000" not in stage_two
  at_switch = variables(os.path.join(model_dir, "ckpt-20"))
  disc = {k: v for k, v in at_switch.items() if "discriminator" in k and
          "layer_0" in k and "query" in k and "kernel" in k}
  gen = {k: v for k, v in at_switch.items() if "generator" in k and
         "layer_0" in k and "query" in k and "kernel" in k}
  np.testing.assert_array_equal(next(iter(disc.values())),
                                next(iter(gen.values())))
  train(data_dir, "two_stage", "--hparams",
        hparams(num_train_steps=60, **two_stage))
  assert "resumed from" in capsys.readouterr().out
  final = variables(model_dir)
  frozen = generator_side(at_switch)
  assert len(frozen) > 10  # embeddings, generator encoder, MLM head
  for key, value in frozen.items():
    np.testing.assert_array_equal(final[key], value, err_msg=key)
  assert not np.array_equal(final[next(iter(disc))],
                            at_switch[next(iter(disc))])
