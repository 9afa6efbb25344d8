"""Tiny models for the model, objective and backend tests: their sizes, one
hand-made batch, and a validated tiny ELECTRA config."""

import numpy as np

from configure_pretraining import PretrainingConfig

VOCAB, SEQ, PICKS = 50, 12, 3
PAD, CLS, SEP, MASK = 0, 2, 3, 4
SPECIALS = (0, 1, 2, 3)
MICRO = dict(hidden_size=16, intermediate_size=32, num_attention_heads=2,
             embedding_size=8, num_hidden_layers=1, hidden_dropout_prob=0.0,
             attention_probs_dropout_prob=0.0)


def make_batch():
  """Three rows: full; padded (8 real tokens, one unused pick slot); two
  segments (one unused pick slot). [MASK] at the weighted picks only."""
  rng = np.random.RandomState(7)
  ids = rng.randint(8, VOCAB, size=(3, SEQ)).astype(np.int32)
  ids[:, 0] = CLS
  ids[0, 11] = SEP
  ids[1, 7], ids[1, 8:] = SEP, PAD
  ids[2, 5], ids[2, 11] = SEP, SEP
  input_mask = np.ones((3, SEQ), np.int32)
  input_mask[1, 8:] = 0
  segment_ids = np.zeros((3, SEQ), np.int32)
  segment_ids[2, 6:] = 1
  positions = np.array([[2, 5, 9], [1, 6, 0], [3, 8, 0]], np.int32)
  weights = np.array([[1, 1, 1], [1, 1, 0], [1, 1, 0]], np.float32)
  labels = np.take_along_axis(ids, positions, 1) * (weights > 0)
  masked = ids.copy()
  for b, p in zip(*np.nonzero(weights)):
    masked[b, positions[b, p]] = MASK
  scoring = (input_mask > 0) & ~np.isin(ids, (CLS, SEP, PAD))
  return {"input_ids": ids, "input_mask": input_mask,
          "segment_ids": segment_ids, "masked_input_ids": masked,
          "masked_lm_positions": positions,
          "masked_lm_ids": labels.astype(np.int32),
          "masked_lm_weights": weights,
          "scoring_mask": scoring.astype(np.float32)}


def electra_hparams(**kw):
  h = PretrainingConfig(data_dir="/tmp/unused", model_name="m",
                        model_size="tiny", vocab_size=60, max_seq_length=16,
                        model_hparam_overrides=dict(
                            hidden_size=16, intermediate_size=32,
                            embedding_size=8, num_attention_heads=2),
                        **kw)
  h.validate()
  return h
