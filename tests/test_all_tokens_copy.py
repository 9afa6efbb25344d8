"""All-Tokens MLM's copy mechanism on an easy case (issue 51): with a
uniform generator on text whose every row repeats one token, a replaced
token is out of place at once and its original is its neighbours' token.
A working copy head must give replaced positions a lower copy probability
D than kept ones, and the mixture D * onehot(input) + (1 - D) * softmax
must then predict replaced tokens correctly (ELECTRA section 3.5). The
tiny Wikipedia run's 0.0000 is not this mechanism failing: there the copy
probability stayed at the kept share, and under a constant D >= 0.5 no
replaced token can win the argmax."""

import numpy as np
import tensorflow as tf
import keras

from configure_pretraining import PretrainingConfig
from pretrain.masking import MaskingConfig
from pretrain.masking import NUM_NOISE
from pretrain.masking import mask_batch
from pretrain.objectives import build_model

VOCAB, SEQ, PICKS, BATCH = 40, 16, 4, 64
CLS, SEP, MASK = 2, 3, 4


def _batch(rng, masking):
  token = rng.integers(8, 20, BATCH)  # one token per row, repeated
  ids = np.repeat(token[:, None], SEQ, axis=1).astype(np.int32)
  ids[:, 0], ids[:, -1] = CLS, SEP
  features = {"input_ids": ids, "input_mask": np.ones_like(ids),
              "segment_ids": np.zeros_like(ids)}
  noise = rng.random((NUM_NOISE, BATCH, PICKS)).astype(np.float32)
  return {k: np.asarray(v) for k, v in
          mask_batch(features, masking, noise).items()}


def test_the_copy_head_flags_replacements_and_they_are_predicted():
  keras.utils.set_random_seed(0)
  config = PretrainingConfig(
      model_size="tiny", vocab_size=VOCAB, max_seq_length=SEQ,
      max_predictions_per_seq=PICKS, data_dir="/tmp/unused", model_name="m",
      objective="all_tokens_mlm", uniform_generator=True, mask_prob=0.25,
      # Every replacement a uniform draw, as the case was designed (the
      # default averages a position picked twice: 1 row in 3 here).
      repeated_positions="first",
      model_hparam_overrides=dict(
          hidden_size=32, intermediate_size=64, num_attention_heads=2,
          embedding_size=32, num_hidden_layers=1, hidden_dropout_prob=0.0,
          attention_probs_dropout_prob=0.0))
  config.validate()
  model = build_model(config, special_ids=(0, 1, CLS, SEP))
  model.build_variables()
  masking = MaskingConfig(mask_prob=0.25, max_predictions=PICKS,
                          vocab_size=VOCAB, cls_id=CLS, sep_id=SEP,
                          mask_id=MASK)
  optimizer = keras.optimizers.Adam(3e-3)
  rng = np.random.default_rng(0)

  @tf.function
  def step(features):
    with tf.GradientTape() as tape:
      loss = model(features, training=True)["loss"]
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))

  for _ in range(300):
    step(_batch(rng, masking))
  held_out = _batch(np.random.default_rng(1), masking)
  out = {k: np.asarray(v) for k, v in model(held_out).items()}
  metrics = model.eval_metrics(out)
  assert 0.15 < np.mean(out["replaced"]) < 0.3  # the uniform samples
  assert metrics["copy_probability_replaced"] < 0.2
  assert metrics["copy_probability_kept"] > 0.6
  assert metrics["copy_auc"] > 0.95
  assert metrics["replaced_tokens_accuracy"] > 0.5
