"""Adding an objective is one file: a toy objective defined here, and
nowhere else, trains, reports its FLOPs, exports and scores through the
unchanged scripts (issue 18's proof).

ToyCloze is a masked LM whose head runs at every position, with a one-pass
"PLL" of its own: log p(x_t) read off the clean text in one pass.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

import export_model
import run_pretraining
import run_scoring
from configure_pretraining import PretrainingConfig
from model import GENERATOR
from model import Encoder
from model import MaskedLMHead
from model.positions import gather_positions
from pretrain import flops
from pretrain import losses
from pretrain.objectives import REGISTRY
from pretrain.objectives.base import ALL
from pretrain.objectives.base import MAIN
from pretrain.objectives.base import Part
from pretrain.objectives.base import PretrainingModel
from pretrain.objectives.mlm import masked_lm_export_head
from tests.pretraining_runs import hparams
from tests.pretraining_runs import losses_from


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


# Subclassing registered it at import: undone here, so that the tests this
# worker runs besides this one never see it, whatever their order.
REGISTRY.pop("toy_cloze")


@pytest.fixture(autouse=True)
def registered():
  REGISTRY["toy_cloze"] = ToyCloze
  yield
  REGISTRY.pop("toy_cloze")  # other tests' objective lists are the real ones


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
