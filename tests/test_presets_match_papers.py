"""Every preset in configs/ against the papers' hyperparameter tables,
transcribed here by hand with the table each row comes from."""

import json
import os

import pytest

from configure_pretraining import PretrainingConfig
from model.config import GENERATOR_MULTIPLIER
from model.config import MODEL_PRESETS
from tests.pretraining_runs import ROOT

# Dissertation Table 5.1 (= ELECTRA paper Table 6): shapes per size.
TABLE_5_1_SHAPES = {
    "small": dict(num_hidden_layers=12, hidden_size=256,
                  intermediate_size=1024, num_attention_heads=4,
                  embedding_size=128),
    "base": dict(num_hidden_layers=12, hidden_size=768,
                 intermediate_size=3072, num_attention_heads=12,
                 embedding_size=768),
    "large": dict(num_hidden_layers=24, hidden_size=1024,
                  intermediate_size=4096, num_attention_heads=16,
                  embedding_size=1024),
}
TABLE_5_1_GENERATOR = {"small": 0.25, "base": 1 / 3, "large": 0.25}

# preset: (source, {hparam: value}). max_seq_length: ELECTRA section 3.3
# (Small shortens BERT-Base's 512 to 128; Base and Large keep 512).
PAPER = {
    "electra_small": ("dissertation Table 5.1", dict(
        learning_rate=5e-4, train_batch_size=128, num_train_steps=1_000_000,
        num_warmup_steps=10000, mask_prob=0.15, generator_hidden_size=0.25,
        max_seq_length=128, weight_decay_rate=0.01, adam_epsilon=1e-6)),
    "mlm_small": ("dissertation Table 5.1 (BERT steps 1.45M)", dict(
        learning_rate=5e-4, train_batch_size=128, num_train_steps=1_450_000,
        num_warmup_steps=10000, mask_prob=0.15, max_seq_length=128)),
    "electra_base": ("dissertation Table 5.1", dict(
        learning_rate=2e-4, train_batch_size=256, num_train_steps=766_000,
        num_warmup_steps=10000, mask_prob=0.15, generator_hidden_size=1 / 3,
        max_seq_length=512)),
    "mlm_base": ("dissertation Table 5.1 (BERT steps 1M)", dict(
        learning_rate=2e-4, train_batch_size=256, num_train_steps=1_000_000,
        num_warmup_steps=10000, mask_prob=0.15, max_seq_length=512)),
    "electra_large": ("dissertation Table 5.1", dict(
        learning_rate=2e-4, train_batch_size=2048, num_train_steps=400_000,
        num_warmup_steps=10000, mask_prob=0.25, generator_hidden_size=0.25,
        max_seq_length=512)),
    "mlm_large": ("dissertation Table 5.1 (BERT-Large baseline: 464K)", dict(
        learning_rate=2e-4, train_batch_size=2048, num_train_steps=464_000,
        num_warmup_steps=10000, max_seq_length=512)),
    "electric_base": ("Electric Table 3 (proposal transformers 1/4)", dict(
        learning_rate=5e-4, train_batch_size=256, num_train_steps=700_000,
        num_warmup_steps=10000, mask_prob=0.15, generator_hidden_size=0.25,
        max_seq_length=512, weight_decay_rate=0.01)),
    "script_small": ("SCRIPT Table 4; steps Table 2 caption", dict(
        learning_rate=5e-4, train_batch_size=128, num_train_steps=1_000_000,
        num_warmup_steps=10000, mask_prob=0.15, disc_weight=50.0,
        max_seq_length=128)),
    "script_base": ("SCRIPT Table 4; steps Table 2 caption", dict(
        learning_rate=2e-4, train_batch_size=256, num_train_steps=766_000,
        num_warmup_steps=10000, mask_prob=0.15, disc_weight=50.0,
        max_seq_length=512)),
    "ale_small": ("Lite-ELECTRA report Table V; temperature section IV.B",
                  dict(optimizer="lamb", learning_rate=5e-4,
                       train_batch_size=1024, num_train_steps=162_000,
                       num_warmup_steps=10000, mask_prob=0.15,
                       generator_hidden_size=0.25, max_seq_length=128,
                       cross_layer_sharing=True, temperature=0.8)),
}


def load(name):
  with open(os.path.join(ROOT, "configs", f"{name}.json")) as f:
    config = PretrainingConfig(**json.load(f), data_dir="/x", model_name="m")
  config.validate()
  return config


@pytest.mark.parametrize("name", sorted(PAPER))
def test_preset_matches_its_paper_table(name):
  source, expected = PAPER[name]
  config = load(name)
  for key, value in expected.items():
    got = getattr(config, key)
    assert got == pytest.approx(value), f"{name}.{key}: {got} ({source})"


def test_sizes_are_table_5_1():
  for size, shapes in TABLE_5_1_SHAPES.items():
    for key, value in shapes.items():
      assert MODEL_PRESETS[size][key] == value, (size, key)
    assert GENERATOR_MULTIPLIER[size] == pytest.approx(
        TABLE_5_1_GENERATOR[size])


@pytest.mark.parametrize("size", ["small", "base", "large"])
def test_generator_size_defaults_to_table_5_1_without_a_preset(size):
  config = PretrainingConfig(model_size=size, data_dir="/x", model_name="m")
  config.validate()
  assert config.generator_hidden_size == pytest.approx(
      TABLE_5_1_GENERATOR[size])
