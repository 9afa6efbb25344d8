"""Electric's losses against the original release's (issue 68).

tests/reference/electric_losses.npz holds what the original's
PretrainingModel (electric_objective, a tiny model) computed from one batch:
q's per-token NLL, log q of each shown token, the energy head's output, the
labels, and its cloze, NCE and total losses (record_original.py item 8).
Ours composes the same losses from those same inputs with its own code:
its candidates (masking), its cloze weights and its noise ratio.
"""

import os

import numpy as np
import pytest

from pretrain import losses
from pretrain import masking
from pretrain.objectives.electric import ElectricHparams
from pretrain.objectives.electric import cloze_mle_loss
from pretrain.objectives.electric import log_noise_ratio

REF = np.load(os.path.join(os.path.dirname(__file__), "reference",
                           "electric_losses.npz"))


def our_features():
  features = {k: REF[k] for k in ("input_ids", "input_mask", "segment_ids")}
  config = masking.MaskingConfig(mask_prob=float(REF["mask_prob"]),
                                 max_predictions=2, vocab_size=200,
                                 cls_id=101, sep_id=102, mask_id=103)
  noise = np.random.RandomState(0).uniform(
      size=(masking.NUM_NOISE, 3, 2)).astype(np.float32)
  return {k: np.asarray(v) for k, v in
          masking.mask_batch(features, config, noise).items()}


def our_losses(own):
  f = our_features()
  mask = REF["input_mask"].astype(np.float32)
  cloze = float(cloze_mle_loss(own, REF["cloze_nll"], f))
  logits = np.asarray(losses.electric_logits(
      REF["energy"], REF["log_q"],
      log_noise_ratio(own, float(REF["mask_prob"]), f["masked_lm_weights"],
                      mask)))
  nce, _ = losses.replaced_token_detection_loss(
      logits, REF["nce_labels"].astype(np.float32), mask)
  total = REF["gen_weight"] * cloze + REF["disc_weight"] * float(nce)
  return f, cloze, logits, total


def test_candidates_are_the_originals_cloze_weights():
  np.testing.assert_array_equal(our_features()["scoring_mask"],
                                REF["cloze_weights"])


def test_default_losses_are_the_originals():
  _, cloze, logits, total = our_losses(ElectricHparams())
  np.testing.assert_allclose(cloze, REF["cloze_loss"], rtol=1e-6)
  np.testing.assert_allclose(logits, REF["nce_logits"], rtol=1e-6,
                             atol=1e-6)
  np.testing.assert_allclose(total, REF["total_loss"], rtol=1e-6)


@pytest.mark.parametrize("own", [
    ElectricHparams(cloze_loss_tokens="all"),
    ElectricHparams(noise_ratio="per_sequence")])
def test_the_old_behaviour_is_not_the_originals(own):
  """Each deviation (one hparam away) moves the total loss off the
  original's: the reference tells them apart."""
  _, _, _, total = our_losses(own)
  assert abs(total - REF["total_loss"]) > 1e-3
