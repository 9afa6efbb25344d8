"""Dynamic masking of token batches, as the original release masks
(its pretrain/pretrain_helpers.py `mask`), in keras.ops only.

The same function runs inside tf.data (TensorFlow backend) and inside a
jitted JAX step: randomness comes in as uniform noise that the caller draws
(stateless, seeded by (seed, batch index), so a resumed run sees the masks
of an uninterrupted one).

Like the original:
  * each row predicts round(mask_prob * its real tokens, [CLS]/[SEP]
    included), at least 1 and at most max_predictions;
  * the positions are drawn uniformly from the candidates (real tokens but
    [CLS], [SEP], [MASK]) *with* replacement, so a position may be picked
    twice; both slots count in the MLM loss;
  * "electra" scheme: each slot shows [MASK] with mask_replace_prob, else
    keeps its token; a position shows [MASK] if any of its slots does.
Deviations (docs/mirroring.md): the "bert" scheme (80% [MASK], 10% random,
10% keep; ELECTRA section 3.2: "BERT (including our implementation)")
replaces the "electra" scheme for the MLM objectives that ask for it; a
row without candidates predicts nothing (the original indexes out of
range).
"""

import dataclasses

from keras import ops

from model.positions import first_slot_values

NUM_NOISE = 3  # uniform [B, P] draws: positions, actions, random ids


@dataclasses.dataclass(frozen=True)
class MaskingConfig:
  mask_prob: float
  max_predictions: int
  vocab_size: int
  cls_id: int
  sep_id: int
  mask_id: int
  scheme: str = "electra"  # "electra" or "bert"
  mask_replace_prob: float = 0.85  # electra scheme: share set to [MASK]


def mask_batch(features, config, noise):
  """Adds masked inputs and targets to a batch of examples.

  Args:
    features: dict with int32 `input_ids`, `input_mask`, `segment_ids` [B, T].
    config: a MaskingConfig.
    noise: float32 [NUM_NOISE, B, max_predictions], uniform in [0, 1).

  Returns:
    features plus `masked_input_ids` [B, T], `scoring_mask` (float32
    [B, T], 1 at candidate tokens), `masked_lm_positions`, `masked_lm_ids`
    (int32 [B, P], 0 in unused slots) and `masked_lm_weights` (float32
    [B, P], 1 in the row's first num_to_predict slots).
  """
  ids = ops.cast(features["input_ids"], "int32")
  input_mask = ops.cast(features["input_mask"], "int32")
  seq_len = ops.shape(ids)[1]
  candidates = ops.not_equal(input_mask, 0)
  for special in (config.cls_id, config.sep_id, config.mask_id):
    candidates = ops.logical_and(candidates, ops.not_equal(ids, special))
  cand = ops.cast(candidates, "int32")
  num_candidates = ops.sum(cand, axis=-1)  # [B]

  num_tokens = ops.cast(ops.sum(input_mask, axis=-1), "float32")
  num_to_predict = ops.cast(ops.round(num_tokens * config.mask_prob), "int32")
  num_to_predict = ops.clip(num_to_predict, 1, config.max_predictions)
  num_to_predict = ops.where(num_candidates > 0, num_to_predict, 0)
  slots = ops.arange(config.max_predictions, dtype="int32")[None, :]
  weights_i = ops.cast(slots < num_to_predict[:, None], "int32")  # [B, P]

  # With replacement, uniform over candidates: slot j takes the k-th
  # candidate, k = floor(u * num_candidates); its position is the number of
  # positions whose running candidate count is <= k.
  u_pos, u_action, u_random = noise[0], noise[1], noise[2]
  k = ops.floor(u_pos * ops.cast(num_candidates, "float32")[:, None])
  k = ops.minimum(ops.cast(k, "int32"),
                  ops.maximum(num_candidates - 1, 0)[:, None])  # [B, P]
  running = ops.cumsum(cand, axis=-1)  # [B, T]
  positions = ops.sum(ops.cast(running[:, None, :] <= k[:, :, None], "int32"),
                      axis=-1)
  positions = positions * weights_i  # unused slots: 0, as the original
  targets = ops.take_along_axis(ids, positions, axis=1) * weights_i

  # What each slot shows the model.
  mask_id = ops.cast(config.mask_id, "int32")
  if config.scheme == "bert":  # 80% [MASK], 10% random token, 10% keep
    random_ids = ops.minimum(
        ops.cast(ops.floor(u_random * config.vocab_size), "int32"),
        config.vocab_size - 1)
    shows_mask = u_action < 0.8
    shown = ops.where(shows_mask, mask_id,
                      ops.where(u_action < 0.9, random_ids, targets))
  else:  # ELECTRA: [MASK] or keep
    shows_mask = u_action < config.mask_replace_prob
    shown = ops.where(shows_mask, mask_id, targets)
  hits = ops.one_hot(positions, seq_len, dtype="int32") * weights_i[..., None]
  picked = ops.max(hits, axis=1)  # [B, T]
  any_mask = ops.max(hits * ops.cast(shows_mask, "int32")[..., None], axis=1)
  masked_ids = ops.where(
      any_mask > 0, mask_id,
      ops.where(picked > 0, first_slot_values(hits, shown), ids))
  return dict(features, masked_input_ids=masked_ids,
              # Tokens a pseudo-log-likelihood sums over: no [CLS]/[SEP].
              scoring_mask=ops.cast(candidates, "float32"),
              masked_lm_positions=positions, masked_lm_ids=targets,
              masked_lm_weights=ops.cast(weights_i, "float32"))


def config_from(config, meta):
  """The MaskingConfig of a PretrainingConfig over a dataset's metadata
  (its vocab_size and special_ids): one for both input paths (pretrain/
  data.py's tf.data, pretrain/arrays.py's NumPy arrays)."""
  ids = meta["special_ids"]
  return MaskingConfig(
      mask_prob=config.mask_prob,
      max_predictions=config.max_predictions_per_seq,
      vocab_size=meta["vocab_size"], cls_id=ids["cls"], sep_id=ids["sep"],
      mask_id=ids["mask"], scheme=config.mask_scheme,
      mask_replace_prob=config.mask_replace_prob)
