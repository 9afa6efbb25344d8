"""`xla: true` (finetune/trainer.py): the TensorFlow train step compiled with
XLA gives the default step's losses over 3 steps from the same weights and
batches, at two batch lengths (a program each), and is refused beside a
strategy. An untrained tiny ELECTRA (tests/tiny_runs.py) on a slice of
the real RTE."""

import dataclasses
import os

import numpy as np
import pytest

from finetune import padding
from finetune.config import FinetuningConfig
from finetune.optimization import create_optimizer
from finetune.trainer import FinetuningRunner
from tests import tiny_runs
from util.errors import UserError

HPARAMS = {"train_examples_limit": 32, "eval_examples_limit": 16,
           "num_train_epochs": 1.0, "train_batch_size": 16,
           "max_seq_length": 64, "warmup_proportion": 0.0,
           # No dropout: XLA's random streams are not the default step's.
           "model_hparam_overrides": {"hidden_dropout_prob": 0.0,
                                      "attention_probs_dropout_prob": 0.0}}


@pytest.fixture(scope="module")
def config(tmp_path_factory):
  root = tiny_runs.tiny_run_with_rte(tmp_path_factory.mktemp("xla"))
  return FinetuningConfig(data_dir=root, model_name="pre",
                          task_names="rte", output_dir=os.path.join(root, "out"),
                          **HPARAMS)


def losses(config, batches):
  """The losses before each step, from the model `_build` makes with the
  config's seed (the same encoder and head init every time)."""
  runner = FinetuningRunner(config)
  # pylint: disable=protected-access
  model = runner._build(config.seed)
  optimizer = create_optimizer(config, model.trainable_variables,
                               runner.model_config.num_hidden_layers, 10)
  features, _ = runner.data.train_data()["rte"]
  step = runner._train_step(model, optimizer, "rte",
                            runner.data.batches(features, 16,
                                                0).element_spec)
  assert step._jit_compile is config.xla  # noqa: SLF001  (wired through)
  return [float(step(b)) for b in batches]


def test_the_xla_step_gives_the_default_steps_losses(config):
  features, _ = FinetuningRunner(config).data.train_data()["rte"]
  rows = {k: np.asarray(v)[:16] for k, v in features.items()}
  batches = [rows, padding.cut(rows, 32), rows]  # two lengths
  default = losses(config, batches)
  compiled = losses(dataclasses.replace(config, xla=True), batches)
  np.testing.assert_allclose(compiled, default, atol=1e-5)
  assert default[2] != default[0]  # the steps trained


def test_xla_beside_a_strategy_is_one_line(config):
  with pytest.raises(UserError, match="xla compiles the one-device"):
    dataclasses.replace(config, xla=True, strategy="mirrored").validate()
