"""Both backends train alike (issue 62): from the same weights and the
same masked batches, three training steps of the JAX driver's step
(pretrain/jax_trainer.py) and of the TensorFlow trainer's (pretrain/
trainer.py replica_grads + training/step.py ReplicaUpdate) give the same
losses and weights, for each pretraining objective (float32, no dropout,
sampling at temperature 1e-6 so every sample is the argmax on both);
two-stage training switches after step 2, so its third step is stage
two's on both (the discriminator copied from the generator, which is
then frozen); and ELECTRA's other generators and algorithms: adversarial
training (REINFORCE, appendix F), the two-tower cloze generator and the
unigram generator (the dataset's token counts)."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = 3
SWITCH = 2  # two-stage training's last generator step
# A case: the objective, or ELECTRA with these hparams.
VARIANTS = {
    "two_stage": dict(training_algorithm="two_stage",
                      two_stage_generator_steps=SWITCH,
                      generator_hidden_size=1.0),
    "adversarial": dict(training_algorithm="adversarial"),
    "two_tower": dict(two_tower_generator=True),
    "unigram": dict(unigram_generator=True)}
OBJECTIVES = ("mlm", "electra", "electric", "script") + tuple(VARIANTS)


def token_counts(vocab_size=200):
  """A unigram generator's counts (its argmax unique)."""
  return np.arange(1, vocab_size + 1, dtype=np.int64)


def config_for(objective):
  from configure_pretraining import PretrainingConfig
  extra = (dict(objective="electra", **VARIANTS[objective])
           if objective in VARIANTS else dict(objective=objective))
  config = PretrainingConfig(
      data_dir="/tmp/unused", model_name="m", model_size="tiny",
      **extra, vocab_size=200, max_seq_length=16,
      train_batch_size=4, temperature=1e-6, learning_rate=1e-3,
      num_warmup_steps=1, num_train_steps=10, mixed_precision="float32",
      model_hparam_overrides=dict(
          hidden_size=32, intermediate_size=64, embedding_size=16,
          num_attention_heads=2, hidden_dropout_prob=0.0,
          attention_probs_dropout_prob=0.0))
  config.validate()
  return config


JAX_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import jax
    from pretrain import arrays as arrays_lib
    from pretrain.jax_trainer import JaxTrainer
    from tests.test_backends_train_alike import STEPS, SWITCH, config_for
    from tests.test_backends_train_alike import token_counts
    for objective, out in json.loads(sys.argv[1]).items():
      config = config_for(objective)
      arrays = arrays_lib.synthetic(32, 16, 200, seed=0, heldout_examples=8)
      arrays.token_counts = token_counts
      trainer = JaxTrainer(config, arrays, jax.devices()[:1])
      trainer.model.save_weights(out + ".initial.weights.h5")
      features, losses = [], []
      for step in range(STEPS):
        if step == SWITCH and trainer.model.schedule_boundaries():
          assert trainer.begin_step(step)  # stage two from here
        rows = trainer._replicated(trainer.train_rows(step, 1)[0])
        features.append({k: np.asarray(v) for k, v in trainer._features(
            "train", rows, trainer.train_key, step).items()})
        sums, finite = trainer.advance(1, config.num_train_steps)
        assert float(finite) == 1.0
        losses.append(float(sums["loss"]))
      trainer.sync_model()
      trainer.model.save_weights(out + ".final.weights.h5")
      np.savez(out + ".features.npz", **{f"{i}:{k}": v for i, f in
                                         enumerate(features)
                                         for k, v in f.items()})
      with open(out + ".json", "w") as f:
        json.dump({"losses": losses, "special": arrays.meta["special_ids"]},
                  f)
""")


@pytest.fixture(scope="module")
def jax_runs(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("alike")
  env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu",
             PYTHONPATH=ROOT)
  env.pop("XLA_FLAGS", None)
  runs = {objective: str(tmp / objective) for objective in OBJECTIVES}
  done = subprocess.run([sys.executable, "-c", JAX_SCRIPT, json.dumps(runs)],
                        env=env, capture_output=True, text=True, timeout=900,
                        cwd=ROOT)
  assert done.returncode == 0, done.stderr[-3000:]
  return runs


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_three_steps_give_the_same_losses_and_weights(jax_runs, objective):
  from pretrain.objectives import build_model
  from pretrain.trainer import replica_grads
  from training import optimization
  from training.step import ReplicaUpdate
  import tensorflow as tf
  out = jax_runs[objective]
  with open(out + ".json") as f:
    record = json.load(f)
  config = config_for(objective)
  counts = token_counts() if config.unigram_generator else None
  model = build_model(config, counts, record["special"].values())
  model.build_variables()
  model.load_weights(out + ".initial.weights.h5")
  optimizer = optimization.create_optimizer(config)
  optimization.build_optimizer(optimizer, model.trainable_variables)
  update = ReplicaUpdate(optimizer, 1, config.clip_norm)

  def traced():  # again when what trains changes
    @tf.function
    def step(batch):
      grads, logs = replica_grads(model, update, batch)
      update.apply(grads, model.variables_to_train())
      return logs
    return step

  step = traced()
  saved = np.load(out + ".features.npz")
  losses = []
  for i in range(STEPS):
    if i == SWITCH and model.schedule_boundaries():
      assert model.begin_step(i)
      step = traced()
    batch = {k.split(":", 1)[1]: saved[k] for k in saved.files
             if k.startswith(f"{i}:")}
    losses.append(float(step(batch)["loss"]))
  np.testing.assert_allclose(losses, record["losses"], rtol=1e-5)
  ours = {v.path: np.asarray(v) for v in model.weights}
  model.load_weights(out + ".final.weights.h5")
  for v in model.weights:
    theirs = np.asarray(v)
    np.testing.assert_allclose(ours[v.path], theirs, atol=1e-5,
                               err_msg=v.path)
  model.load_weights(out + ".initial.weights.h5")
  moved = max(float(np.abs(ours[v.path] - np.asarray(v)).max())
              for v in model.trainable_weights)
  assert moved > 1e-4  # three real updates, not a comparison of the start
