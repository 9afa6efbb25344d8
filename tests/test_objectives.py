"""Every pretraining objective against an independent NumPy reference.

Each test builds a tiny model, randomises its weights (so that biases,
LayerNorm scales and every table matter), runs it once and recomputes the
paper's formula in float64 NumPy from the model's weights. Sampling is the
only thing taken from the model (its `sampled_ids`); everything downstream of
the samples is recomputed. Papers: ELECTRA (section 2, 3.5, appendix F),
Electric (sections 2.2-2.5, Algorithm 2, 3.2), SCRIPT (section 2, Eqs. 4-7).
"""

import numpy as np
import pytest
import tensorflow as tf
from scipy import stats
from scipy.special import logsumexp

from configure_pretraining import PretrainingConfig
from pretrain import losses
from pretrain.objectives import build_model
from tests.numpy_reference import np_gelu
from tests.numpy_reference import np_layer_norm
from tests.numpy_reference import np_log_softmax
from tests.tiny_models import MASK
from tests.tiny_models import MICRO
from tests.tiny_models import PICKS
from tests.tiny_models import SEQ
from tests.tiny_models import SPECIALS
from tests.tiny_models import VOCAB
from tests.tiny_models import make_batch
from util.errors import UserError

TOL = dict(rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- fixtures
def hparams(objective="electra", model=None, **kw):
  h = PretrainingConfig(
      model_size="tiny", vocab_size=VOCAB, max_seq_length=SEQ,
      max_predictions_per_seq=kw.pop("max_predictions_per_seq", PICKS),
      data_dir="/tmp/unused", model_name="m", objective=objective,
      model_hparam_overrides=dict(MICRO, **(model or {})), **kw)
  h.validate()
  return h


def make_model(objective="electra", randomise=True, token_counts=None,
               **kw):
  model = build_model(hparams(objective, **kw), token_counts=token_counts,
                      special_ids=SPECIALS)
  model.build_variables()
  if randomise:
    randomise_weights(model)
  return model


def randomise_weights(model, seed=0, scale=0.5):
  """O(1) weights everywhere: a swapped gamma/beta or a missing bias shows."""
  rng = np.random.RandomState(seed)
  for v in model.trainable_variables:
    value = rng.normal(0.0, scale, tuple(v.shape))
    if v.path.endswith("gamma"):
      value += 1.0
    v.assign(value.astype(np.float32))


def run(model, features, training=False):
  return {k: np.asarray(v) for k, v in model(features,
                                             training=training).items()}


# ------------------------------------------------------- NumPy reference
def w(variable):
  return np.asarray(variable, np.float64)


def np_dense(layer, x):
  return x @ w(layer.kernel) + w(layer.bias)


def np_ln(layer, x):
  return np_layer_norm(x, w(layer.gamma), w(layer.beta), layer.epsilon)


def np_tables(embeddings):
  """Word, position and type tables; GDES: shared table + own delta."""
  names = ("word_embeddings", "position_embeddings", "token_type_embeddings")
  tables = [w(getattr(embeddings, n).embeddings) for n in names]
  shared = getattr(embeddings, "shared", None)
  if shared is not None:
    tables = [t + w(getattr(shared, n).embeddings)
              for t, n in zip(tables, names)]
  return tables


def np_keep(input_mask, causal=None):
  """[B, Tq, Tk] attention allowed: real keys (and the causal triangle;
  a causal query always sees itself)."""
  seq = input_mask.shape[1]
  real = np.broadcast_to(input_mask[:, None, :] > 0, input_mask.shape[:1] +
                         (seq, seq))
  if causal is None:
    return real
  q, k = np.arange(seq)[:, None], np.arange(seq)[None, :]
  tri = k <= q if causal == "l2r" else k >= q
  return (real & tri) | (q == k)


def np_layer(layer, x, keep):
  attention = layer.attention
  heads = attention.config.num_attention_heads
  size = attention.config.head_size
  batch, seq = x.shape[:2]

  def split(h):
    return h.reshape(batch, seq, heads, size).transpose(0, 2, 1, 3)

  q, k, v = (split(np_dense(d, x)) for d in (attention.query, attention.key,
                                              attention.value))
  scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(size)
  scores = np.where(keep[:, None], scores, -np.inf)
  probs = np.exp(scores - scores.max(-1, keepdims=True))
  probs /= probs.sum(-1, keepdims=True)
  context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, -1)
  x = np_ln(layer.attention_layer_norm,
            x + np_dense(layer.attention_output, context))
  h = np_dense(layer.output_dense, np_gelu(np_dense(layer.intermediate, x)))
  return np_ln(layer.output_layer_norm, x + h)


def np_encoder(encoder, ids, features, causal=None, layers=None):
  """Embeddings -> LayerNorm -> projection -> post-LN layers, float64."""
  word, position, token_type = np_tables(encoder.embeddings)
  x = (word[ids] + position[:ids.shape[1]][None] +
       token_type[features["segment_ids"]])
  x = np_ln(encoder.embeddings.layer_norm, x)
  if encoder.embeddings_project is not None:
    x = np_dense(encoder.embeddings_project, x)
  keep = np_keep(features["input_mask"], causal)
  for layer in (encoder.transformer_layers if layers is None else layers):
    x = np_layer(layer, x, keep)
  return x


def np_mlm_head(head, hidden, table):
  """dense -> gelu -> LayerNorm -> tied table (+ bias): vocabulary logits."""
  h = np_ln(head.layer_norm, np_gelu(np_dense(head.dense, hidden)))
  return h @ table.T + w(head.output_bias)


def np_disc_head(head, hidden):
  """w^T gelu(dense(h)): one logit a token."""
  return np_dense(head.dense_prediction,
                  np_gelu(np_dense(head.dense, hidden)))[..., 0]


def np_gather(sequence, positions):
  if sequence.ndim == 2:
    return np.take_along_axis(sequence, positions, 1)
  return np.take_along_axis(sequence, positions[..., None], 1)


def np_replace(ids, features, sampled):
  """REPLACE(x, m, x_hat) at the weighted picks; also the picked mask."""
  out, picked = ids.copy(), np.zeros(ids.shape, np.float64)
  positions = features["masked_lm_positions"]
  for b, p in zip(*np.nonzero(features["masked_lm_weights"])):
    out[b, positions[b, p]] = sampled[b, p]
    picked[b, positions[b, p]] = 1.0
  return out, picked


def np_mean(values, weights):
  weights = np.asarray(weights, np.float64)
  return float((weights * values).sum() / weights.sum())


def np_nll(logits, labels):
  """-log softmax(logits)[labels]."""
  return -np.take_along_axis(np_log_softmax(logits), labels[..., None],
                             -1)[..., 0]


def np_bce(logits, labels):
  """-[z log sigmoid(x) + (1 - z) log(1 - sigmoid(x))], in log space."""
  return labels * np.logaddexp(0.0, -logits) + (1 - labels) * np.logaddexp(
      0.0, logits)


def np_generator_logits(model, features):
  """The masked-LM generator's logits (and hidden) at the picks."""
  gen = model.pair.generator
  hidden = np_gather(np_encoder(gen.encoder, features["masked_input_ids"],
                                features), features["masked_lm_positions"])
  table = np_tables(gen.encoder.embeddings)[0]
  return np_mlm_head(gen.predictions, hidden, table), hidden


def np_electra(model, features, sampled, only_masked=False):
  """ELECTRA section 2 (and 3.5's ELECTRA 15%), in NumPy."""
  h = model.config
  ids, mask = features["input_ids"], features["input_mask"]
  weights = features["masked_lm_weights"]
  logits, gen_hidden = np_generator_logits(model, features)
  mlm = np_mean(np_nll(logits, features["masked_lm_ids"]), weights)
  corrupt, picked = np_replace(features["masked_input_ids"], features,
                               sampled)
  labels = ((corrupt != ids) & (mask > 0)).astype(np.float64)
  disc_logits = np_disc_head(
      model.discriminator_predictions,
      np_encoder(model.pair.discriminator, corrupt, features))
  token_losses = np_bce(disc_logits, labels)
  disc = np_mean(token_losses, picked if only_masked else mask)
  return dict(mlm=mlm, disc=disc, loss=h.gen_weight * mlm +
              h.disc_weight * disc, disc_logits=disc_logits, labels=labels,
              corrupt=corrupt, token_losses=token_losses, gen_logits=logits,
              gen_hidden=gen_hidden)


def np_sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def grads(tape, target, variables):
  return dict(zip([v.path for v in variables],
                  tape.gradient(target, variables)))


def is_zero(grad):
  return grad is None or not np.any(np.asarray(tf.convert_to_tensor(grad)))


def ids_of(variables):
  return {id(v) for v in variables}


# ------------------------------------------------------------ the tests
def test_mlm_loss_matches_numpy():
  """BERT baseline: mean -log p(x_i | x_masked) over the weighted picks."""
  model = make_model("mlm")
  f = make_batch()
  out = run(model, f)
  hidden = np_encoder(model.encoder, f["masked_input_ids"], f)
  logits = np_mlm_head(model.mlm_predictions,
                       np_gather(hidden, f["masked_lm_positions"]),
                       np_tables(model.encoder.embeddings)[0])
  expected = np_mean(np_nll(logits, f["masked_lm_ids"]),
                     f["masked_lm_weights"])
  np.testing.assert_allclose(out["loss"], expected, **TOL)
  np.testing.assert_allclose(out["mlm_loss"], expected, **TOL)


@pytest.mark.parametrize("objective", ["electra", "electra_15"])
def test_electra_losses_match_numpy(objective):
  """L_MLM + lambda L_Disc; L_Disc over all real tokens (ELECTRA) or only
  the masked-out ones (ELECTRA 15%); unused pick slots change nothing."""
  model = make_model(objective)
  f = make_batch()
  out = run(model, f)
  ref = np_electra(model, f, out["sampled_ids"],
                   only_masked=objective == "electra_15")
  np.testing.assert_allclose(out["mlm_loss"], ref["mlm"], **TOL)
  np.testing.assert_allclose(out["disc_logits"], ref["disc_logits"],
                             rtol=1e-4, atol=1e-4)
  np.testing.assert_array_equal(out["disc_labels"], ref["labels"])
  np.testing.assert_allclose(out["disc_loss"], ref["disc"], **TOL)
  np.testing.assert_allclose(out["loss"], ref["loss"], rtol=1e-5, atol=1e-4)
  # The two weightings really differ on this batch, so the test tells them
  # apart.
  other = np_electra(model, f, out["sampled_ids"],
                     only_masked=objective != "electra_15")
  assert abs(other["disc"] - ref["disc"]) > 1e-3


def force_samples(head, token, logit=1e3):
  """A huge output bias on `token`: the head then samples only it."""
  bias = np.zeros(VOCAB, np.float32)
  bias[token] = logit
  head.output_bias.assign(bias)


def test_electra_sample_equal_to_original_is_labelled_original():
  """ELECTRA section 2: a sample that happens to be correct is "real"."""
  model = make_model("electra")
  f = make_batch()
  token = int(f["input_ids"][0, 2])  # the original at row 0's first pick
  force_samples(model.pair.generator.predictions, token)
  out = run(model, f)
  assert np.all(out["sampled_ids"] == token)
  assert out["disc_labels"][0, 2] == 0
  ref = np_electra(model, f, out["sampled_ids"])
  np.testing.assert_array_equal(out["disc_labels"], ref["labels"])
  # Exactly the weighted picks whose original differs from the sample.
  differs = (f["masked_lm_ids"] != token) * f["masked_lm_weights"]
  assert 0 < ref["labels"].sum() == differs.sum() < 7
  np.testing.assert_allclose(out["disc_loss"], ref["disc"], **TOL)


def np_softmax(logits):
  return np.exp(np_log_softmax(logits))


def np_pick_logits(model, features):
  """Each objective's sampling logits at the picks, [B, P, V]."""
  positions = features["masked_lm_positions"]
  if model.config.objective == "script":
    return np_gather(np_script_scores(model, features["masked_input_ids"],
                                      features), positions)
  if model.config.objective == "electric":
    return np_gather(np_two_tower(model, features), positions)
  return np_generator_logits(model, features)[0]


@pytest.mark.parametrize("objective,temperature", [
    ("electra", 2.0), ("script", 1.0), ("electric", 0.5)])
def test_samples_follow_softmax_over_temperature(objective, temperature):
  """x_hat ~ softmax(logits / T) at every weighted pick (ELECTRA 3.2's
  temperature; SCRIPT Eq. 3 with T = 1; Electric's q): pooled chi-square."""
  model = make_model(objective, temperature=temperature)
  f = make_batch()
  reps = 700
  out = run(model, {k: np.concatenate([v] * reps) for k, v in f.items()},
            training=True)
  samples = out["sampled_ids"].reshape(reps, 3, PICKS)
  probs = np_softmax(np_pick_logits(model, f) / temperature)
  statistic, dof = 0.0, 0
  for b, p in zip(*np.nonzero(f["masked_lm_weights"])):
    observed = np.bincount(samples[:, b, p], minlength=VOCAB)
    expected = probs[b, p] * reps
    rare = expected < 5  # pooled into one bin
    observed = np.append(observed[~rare], observed[rare].sum())
    expected = np.append(expected[~rare], expected[rare].sum())
    statistic += ((observed - expected) ** 2 / expected).sum()
    dof += len(observed) - 1
  p_value = stats.chi2.sf(statistic, dof)
  assert p_value > 1e-4, (statistic, dof)


def test_disallow_correct_never_samples_the_original():
  """disallow_correct: the original token is excluded from the sampler."""
  model = make_model("electra", disallow_correct=True)
  f = make_batch()
  token = int(f["input_ids"][0, 2])  # also the original at row 2's pick 2
  force_samples(model.pair.generator.predictions, token)
  out = run(model, f)
  weighted = f["masked_lm_weights"] > 0
  banned = weighted & (f["masked_lm_ids"] == token)
  assert banned.sum() == 2
  assert not np.any(out["sampled_ids"][banned] == token)
  assert np.all(out["sampled_ids"][weighted & ~banned] == token)
  ref = np_electra(model, f, out["sampled_ids"])
  assert ref["labels"].sum() == weighted.sum()
  np.testing.assert_allclose(out["disc_loss"], ref["disc"], **TOL)


def test_electra_disc_loss_does_not_reach_the_generator():
  """ELECTRA section 2: no back-propagation through the sampling step."""
  model = make_model("electra")
  f = make_batch()
  pair = model.pair
  gen_only = [v for v in pair.generator.trainable_variables
              if id(v) not in ids_of(pair.discriminator.trainable_variables)]
  assert gen_only
  with tf.GradientTape(persistent=True) as tape:
    out = model(f, training=True)
  disc = grads(tape, out["disc_loss"], gen_only)
  mlm = grads(tape, out["mlm_loss"], gen_only)
  assert all(is_zero(g) for g in disc.values())
  assert not any(is_zero(g) for g in mlm.values())


def test_replace_mlm_matches_numpy():
  """Replace MLM (section 3.5): the main model reads the generator's samples
  (not [MASK]) and predicts the originals at the picked positions."""
  model = make_model("replace_mlm")
  f = make_batch()
  out = run(model, f)
  logits, _ = np_generator_logits(model, f)
  mlm = np_mean(np_nll(logits, f["masked_lm_ids"]), f["masked_lm_weights"])
  corrupt, _ = np_replace(f["masked_input_ids"], f, out["sampled_ids"])
  hidden = np_encoder(model.pair.discriminator, corrupt, f)
  main_logits = np_mlm_head(model.main_predictions,
                            np_gather(hidden, f["masked_lm_positions"]),
                            np_tables(model.pair.discriminator.embeddings)[0])
  main = np_mean(np_nll(main_logits, f["masked_lm_ids"]),
                 f["masked_lm_weights"])
  np.testing.assert_allclose(out["mlm_loss"], mlm, **TOL)
  np.testing.assert_allclose(out["main_loss"], main, **TOL)
  np.testing.assert_allclose(out["loss"],
                             model.config.gen_weight * mlm + main, **TOL)
  # Reading [MASK] instead would be plain MLM, a different loss.
  masked_hidden = np_encoder(model.pair.discriminator, f["masked_input_ids"], f)
  masked = np_mean(np_nll(np_mlm_head(
      model.main_predictions,
      np_gather(masked_hidden, f["masked_lm_positions"]),
      np_tables(model.pair.discriminator.embeddings)[0]), f["masked_lm_ids"]),
      f["masked_lm_weights"])
  assert abs(masked - main) > 1e-3


def test_all_tokens_mlm_matches_numpy():
  """All-Tokens MLM (section 3.5): -log(D [input = target] + (1 - D)
  softmax[target]) over every real token, D = sigmoid(copy logit)."""
  model = make_model("all_tokens_mlm")
  f = make_batch()
  out = run(model, f)
  ids, mask = f["input_ids"], f["input_mask"]
  logits, _ = np_generator_logits(model, f)
  mlm = np_mean(np_nll(logits, f["masked_lm_ids"]), f["masked_lm_weights"])
  corrupt, _ = np_replace(f["masked_input_ids"], f, out["sampled_ids"])
  hidden = np_encoder(model.pair.discriminator, corrupt, f)
  vocab_logits = np_mlm_head(model.main_predictions, hidden,
                             np_tables(model.pair.discriminator.embeddings)[0])
  softmax = np.exp(np_log_softmax(vocab_logits))
  copy = np_sigmoid(np_dense(model.copy_predictions, hidden)[..., 0])
  p = (copy * (corrupt == ids) +
       (1 - copy) * np.take_along_axis(softmax, ids[..., None], -1)[..., 0])
  nll = -np.log(p)
  main = np_mean(nll, mask)
  np.testing.assert_allclose(out["main_nll"][mask > 0], nll[mask > 0],
                             rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(out["mlm_loss"], mlm, **TOL)
  np.testing.assert_allclose(out["main_loss"], main, **TOL)
  np.testing.assert_allclose(out["loss"],
                             model.config.gen_weight * mlm + main, **TOL)
  # Its accuracy: the mixture's argmax, here over the whole vocabulary.
  mixture = (copy[..., None] * (np.arange(softmax.shape[-1]) ==
                                corrupt[..., None]) +
             (1 - copy[..., None]) * softmax)
  np.testing.assert_array_equal(out["main_correct"][mask > 0],
                                (mixture.argmax(-1) == ids)[mask > 0])


def test_all_tokens_mlm_prediction_is_the_mixtures_argmax():
  """The prediction without the [B, T, V] mixture equals NumPy's argmax of
  D * onehot(input) + (1 - D) * softmax, on both sides of the decision."""
  from pretrain.objectives.ablations import _mixture_argmax  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  logits = rng.normal(0, 3, (4, 64, 50)).astype(np.float32)
  inputs = rng.integers(0, 50, (4, 64))
  copy_logits = rng.normal(0, 3, (4, 64)).astype(np.float32)
  softmax = np.exp(logits - logits.max(-1, keepdims=True))
  softmax /= softmax.sum(-1, keepdims=True)
  copy = 1 / (1 + np.exp(-copy_logits))
  mixture = (copy[..., None] * (np.arange(50) == inputs[..., None]) +
             (1 - copy[..., None]) * softmax)
  expected = mixture.argmax(-1)
  assert 0.1 < np.mean(expected == inputs) < 0.9  # both branches occur
  np.testing.assert_array_equal(
      np.asarray(_mixture_argmax(logits, copy_logits, inputs)), expected)


def np_two_tower(model, features):
  """Electric section 2.4: q(x_t | x_\\t) = softmax(W [l2r_{t-1},
  r2l_{t+1}]), zeros beyond either end, from the unmasked input."""
  gen = model.pair.generator
  ids = features["input_ids"]
  l2r = np_encoder(gen.l2r, ids, features, causal="l2r")
  r2l = np_encoder(gen.r2l, ids, features, causal="r2l")
  zeros = np.zeros_like(l2r[:, :1])
  right = np.concatenate([r2l[:, 1:], zeros], 1)
  real = np.asarray(features["input_mask"], np.float64)
  right[:, :-1] *= real[:, 1:, None]  # nothing right of the last real token
  states = np.concatenate([np.concatenate([zeros, l2r[:, :-1]], 1), right],
                          -1)
  logits = np_mlm_head(gen.predictions, states,
                       np_tables(gen.l2r.embeddings)[0])
  return np_log_softmax(logits)


def np_electric(model, features, sampled):
  """Cloze MLE over the candidates (or every real token) + Algorithm 2's
  NCE loss, with the original's k / (n - k) = mask_prob / (1 - mask_prob)
  (or each row's own)."""
  h = model.config
  own = h.objective_hparams
  ids, mask = features["input_ids"], features["input_mask"]
  log_q_all = np_two_tower(model, features)
  cloze_nll = -np.take_along_axis(log_q_all, ids[..., None], -1)[..., 0]
  cloze = np_mean(cloze_nll, features["scoring_mask"]
                  if own["cloze_loss_tokens"] == "candidates" else mask)
  noised, picked = np_replace(ids, features, sampled)
  log_q = np.take_along_axis(log_q_all, noised[..., None], -1)[..., 0]
  energy = np_disc_head(model.discriminator_predictions,
                        np_encoder(model.pair.discriminator, noised, features))
  k = features["masked_lm_weights"].sum(-1)[:, None].astype(np.float64)
  n = features["input_mask"].sum(-1)[:, None].astype(np.float64)
  if own["noise_ratio"] == "mask_prob":  # k / n = mask_prob in every row
    k, n = np.full_like(k, h.mask_prob), np.ones_like(n)
  # log [k q / ((n - k) exp(-E) + k q)] and its complement, as in
  # Algorithm 2 step 3.
  log_kq = np.log(k) + log_q
  log_data = np.log(n - k) - energy
  log_denominator = np.logaddexp(log_data, log_kq)
  labels = picked * (mask > 0)  # every sample is noise, even if correct
  token_losses = -(labels * (log_kq - log_denominator) +
                   (1 - labels) * (log_data - log_denominator))
  nce = np_mean(token_losses, mask)
  return dict(cloze=cloze, nce=nce, loss=h.gen_weight * cloze +
              h.disc_weight * nce, labels=labels, log_q=log_q,
              cloze_correct=log_q_all.argmax(-1) == ids,
              energy=energy, nce_logits=energy + log_kq - np.log(n - k))


@pytest.mark.parametrize("own", [
    {}, {"cloze_loss_tokens": "all", "noise_ratio": "per_sequence"}])
def test_electric_losses_match_numpy(own):
  """Electric: two-tower q, cloze MLE on the candidates (the original's; or
  every real token), NCE logit E + log q(shown) + log(k / (n - k)) with the
  original's k / n = mask_prob (or the row's own), averaged over real
  tokens."""
  model = make_model("electric", objective_hparams=own)
  f = make_batch()
  out = run(model, f)
  ref = np_electric(model, f, out["sampled_ids"])
  mask = f["input_mask"] > 0
  np.testing.assert_allclose(out["log_q"][mask], ref["log_q"][mask],
                             rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(out["nce_logits"][mask],
                             ref["nce_logits"][mask], rtol=1e-4, atol=1e-4)
  np.testing.assert_array_equal(out["nce_labels"], ref["labels"])
  np.testing.assert_allclose(out["cloze_loss"], ref["cloze"], **TOL)
  np.testing.assert_allclose(out["nce_loss"], ref["nce"], **TOL)
  np.testing.assert_allclose(out["loss"], ref["loss"], rtol=1e-5, atol=1e-4)


def test_electric_eval_reports_q_at_the_picked_positions_as_the_original():
  """The original's Electric eval: masked_lm_loss / accuracy are q's at the
  masked positions (a repeated pick counts twice), beside q over every
  real token (cloze_*)."""
  model = make_model("electric")
  f = make_batch()
  f["masked_lm_positions"][0, 2] = 2  # position 2 picked twice in row 0
  out = run(model, f)
  log_q_all = np_two_tower(model, f)
  ids, w = f["input_ids"], f["masked_lm_weights"] > 0
  nll = -np.take_along_axis(log_q_all, ids[..., None], -1)[..., 0]
  correct = log_q_all.argmax(-1) == ids
  rows, cols = np.nonzero(w)
  at = f["masked_lm_positions"][rows, cols]
  metrics = model.eval_metrics(dict(out, nce_loss=out["nce_loss"][None]))
  np.testing.assert_allclose(metrics["masked_lm_loss"],
                             nll[rows, at].mean(), rtol=1e-4)
  assert metrics["masked_lm_accuracy"] == correct[rows, at].mean()
  real = f["input_mask"] > 0
  np.testing.assert_allclose(metrics["cloze_loss"], nll[real].mean(),
                             rtol=1e-4)


def test_electric_hparams_are_checked():
  with pytest.raises(UserError, match="cloze_loss_tokens must be one of "
                     "candidates, all, got 'every'"):
    hparams("electric", objective_hparams={"cloze_loss_tokens": "every"})
  with pytest.raises(UserError, match="unknown hparam 'noise'"):
    hparams("electric", objective_hparams={"noise": "mask_prob"})


def test_electric_q_never_sees_the_token_it_predicts():
  """q(x_t | x_\\t): changing x_t leaves q at t unchanged (two towers
  read t-1 and t+1 only), but moves q at t's neighbours."""
  model = make_model("electric")
  f = make_batch()
  logits = np.asarray(model.pair.generator(f, None, training=False)[0])
  np.testing.assert_allclose(np_log_softmax(logits.astype(np.float64)),
                             np_two_tower(model, f), rtol=1e-4, atol=1e-4)
  g = dict(f, input_ids=f["input_ids"].copy())
  g["input_ids"][0, 4] = (g["input_ids"][0, 4] + 1) % VOCAB
  moved = np.asarray(model.pair.generator(g, None, training=False)[0])
  np.testing.assert_allclose(moved[0, 4], logits[0, 4], atol=1e-5)
  assert np.abs(moved[0, 3] - logits[0, 3]).max() > 1e-3
  assert np.abs(moved[0, 5] - logits[0, 5]).max() > 1e-3


def test_electric_correct_sample_is_still_noise():
  """Algorithm 2: every sampled position is a negative, even when the
  sample equals the original token."""
  model = make_model("electric")
  f = make_batch()
  token = int(f["input_ids"][0, 2])
  force_samples(model.pair.generator.predictions, token)
  out = run(model, f)
  assert np.all(out["sampled_ids"] == token)
  assert out["nce_labels"][0, 2] == 1
  assert out["nce_labels"].sum() == 7  # all weighted picks
  ref = np_electric(model, f, out["sampled_ids"])
  np.testing.assert_allclose(out["nce_loss"], ref["nce"], **TOL)
  # q's top token is `token` everywhere: cloze accuracy is right exactly
  # where the input holds it.
  mask = f["input_mask"] > 0
  np.testing.assert_array_equal(out["cloze_correct"][mask],
                                ref["cloze_correct"][mask])
  assert 0 < out["cloze_correct"][mask].sum() < mask.sum()


def test_electric_nce_gradient_stops_at_q():
  """Electric 2.5: q is an input of the classifier, trained only by MLE: no
  gradient of the NCE loss into generator-only variables."""
  model = make_model("electric")
  f = make_batch()
  pair = model.pair
  gen_only = [v for v in pair.generator.trainable_variables
              if id(v) not in ids_of(pair.discriminator.trainable_variables)]
  assert len(gen_only) > 10
  with tf.GradientTape(persistent=True) as tape:
    out = model(f, training=True)
  nce = grads(tape, out["nce_loss"], gen_only)
  cloze = grads(tape, out["cloze_loss"], gen_only)
  assert all(is_zero(g) for g in nce.values()), [
      k for k, g in nce.items() if not is_zero(g)]
  assert not any(is_zero(g) for g in cloze.values()), [
      k for k, g in cloze.items() if is_zero(g)]
  disc = grads(tape, out["nce_loss"],
               model.discriminator_predictions.trainable_variables)
  assert not any(is_zero(g) for g in disc.values())


def test_electric_cloze_gradient_equals_full_cross_entropy():
  """The cloze loss takes x_t's logit from the states (no [B, T, V]
  one-hot): its gradient must equal that of the plain cross-entropy of
  the full logits, for every generator variable incl. the tied table."""
  model = make_model("electric")
  f = make_batch()
  variables = model.pair.generator.trainable_variables
  with tf.GradientTape(persistent=True) as tape:
    out = model(f, training=False)
    logits, _ = model.pair.generator(f, None, training=False)
    reference = losses.weighted_mean(
        -losses.log_softmax_at(logits, f["input_ids"]), f["scoring_mask"])
  np.testing.assert_allclose(out["cloze_loss"], reference, **TOL)
  ours = grads(tape, out["cloze_loss"], variables)
  theirs = grads(tape, reference, variables)
  for path, grad in theirs.items():
    np.testing.assert_allclose(np.asarray(tf.convert_to_tensor(ours[path])),
                               np.asarray(tf.convert_to_tensor(grad)),
                               rtol=1e-4, atol=1e-6, err_msg=path)


def test_electric_pll_is_minus_energy_of_clean_input():
  """Electric 3.2: PLL(x) = sum_t -E(x)_t, one pass on the clean input."""
  model = make_model("electric")
  f = make_batch()
  out = run(model, f)
  energy = np_disc_head(model.discriminator_predictions,
                        np_encoder(model.pair.discriminator, f["input_ids"], f))
  mask = f["input_mask"] > 0
  np.testing.assert_allclose(out["pll_tokens"][mask], -energy[mask],
                             rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose((out["pll_tokens"] * f["scoring_mask"]).sum(-1),
                             (-energy * f["scoring_mask"]).sum(-1),
                             rtol=1e-4, atol=1e-4)


def np_script_scores(model, ids, features):
  """s_t = W e_t over the vocabulary, at every position."""
  hidden = np_encoder(model.encoder, ids, features)
  return np_mlm_head(model.mlm_predictions, hidden,
                     np_tables(model.encoder.embeddings)[0])


def test_script_losses_match_numpy():
  """SCRIPT Eqs. 4-6: on the sampled sequence p(t+) = S / (S + 1),
  S = sum_v exp(s_tv); loss = L_MLM + alpha * L_Disc."""
  model = make_model("script")
  f = make_batch()
  out = run(model, f)
  ids, mask = f["input_ids"], f["input_mask"]
  scores = np_script_scores(model, f["masked_input_ids"], f)
  mlm_logits = np_gather(scores, f["masked_lm_positions"])
  mlm = np_mean(np_nll(mlm_logits, f["masked_lm_ids"]),
                f["masked_lm_weights"])
  sampled_seq, _ = np_replace(f["masked_input_ids"], f, out["sampled_ids"])
  s = np.exp(np_script_scores(model, sampled_seq, f)).sum(-1)
  p_real = s / (s + 1)
  negative = ((sampled_seq != ids) & (mask > 0)).astype(np.float64)
  disc = np_mean(-(negative * np.log(1 - p_real) +
                   (1 - negative) * np.log(p_real)), mask)
  np.testing.assert_array_equal(out["disc_labels"], negative)
  np.testing.assert_allclose(out["disc_probs"][mask > 0],
                             1 - p_real[mask > 0], rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(out["mlm_loss"], mlm, **TOL)
  np.testing.assert_allclose(out["disc_loss"], disc, **TOL)
  np.testing.assert_allclose(out["loss"], model.config.gen_weight * mlm +
                             model.config.disc_weight * disc,
                             rtol=1e-5, atol=1e-4)


def test_script_pll_matches_numpy():
  """SCRIPT Eq. 7: PLL(x) = sum_t log p(t+ | x) on the clean input."""
  model = make_model("script")
  f = make_batch()
  out = run(model, f)
  s = np.exp(np_script_scores(model, f["input_ids"], f)).sum(-1)
  expected = (np.log(s / (s + 1)) * f["scoring_mask"]).sum(-1)
  np.testing.assert_allclose((out["pll_tokens"] * f["scoring_mask"]).sum(-1),
                             expected, rtol=1e-4, atol=1e-5)


def test_script_critic_is_finite_for_huge_scores():
  """S = sum exp(s) overflows float32 for s ~ 500; the critic must not."""
  model = make_model("script")
  f = make_batch()
  model.mlm_predictions.output_bias.assign(np.full(VOCAB, 500.0, np.float32))
  out = run(model, f)
  for key in ("loss", "disc_loss", "disc_logits", "pll_tokens"):
    assert np.all(np.isfinite(out[key])), key
  sampled_seq, _ = np_replace(f["masked_input_ids"], f, out["sampled_ids"])
  log_s = logsumexp(np_script_scores(model, sampled_seq, f), -1)
  np.testing.assert_allclose(out["disc_logits"], -log_s, rtol=1e-5)


def test_adversarial_losses_match_numpy():
  """Appendix F: policy (R - b) log p_G(x_hat), R = -disc token loss, b =
  log sigmoid(w^T h_G); the baseline's cross-entropy against exp(R)."""
  model = make_model("electra", training_algorithm="adversarial")
  f = make_batch()
  out = run(model, f)
  h = model.config
  weights = f["masked_lm_weights"]
  positions = f["masked_lm_positions"]
  ref = np_electra(model, f, out["sampled_ids"])
  reward = -np_gather(ref["token_losses"], positions)
  baseline_logits = np_dense(model.pair.generator.baseline,
                             ref["gen_hidden"])[..., 0]
  baseline = -np.logaddexp(0.0, -baseline_logits)
  log_p = np.take_along_axis(np_log_softmax(ref["gen_logits"]),
                             out["sampled_ids"][..., None], -1)[..., 0]
  policy = np_mean((reward - baseline) * log_p, weights)
  baseline_loss = np_mean(np_bce(baseline_logits, np.exp(reward)), weights)
  np.testing.assert_allclose(out["policy_loss"], policy, **TOL)
  np.testing.assert_allclose(out["baseline_loss"], baseline_loss, **TOL)
  np.testing.assert_allclose(out["disc_loss"], ref["disc"], **TOL)
  np.testing.assert_allclose(out["mlm_loss"], ref["mlm"], **TOL)
  np.testing.assert_allclose(
      out["loss"], h.gen_weight * (policy + baseline_loss) +
      h.disc_weight * ref["disc"], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("baseline_bias", [30.0, -30.0])
def test_adversarial_gradient_raises_p_of_samples_that_fool(baseline_bias):
  """The generator maximises L_Disc: a descent step on the policy loss
  raises log p(x_hat) when R < b (the discriminator did worse than the
  baseline expected: b ~ 0) and lowers it when R > b (b ~ -30)."""
  model = make_model("electra", training_algorithm="adversarial")
  f = make_batch()
  f["masked_lm_weights"] = np.array([[1, 0, 0], [0, 0, 0], [0, 0, 0]],
                                    np.float32)
  kernel = model.pair.generator.baseline.kernel
  kernel.assign(np.zeros(tuple(kernel.shape), np.float32))
  model.pair.generator.baseline.bias.assign(
      np.array([baseline_bias], np.float32))
  bias = model.pair.generator.predictions.output_bias
  with tf.GradientTape() as tape:
    out = model(f, training=True)
  grad = np.asarray(tape.gradient(out["policy_loss"], bias), np.float64)
  sample = int(np.asarray(out["sampled_ids"])[0, 0])
  ref = np_electra(model, f, np.asarray(out["sampled_ids"]))
  reward = -ref["token_losses"][0, 2]
  b = -np.logaddexp(0.0, -baseline_bias)
  p = np.exp(np_log_softmax(ref["gen_logits"][0, 0]))
  np.testing.assert_allclose(grad, (reward - b) * (np.eye(VOCAB)[sample] - p),
                             rtol=1e-4, atol=1e-6)
  step = np.asarray(bias, np.float64) - 0.1 * grad
  before = np_log_softmax(ref["gen_logits"][0, 0])[sample]
  after = np_log_softmax(ref["gen_logits"][0, 0] - np.asarray(bias) +
                         step)[sample]
  assert (after > before) == (reward < b)


def test_weight_sharing_all_is_one_encoder():
  """untied_generator=False: the generator's encoder is the discriminator's."""
  model = make_model("electra", weight_sharing="all",
                     generator_hidden_size=1.0)
  assert model.pair.generator.encoder is model.pair.discriminator
  assert ids_of(model.pair.generator.encoder.weights) == ids_of(
      model.pair.discriminator.weights)
  f = make_batch()
  out = run(model, f)
  ref = np_electra(model, f, out["sampled_ids"])
  np.testing.assert_allclose(out["loss"], ref["loss"], rtol=1e-5, atol=1e-4)


def test_weight_sharing_none_has_separate_tables():
  """untied embeddings: two token tables, no variable in common."""
  model = make_model("electra", weight_sharing="none")
  gen, disc = model.pair.generator.encoder, model.pair.discriminator
  assert gen.embeddings is not disc.embeddings
  assert not ids_of(gen.weights) & ids_of(disc.weights)
  assert not np.allclose(np.asarray(gen.embeddings.token_table),
                         np.asarray(disc.embeddings.token_table))
  f = make_batch()
  out = run(model, f)
  ref = np_electra(model, f, out["sampled_ids"])
  np.testing.assert_allclose(out["loss"], ref["loss"], rtol=1e-5, atol=1e-4)


def test_weight_sharing_embeddings_is_one_table():
  """ELECTRA 3.2 default: one embeddings layer for both models."""
  model = make_model("electra")
  pair = model.pair
  assert pair.generator.encoder.embeddings is pair.discriminator.embeddings


def test_gdes_table_is_shared_plus_zero_initialised_delta():
  """DeBERTa-V3 GDES: E_D = sg(E_G) + delta, delta = 0 at init; L_Disc
  trains only delta, L_MLM trains the shared table."""
  model = make_model("electra", randomise=False, weight_sharing="gdes")
  disc_emb = model.pair.discriminator.embeddings
  shared = model.pair.embeddings
  assert model.pair.generator.encoder.embeddings is shared
  assert disc_emb is not shared and disc_emb.shared is shared
  deltas = [disc_emb.word_embeddings.embeddings,
            disc_emb.position_embeddings.embeddings,
            disc_emb.token_type_embeddings.embeddings]
  for delta in deltas:
    assert not np.any(np.asarray(delta))
  np.testing.assert_array_equal(np.asarray(disc_emb.token_table),
                                np.asarray(shared.token_table))
  randomise_weights(model)  # deltas now nonzero, tables differ
  np.testing.assert_allclose(
      np.asarray(disc_emb.token_table),
      w(shared.word_embeddings.embeddings) + w(deltas[0]), atol=1e-6)
  f = make_batch()
  with tf.GradientTape(persistent=True) as tape:
    out = model(f, training=True)
  table = shared.word_embeddings.embeddings
  assert is_zero(tape.gradient(out["disc_loss"], table))
  assert not is_zero(tape.gradient(out["disc_loss"], deltas[0]))
  assert not is_zero(tape.gradient(out["mlm_loss"], table))
  ref = np_electra(model, f, np.asarray(out["sampled_ids"]))
  np.testing.assert_allclose(np.asarray(out["disc_loss"]), ref["disc"],
                             **TOL)


def test_unigram_generator_samples_follow_token_counts():
  """Section 3.2's unigram generator: samples ~ counts, specials never;
  no network, so no MLM loss."""
  rng = np.random.RandomState(3)
  counts = rng.randint(0, 40, VOCAB)
  counts[:4] = 10000  # frequent, but specials must never be drawn
  counts[[10, 20, 30]] = 0
  model = make_model("electra", token_counts=counts, unigram_generator=True,
                     max_predictions_per_seq=SEQ)
  assert not model.pair.generator.trainable_variables
  batch = 400
  f = model.dummy_features(batch)
  f["input_ids"] = rng.randint(5, VOCAB, (batch, SEQ)).astype(np.int32)
  f["masked_input_ids"] = np.full((batch, SEQ), MASK, np.int32)
  f["masked_lm_positions"] = np.tile(np.arange(SEQ, dtype=np.int32),
                                     (batch, 1))
  f["masked_lm_ids"] = f["input_ids"].copy()
  f["masked_lm_weights"] = np.ones((batch, SEQ), np.float32)
  out = run(model, f, training=True)
  samples = out["sampled_ids"].ravel()
  observed = np.bincount(samples, minlength=VOCAB)
  allowed = counts.astype(np.float64)
  allowed[list(SPECIALS)] = 0
  assert observed[allowed == 0].sum() == 0
  expected = allowed / allowed.sum() * samples.size
  keep = allowed > 0
  _, p_value = stats.chisquare(observed[keep], expected[keep])
  assert p_value > 1e-3, p_value
  assert float(out["mlm_loss"]) == 0.0


def test_uniform_generator_has_no_variables_and_no_mlm_loss():
  """Section 3.2's uniform generator: nothing to train, L = lambda L_Disc."""
  model = make_model("electra", uniform_generator=True)
  assert not model.pair.generator.trainable_variables
  assert ids_of(model.trainable_variables) == ids_of(
      model.pair.discriminator.trainable_variables +
      model.discriminator_predictions.trainable_variables)
  f = make_batch()
  out = run(model, f)
  assert float(out["mlm_loss"]) == 0.0
  corrupt, _ = np_replace(f["masked_input_ids"], f, out["sampled_ids"])
  labels = ((corrupt != f["input_ids"]) & (f["input_mask"] > 0))
  disc_logits = np_disc_head(model.discriminator_predictions,
                             np_encoder(model.pair.discriminator, corrupt, f))
  disc = np_mean(np_bce(disc_logits, labels.astype(np.float64)),
                 f["input_mask"])
  np.testing.assert_allclose(out["loss"], model.config.disc_weight * disc,
                             rtol=1e-5, atol=1e-4)


def test_two_stage_training():
  """Section 3.2: stage one trains the generator alone (the discriminator is
  not run); stage two starts the discriminator from the generator's weights
  (embeddings included) and trains it alone, the generator frozen."""
  model = make_model("electra", training_algorithm="two_stage",
                     generator_hidden_size=1.0, num_train_steps=10)
  gen_vars = model.pair.generator.trainable_variables
  disc_vars = (model.pair.discriminator.trainable_variables +
               model.discriminator_predictions.trainable_variables)
  disc_only = ids_of(disc_vars) - ids_of(gen_vars)
  gen_only = ids_of(gen_vars) - ids_of(disc_vars)
  assert disc_only and gen_only
  assert model.algorithm.stage == 1
  stage_one = ids_of(model.variables_to_train())
  # Nothing is shared: the generator stays wholly frozen in stage two.
  assert not stage_one & ids_of(disc_vars)
  assert ids_of(gen_vars) == stage_one

  f = make_batch()
  calls = []
  original_call = model.pair.discriminator.call

  def counting_call(*args, **kwargs):
    calls.append(1)
    return original_call(*args, **kwargs)

  model.pair.discriminator.call = counting_call
  out = run(model, f, training=True)
  assert not calls
  assert float(out["disc_loss"]) == 0.0
  np.testing.assert_allclose(out["loss"], model.config.gen_weight *
                             out["mlm_loss"], rtol=1e-6)
  del model.pair.discriminator.call

  gen_enc = model.pair.generator.encoder
  assert not all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in
                 zip(gen_enc.weights, model.pair.discriminator.weights))
  model.algorithm.start_stage_two(model)
  assert model.algorithm.stage == 2
  for a, b in zip(gen_enc.weights, model.pair.discriminator.weights):
    assert a.path.split("/")[-2:] == b.path.split("/")[-2:]
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  stage_two = ids_of(model.variables_to_train())
  assert stage_two == ids_of(disc_vars)
  out = run(model, f, training=True)
  ref = np_electra(model, f, out["sampled_ids"])
  np.testing.assert_allclose(out["disc_loss"], ref["disc"], **TOL)
  np.testing.assert_allclose(out["loss"],
                             model.config.disc_weight * ref["disc"],
                             rtol=1e-5, atol=1e-4)


def test_cross_layer_sharing_applies_one_layer_n_times():
  """ALBERT / Lite ELECTRA: one layer's weights applied num_hidden_layers
  times."""
  model = make_model("mlm", cross_layer_sharing=True,
                     model=dict(num_hidden_layers=3))
  encoder = model.encoder
  assert len(encoder.transformer_layers) == 1
  layer_paths = {part for v in encoder.weights
                 for part in v.path.split("/") if part.startswith("layer_")}
  assert layer_paths == {"layer_0"}
  f = make_batch()
  got = np.asarray(encoder(f["masked_input_ids"], f["input_mask"],
                           f["segment_ids"], training=False))
  layer = encoder.transformer_layers[0]
  expected = np_encoder(encoder, f["masked_input_ids"], f,
                        layers=[layer] * 3)
  np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
  once = np_encoder(encoder, f["masked_input_ids"], f, layers=[layer])
  assert np.abs(once - expected).max() > 1e-2
