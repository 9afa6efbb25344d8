"""Every preset's losses on fixed inputs and FLOPs per step, pinned to values recorded before
the issue-18 restructure, so that moving code cannot change behaviour.

Each preset keeps its objective switches (objective, generator size and
kind, weight sharing, temperature, loss weights...) on a micro model; the
weights are set by variable path (not creation order) and the sampling seed
is the preset's own. Regenerate only for an intended behaviour change:
  PIN_LOSSES=write python -m pytest tests/test_pinned_losses.py
"""

import glob
import json
import os
import re

import numpy as np
import pytest

from configure_pretraining import PretrainingConfig
from pretrain.objectives import build_model
from pretrain import flops
from tests.tiny_models import MICRO
from tests.tiny_models import PICKS
from tests.tiny_models import SEQ
from tests.tiny_models import SPECIALS
from tests.tiny_models import VOCAB
from tests.tiny_models import make_batch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PINNED = os.path.join(ROOT, "tests", "data", "pinned_losses.json")
# Each preset's variable paths, recorded before the generator +
# discriminator pair became a component: a checkpoint written before a
# restructure must restore after it.
PINNED_PATHS = os.path.join(ROOT, "tests", "data", "pinned_paths.json")
FILES = sorted(os.path.basename(p)[:-5] for p in
               glob.glob(os.path.join(ROOT, "configs", "*.json")))
# Objectives and switches no preset file holds, on top of electra_small.
VARIANTS = {
    "v_electra_15": {"objective": "electra_15"},
    "v_replace_mlm": {"objective": "replace_mlm"},
    "v_all_tokens_mlm": {"objective": "all_tokens_mlm"},
    "v_uniform_generator": {"uniform_generator": True},
    "v_unigram_generator": {"unigram_generator": True},
    "v_two_tower_generator": {"two_tower_generator": True},
    "v_sharing_none": {"weight_sharing": "none"},
    "v_sharing_all": {"weight_sharing": "all", "generator_hidden_size": 1.0},
    "v_sharing_gdes": {"weight_sharing": "gdes"},
    "v_adversarial": {"training_algorithm": "adversarial"},
    "v_disallow_correct": {"disallow_correct": True},
    "v_bert_masking_mlm": {"objective": "mlm", "mask_scheme": "bert"},
    "v_cross_layer_sharing": {"cross_layer_sharing": True},
    # Electric's losses before q's loss and the noise ratio mirrored the
    # original (2026-12-02): still one hparam away.
    "v_electric_before_mirroring": {"objective_hparams": {
        "cloze_loss_tokens": "all", "noise_ratio": "per_sequence"}},
}
# The preset file a variant starts from; electra_small unless named here.
VARIANT_FILES = {"v_electric_before_mirroring": "electric_small"}
PRESETS = sorted(FILES + list(VARIANTS))
# Shapes and schedule only; every objective switch stays the preset's.
SHAPE_KEYS = ("model_size", "max_seq_length", "max_predictions_per_seq",
              "model_hparam_overrides", "vocab_size", "embedding_size")


def preset_file(name):
  if name in VARIANTS:
    return VARIANT_FILES.get(name, "electra_small")
  return name


def preset_model(name):
  """The preset's model on the micro shapes, its variables created."""
  file = preset_file(name)
  with open(os.path.join(ROOT, "configs", f"{file}.json")) as f:
    preset = {k: v for k, v in json.load(f).items() if k not in SHAPE_KEYS}
  preset.update(VARIANTS.get(name, {}))
  h = PretrainingConfig(**preset, data_dir="/tmp/unused", model_name="m")
  h.model_size, h.vocab_size = "tiny", VOCAB
  h.max_seq_length, h.max_predictions_per_seq = SEQ, PICKS
  h.model_hparam_overrides = dict(MICRO)
  h.validate()
  counts = np.arange(VOCAB, dtype=np.int64) + 1
  model = build_model(h, token_counts=counts, special_ids=SPECIALS)
  model.build_variables()
  return model


def preset_losses(name):
  model = preset_model(name)
  rng = np.random.RandomState(0)
  for v in sorted(model.weights, key=lambda v: v.path):
    if v.dtype not in ("float32", "bfloat16", "float16") or not v.trainable:
      continue
    value = rng.normal(0.0, 0.5, tuple(v.shape))
    if v.path.endswith("gamma"):
      value += 1.0
    v.assign(value.astype(np.float32))
  out = model(make_batch(), training=False)
  return {k: float(np.asarray(out[k])) for k in type(model).LOG_KEYS
          if k in out}


def preset_flops(name):
  """Training FLOPs per step at the preset's own sizes (pretrain/flops.py)."""
  file = preset_file(name)
  with open(os.path.join(ROOT, "configs", f"{file}.json")) as f:
    preset = dict(json.load(f), **VARIANTS.get(name, {}))
  h = PretrainingConfig(**preset, data_dir="/tmp/unused", model_name="m",
                        vocab_size=30522)
  h.validate()
  return float(flops.train_flops_per_step(h))


def layer_paths(model):
  """Its variables' paths (what checkpoint keys are made of) with layer
  numbers folded, and how many there are."""
  paths = [v.path for v in model.variables]
  return len(paths), sorted({re.sub(r"layer_\d+", "layer_#", p)
                             for p in paths})


def pinned():
  with open(PINNED) as f:
    return json.load(f)


def test_every_preset_is_pinned():
  if os.environ.get("PIN_LOSSES") == "write":
    with open(PINNED, "w") as f:
      json.dump({n: dict(preset_losses(n), flops_per_step=preset_flops(n))
                 for n in PRESETS}, f, indent=1,
                sort_keys=True)
      f.write("\n")
  assert sorted(pinned()) == PRESETS


@pytest.mark.parametrize("name", PRESETS)
def test_preset_losses_are_unchanged(name):
  expected = pinned()[name]
  got = dict(preset_losses(name), flops_per_step=preset_flops(name))
  assert sorted(got) == sorted(expected)
  for key, value in expected.items():
    np.testing.assert_allclose(got[key], value, rtol=2e-4, atol=2e-5,
                               err_msg=f"{name}: {key}")


@pytest.mark.parametrize("name", PRESETS)
def test_checkpoint_paths_are_unchanged(name):
  with open(PINNED_PATHS) as f:
    expected = json.load(f)[name]
  count, paths = layer_paths(preset_model(name))
  assert paths == expected["paths"]
  assert count == expected["count"]
