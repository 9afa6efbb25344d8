"""Model side of PLL scoring (keras.ops only): what each estimator computes
on one batch of rows. `features` holds input_ids (the text), masked_input_ids
(the text with one token replaced, by [MASK] or a candidate), input_mask and
segment_ids [B, T]; positions [B, 1] is where the replacement sits and
targets [B, 1] the original token there. pll.py builds the rows.
"""

from keras import ops

from model import DISCRIMINATOR
from model.positions import gather_positions
from pretrain import losses

NEG_INF = -1e9


def one_pass(model, features, positions):
  """Per-token PLL [B, P] at `positions`, in one pass on the clean text
  (Electric's -E(x)_t, SCRIPT's log p(real_t | x)): the objective's own."""
  return model.one_pass_pll(features, positions)


def masked_lm_logits(model, features, positions):
  """Vocabulary logits [B, P, V] at `positions` of masked_input_ids: the
  masked LM of a BERT or SCRIPT model, else the generator's; the vocabulary
  projection runs at `positions` only."""
  return model.masked_lm_logits(features, positions)


def masked_lm(model, features, positions, targets):
  """Salazar et al.: log softmax at the masked position of the original
  token, [B, P]."""
  logits = masked_lm_logits(model, features, positions)
  return losses.log_prob_at(logits, targets)


def generator_candidates(model, features, positions, targets, k,
                         excluded_ids):
  """ELECTRA appendix G, step one (P = 1): the generator's view of the
  masked position.

  Returns ids [B, k + 1]: the generator's top k over the vocabulary less
  `excluded_ids` ([PAD], [CLS], [SEP], [MASK]), then the original token;
  log p_G of each [B, k + 1] (the generator's full softmax); and `valid`
  [B, k + 1] (0 for the last slot when the original is already in the top
  k, so no candidate counts twice).
  """
  logits = ops.cast(masked_lm_logits(model, features, positions)[:, 0],
                    "float32")
  log_pg = logits - ops.logsumexp(logits, axis=-1, keepdims=True)
  vocab = ops.shape(logits)[-1]
  banned = ops.max(ops.one_hot(excluded_ids, vocab), axis=0) > 0
  ranked = ops.where(ops.expand_dims(banned, 0), NEG_INF, log_pg)
  _, top = ops.top_k(ranked, k)
  original = ops.cast(targets, "int32")  # [B, 1]
  ids = ops.concatenate([ops.cast(top, "int32"), original], axis=-1)
  in_top = ops.any(ops.equal(top, original), axis=-1, keepdims=True)
  valid = ops.concatenate([ops.ones_like(top, "float32"),
                           1.0 - ops.cast(in_top, "float32")], axis=-1)
  return ids, ops.take_along_axis(log_pg, ids, axis=-1), valid


def discriminator_logits(model, features, positions):
  """ELECTRA's "replaced" logit [B, P] at `positions` of masked_input_ids
  (the text with a candidate in place); the head runs there only."""
  encoder, head = model.networks()[DISCRIMINATOR]
  hidden = encoder(features["masked_input_ids"], features["input_mask"],
                   features["segment_ids"], training=False)
  return ops.cast(head(gather_positions(hidden, positions)), "float32")
