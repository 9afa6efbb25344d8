"""Dynamic in-graph masking of token batches (TensorFlow, inside tf.data).

Positions are chosen afresh for every batch (dissertation 5.2.3: "dynamic
token masking"), with stateless RNG seeded by (seed, batch index), so a
resumed run sees the same masks as an uninterrupted one.
"""

import dataclasses

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class MaskingConfig:
  mask_prob: float
  max_predictions: int
  vocab_size: int
  cls_id: int
  sep_id: int
  mask_id: int
  pad_id: int
  scheme: str = "electra"  # "electra" or "bert"
  mask_replace_prob: float = 0.85  # electra scheme: share set to [MASK]


def mask_batch(features, config, seed):
  """Adds masked inputs and targets to a batch of examples.

  Args:
    features: dict with int32 `input_ids`, `input_mask`, `segment_ids` [B, T].
    config: a MaskingConfig.
    seed: int32 [2] stateless seed.

  Returns:
    features plus `masked_input_ids` [B, T], `scoring_mask` (float32
    [B, T], 1 at real non-special tokens), `masked_lm_positions`,
    `masked_lm_ids` (int32 [B, P]) and `masked_lm_weights` (float32 [B, P],
    0 where a row had fewer than P picks).
  """
  ids = features["input_ids"]
  seeds = tf.random.experimental.stateless_split(seed, 3)
  specials = tf.constant([config.cls_id, config.sep_id, config.mask_id,
                          config.pad_id], ids.dtype)
  candidates = tf.logical_and(
      tf.not_equal(features["input_mask"], 0),
      tf.reduce_all(tf.not_equal(ids[..., None], specials), axis=-1))
  num_candidates = tf.reduce_sum(tf.cast(candidates, tf.float32), axis=-1)
  num_picks = tf.minimum(
      tf.cast(tf.round(num_candidates * config.mask_prob), tf.int32),
      config.max_predictions)
  # At least one pick wherever there is a candidate.
  num_picks = tf.where(num_candidates > 0, tf.maximum(num_picks, 1), 0)

  # Uniform choice without replacement: top-k of random scores.
  scores = tf.random.stateless_uniform(tf.shape(ids), seeds[0])
  scores = tf.where(candidates, scores, -1.0)
  k = min(config.max_predictions, ids.shape[-1])
  _, positions = tf.math.top_k(scores, k=k)
  pick_range = tf.range(k)[None, :]
  weights = tf.cast(pick_range < num_picks[:, None], tf.float32)
  if k < config.max_predictions:  # only when seq_len < max_predictions
    pad = [[0, 0], [0, config.max_predictions - k]]
    positions, weights = tf.pad(positions, pad), tf.pad(weights, pad)
  positions = tf.cast(positions, tf.int32) * tf.cast(weights, tf.int32)
  targets = tf.gather(ids, positions, batch_dims=1) * tf.cast(weights,
                                                              ids.dtype)

  # What each picked position shows the model.
  action = tf.random.stateless_uniform(tf.shape(positions), seeds[1])
  if config.scheme == "bert":  # 80% [MASK], 10% random token, 10% keep
    random_ids = tf.random.stateless_uniform(
        tf.shape(positions), seeds[2], maxval=config.vocab_size,
        dtype=ids.dtype)
    shown = tf.where(action < 0.8, tf.cast(config.mask_id, ids.dtype),
                     tf.where(action < 0.9, random_ids, targets))
  else:  # ELECTRA: most picks become [MASK], the rest keep their token
    shown = tf.where(action < config.mask_replace_prob,
                     tf.cast(config.mask_id, ids.dtype), targets)
  hits = tf.one_hot(positions, tf.shape(ids)[1], dtype=ids.dtype)
  hits = hits * tf.cast(weights, ids.dtype)[..., None]  # [B, P, T]
  replaced = tf.reduce_max(hits, axis=1)
  masked_ids = tf.where(replaced > 0,
                        tf.reduce_sum(hits * shown[..., None], axis=1), ids)
  return dict(features, masked_input_ids=masked_ids,
              # Tokens a pseudo-log-likelihood sums over: no [CLS]/[SEP].
              scoring_mask=tf.cast(candidates, tf.float32),
              masked_lm_positions=positions, masked_lm_ids=targets,
              masked_lm_weights=weights)
