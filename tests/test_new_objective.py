"""Adding an objective is one file: a toy objective defined here, and
nowhere else, trains, reports its FLOPs, exports and scores through the
unchanged scripts (issue 18's proof).

ToyCloze is a masked LM whose head runs at every position, with a one-pass
"PLL" of its own: log p(x_t) read off the clean text in one pass.
ToyDetector brings what no objective here has: an hparam of its own
(objective_hparams) and a head of its own, priced by its own HeadCost.
"""

import dataclasses
import json
import os

import numpy as np
import pytest
import keras
import tensorflow as tf
from keras import ops

import export_model
import run_pretraining
import run_scoring
from configure_pretraining import PretrainingConfig
from model import DISCRIMINATOR
from model import GENERATOR
from model import Encoder
from model import MaskedLMHead
from model.positions import gather_positions
from model.config import get_model_config
from pretrain import flops
from pretrain import losses
from pretrain.objectives import REGISTRY
from pretrain.objectives.base import ALL
from pretrain.objectives.base import HeadCost
from pretrain.objectives.base import MAIN
from pretrain.objectives.base import Part
from pretrain.objectives.base import PretrainingModel
from pretrain.objectives.mlm import masked_lm_export_head
from tests.pretraining_runs import hparams
from tests.pretraining_runs import losses_from
from tests.script_checks import error_line


class ToyCloze(PretrainingModel):
  """MLM loss at the masked positions; the head priced at every token."""

  NAMES = ("toy_cloze",)
  LOG_KEYS = ("loss",)
  MASK_SCHEME = "bert"
  PLL_METHOD = "toy"  # a one-pass estimator of its own
  MAIN_NETWORK = "generator"  # interop's role of a masked LM

  def __init__(self, hparams, config, **kwargs):
    super().__init__(hparams, **kwargs)
    self.encoder = Encoder(config, name="encoder")
    self.mlm_predictions = MaskedLMHead(config, name="mlm_predictions")

  def networks(self):  # what export and fine-tuning read
    return {GENERATOR: (self.encoder, self.mlm_predictions)}

  @classmethod
  def flops_parts(cls, hparams, disc, gen):
    return [Part("encoder", disc, ALL, MAIN),
            Part("mlm_head", disc, ALL, MAIN)]

  def logits(self, ids, features, positions):
    hidden = self.encoder(ids, features["input_mask"],
                          features["segment_ids"])
    return self.mlm_predictions(gather_positions(hidden, positions),
                                self.encoder.embeddings.token_table)

  def call(self, features, training=None):
    logits = self.logits(features["masked_input_ids"], features,
                         features["masked_lm_positions"])
    loss, _ = losses.masked_lm_loss(logits, features["masked_lm_ids"],
                                    features["masked_lm_weights"])
    return {"loss": loss}

  def export_head(self):
    return masked_lm_export_head(self.encoder, self.mlm_predictions)

  def pll_methods(self):
    return ("toy", "mlm")

  def masked_lm_logits(self, features, positions):
    return self.logits(features["masked_input_ids"], features, positions)

  def one_pass_pll(self, features, positions):
    logits = self.logits(features["input_ids"], features, positions)
    return losses.log_softmax_at(logits, gather_positions(
        features["input_ids"], positions))


@dataclasses.dataclass
class ToyDetectorHparams:
  detection_weight: float = 1.0  # the loss is this x the flags' BCE
  RANGES = {"detection_weight": ">= 0"}


class TokenFlagHead(keras.layers.Layer):
  """A logit per token: was it changed by the masking?"""

  COST = HeadCost(paper=lambda m: 2 * m.hidden_size + 1,
                  matmul=lambda m: 2 * m.hidden_size)

  def __init__(self, **kwargs):
    super().__init__(**kwargs)
    self.dense = keras.layers.Dense(1, name="dense")

  def call(self, hidden):
    return ops.squeeze(self.dense(hidden), -1)


class ToyDetector(PretrainingModel):
  """Flags the tokens BERT's masking changed, at every position."""

  NAMES = ("toy_detector",)
  HPARAMS = ToyDetectorHparams
  LOG_KEYS = ("loss", "detection_loss")
  MASK_SCHEME = "bert"

  def __init__(self, hparams, config, **kwargs):
    super().__init__(hparams, **kwargs)
    self.encoder = Encoder(config, name="encoder")
    self.flags = TokenFlagHead(name="flags")

  def networks(self):
    return {DISCRIMINATOR: (self.encoder, None)}

  @classmethod
  def flops_parts(cls, hparams, disc, gen):
    return [Part("encoder", disc, ALL, MAIN),
            Part(TokenFlagHead.COST, disc, ALL, MAIN)]

  def call(self, features, training=None):
    hidden = self.encoder(features["masked_input_ids"],
                          features["input_mask"], features["segment_ids"])
    changed = ops.cast(ops.not_equal(features["masked_input_ids"],
                                     features["input_ids"]), "float32")
    token_losses = losses.sigmoid_cross_entropy(
        ops.cast(self.flags(hidden), "float32"), changed)
    loss = losses.weighted_mean(token_losses, ops.cast(
        features["input_mask"], "float32"))
    return {"loss": self.own_hparams.detection_weight * loss,
            "detection_loss": loss}


# Subclassing registered them at import: undone here, so that the tests
# this worker runs besides these never see them, whatever their order.
TOYS = {"toy_cloze": ToyCloze, "toy_detector": ToyDetector}
for _name in TOYS:
  REGISTRY.pop(_name)


@pytest.fixture(autouse=True)
def registered():
  REGISTRY.update(TOYS)
  yield
  for name in TOYS:  # other tests' objective lists are the real ones
    REGISTRY.pop(name)


def test_toy_objective_trains_counts_flops_exports_and_scores(
    data_dir, tmp_path, capsys):
  settings = json.loads(hparams(objective="toy_cloze", num_train_steps=20))
  run_pretraining.main(["--data-dir", data_dir, "--model-name", "toy",
                        "--hparams", json.dumps(settings)])
  out = capsys.readouterr().out
  losses_seen = losses_from(out)
  assert losses_seen and np.all(np.isfinite(losses_seen)), out

  # FLOPs: its own parts (the head at every token), not a masked LM's.
  config = PretrainingConfig(**settings, data_dir=data_dir, model_name="toy",
                             vocab_size=len(open(os.path.join(
                                 data_dir, "vocab.txt")).readlines()))
  config.validate()
  per_step = flops.train_flops_per_step(config)
  assert f"FLOPs: {per_step:.3g} per step" in out
  config.objective = "mlm"
  assert per_step > flops.train_flops_per_step(config)

  # Export: a SavedModel whose head is the objective's export_head.
  saved = str(tmp_path / "saved")
  export_model.main(["--data-dir", data_dir, "--model-name", "toy",
                     "--format", "savedmodel", "--output-dir", saved])
  loaded = tf.saved_model.load(saved)
  got = loaded.signatures["serve_text"](text=tf.constant(["the cat sat"]))
  assert "mlm_logits" in got and got["mlm_logits"].shape[-1] == (
      config.vocab_size)

  # Scoring: its own one-pass method is the default.
  source = tmp_path / "in.txt"
  source.write_text("the cat sat on the mat\n")
  capsys.readouterr()
  run_scoring.main(["--data-dir", data_dir, "--model-name", "toy",
                    "--input-file", str(source)])
  out, err = capsys.readouterr()
  assert "(toy)" in err and "1 pass per sentence" in err, err
  pll = float(out.splitlines()[1].split("\t")[0])
  assert np.isfinite(pll) and pll < 0


def test_an_objective_with_its_own_hparam_and_head(data_dir, capsys):
  """Its hparam reaches its loss and the run's record; its head's own
  HeadCost prices it; a misspelt or out-of-range hparam is one line."""
  def train(name, **own):
    settings = json.loads(hparams(objective="toy_detector",
                                  num_train_steps=10,
                                  objective_hparams=own))
    run_pretraining.main(["--data-dir", data_dir, "--model-name", name,
                          "--hparams", json.dumps(settings)])
    out = capsys.readouterr().out
    with open(os.path.join(data_dir, "models", name,
                           "pretrain_config.json")) as f:
      return settings, out, json.load(f)

  _, out, record = train("det")
  assert losses_from(out) and min(losses_from(out)) > 0, out
  assert record["objective_hparams"] == {"detection_weight": 1.0}
  settings, out, record = train("det0", detection_weight=0.0)
  assert losses_from(out) and set(losses_from(out)) == {0.0}, out
  assert record["objective_hparams"] == {"detection_weight": 0.0}

  config = PretrainingConfig(**settings, data_dir=data_dir, model_name="d",
                             vocab_size=len(open(os.path.join(
                                 data_dir, "vocab.txt")).readlines()))
  config.validate()
  disc = model_config_of(config)
  seq = config.max_seq_length
  expected = flops.PAPER_TRAIN_FACTOR * config.train_batch_size * (
      flops.encoder_forward_flops(disc, seq) +
      seq * (2 * disc.hidden_size + 1))
  assert flops.train_flops_per_step(config) == pytest.approx(expected)
  assert f"FLOPs: {expected:.3g} per step" in out

  def refused(**settings):
    return error_line(run_pretraining.main, [
        "--data-dir", data_dir, "--model-name", "bad",
        "--hparams", hparams(**settings)], capsys)
  assert "unknown hparam 'detection_weigth' in objective_hparams of " \
      "toy_detector; did you mean 'detection_weight'?" in refused(
          objective="toy_detector",
          objective_hparams={"detection_weigth": 2.0})
  assert "'detection_weight' must be >= 0, got -1" in refused(
      objective="toy_detector", objective_hparams={"detection_weight": -1})
  assert "objective electra has no hparams of its own" in refused(
      objective="electra", objective_hparams={"detection_weight": 1.0})


def model_config_of(config):
  return get_model_config(config.model_size, config.vocab_size,
                          config.model_hparam_overrides)
