"""finetune/jax_trainer.py and finetune/arrays.py: the arrays hold exactly
the features run_finetuning.py trains on; with a learning rate of 0 a JAX
fit leaves the FinetuningModel predicting what it predicted from the same
encoder weights and seed (the state out to the device and back); with a
learning rate it trains, the same in chunks of steps as one step a call,
and the same with batches cut to their longest row as uncut."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from finetune import arrays as ft_arrays
from finetune import task_builder
from finetune.featurization import model_inputs
from tests import slot_data

SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    from finetune import arrays, task_builder
    from finetune.jax_trainer import JaxFinetuner
    from finetune.model import model_config_for, pretrained_encoder_weights
    from finetune.model import set_encoder_weights
    from loading.sources import find_pretrained
    path, weights = sys.argv[1], sys.argv[2]
    data = arrays.load(path)
    # STS-B pairs fill SEQ: rows cut to 6-17 tokens, so that batches are
    # shorter than SEQ (the rest masked as padding, in every run alike).
    for columns in data.splits["sts"].values():
      cut = 6 + np.arange(len(columns["num_tokens"])) % 12
      columns["num_tokens"] = np.minimum(columns["num_tokens"], cut).astype(
          columns["num_tokens"].dtype)
    config = data.config
    config.hidden_dropout_prob = 0.0
    # No dropout at all (drawn at a batch's shape), and batches cut to
    # multiples of 8 tokens (finetune/padding.py).
    config.model_hparam_overrides = {"attention_probs_dropout_prob": 0.0}
    config.pad_to_multiple = 8
    pretrained = find_pretrained(weights)
    model_config = model_config_for(pretrained, config)
    encoder = pretrained_encoder_weights(pretrained, config)
    task, = [t for t in task_builder.get_tasks(config, None)
             if t.name == "sts"]  # a regression: real-valued predictions
    out = {}
    rows = list(range(data.rows("sts", "dev")))
    for name, lr, chunk, multiple in (
        ("frozen", 0.0, 5, 8), ("trained", 3e-3, 5, 8),
        ("by_step", 3e-3, 1, 8), ("untrimmed", 3e-3, 5, 0)):
      config.learning_rate, config.pad_to_multiple = lr, multiple
      tuner = JaxFinetuner(config, model_config, [task], data, chunk=chunk)
      model = tuner._new_model(7)
      set_encoder_weights(model.encoder, encoder)
      summary = tuner.fit(model, 7)  # the trained weights back in `model`
      _, got = model(tuner.first.batch_numpy("dev", rows), task_name="sts",
                     training=False)
      out[name] = {"jax": np.asarray(got["predictions"], float).tolist(),
                   "summary": summary}
      if name == "by_step":  # the lengths its batches ran at
        from pretrain.arrays import batch_rows
        out["lengths"] = sorted({tuner.first.length("train", rows)
                                 for rows in batch_rows(
                                     7, tuner.first.rows["train"], 8, 0,
                                     tuner.num_steps)})
    model = tuner._new_model(7)
    set_encoder_weights(model.encoder, encoder)
    _, direct = model(tuner.first.batch_numpy("dev", rows), task_name="sts",
                      training=False)
    out["direct"] = np.asarray(direct["predictions"], float).tolist()
    out["tensorflow"] = "tensorflow" in sys.modules
    print("RESULTS " + json.dumps(out))
""")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  root = tmp_path_factory.mktemp("ft")
  data_dir = slot_data.build_data(str(root / "data"))
  meta = slot_data.export_tasks(data_dir, str(root / "arrays"))
  return data_dir, str(root / "arrays"), meta


def test_arrays_hold_the_features_run_finetuning_trains_on(exported):
  data_dir, path, meta = exported
  from util.tokenization import load_tokenizer  # pylint: disable=g-import-not-at-top
  loaded = ft_arrays.load(os.path.join(path, "finetune"))
  config = loaded.config
  tokenizer = load_tokenizer(config.vocab_file, config.do_lower_case)
  for task in task_builder.get_tasks(config, tokenizer):
    for split in ("train", "dev"):
      n = config.train_examples_limit if split == "train" else (
          config.eval_examples_limit)
      features = task.featurize(task.get_examples(split)[:n],
                                is_training=split == "train")
      back = ft_arrays.unpack_features(loaded.splits[task.name][split])
      for key, value in model_inputs(features).items():
        np.testing.assert_array_equal(np.asarray(back[key]), value,
                                      err_msg=f"{task.name} {split} {key}")
  assert meta["tasks"]["sts"]["train_rows"] == 96  # both orders of a pair
  assert meta["tasks"]["rte"]["labels"] == ["entailment", "not_entailment"]


def test_a_trial_predicts_as_the_model_and_trains(exported, tmp_path):
  data_dir, path, _ = exported
  # Micro weights in the slot's format, written by the JAX pretraining
  # driver itself (a few steps).
  weights = str(tmp_path / "w")
  writer = textwrap.dedent("""
      import json, sys
      from pretrain import arrays
      from pretrain.config import PretrainingConfig
      from pretrain.jax_trainer import JaxTrainer
      config = PretrainingConfig(pretrain_tfrecords=sys.argv[1],
          model_dir=sys.argv[2], objective="electra", max_seq_length=32,
          train_batch_size=8, eval_batch_size=8, num_train_steps=2,
          num_warmup_steps=1, mixed_precision="float32",
          **json.loads(sys.argv[3]))
      config.validate()
      trainer = JaxTrainer(config, arrays.load(sys.argv[1]))
      trainer.advance(2, 2)
      trainer.save(sys.argv[2])
  """)
  slot_data.export_arrays(data_dir, path)
  env = slot_data.slot_env(str(tmp_path), KERAS_BACKEND="jax")
  for script, args in ((writer, [path, weights, json.dumps(slot_data.MICRO)]),
                       (SCRIPT, [os.path.join(path, "finetune"), weights])):
    done = subprocess.run([sys.executable, "-c", script, *args], env=env,
                          capture_output=True, text=True, timeout=900,
                          cwd=slot_data.ROOT)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
  line = next(l for l in done.stdout.splitlines() if l.startswith("RESULTS"))
  results = json.loads(line[len("RESULTS "):])
  assert results["tensorflow"] is False
  frozen, trained, by_step = (results[k] for k in ("frozen", "trained",
                                                   "by_step"))
  assert len(frozen["jax"]) == 32
  np.testing.assert_allclose(frozen["jax"], results["direct"], atol=1e-5)
  assert not np.allclose(trained["jax"], results["direct"], atol=1e-3)
  assert np.isfinite(trained["summary"]["final_loss"])
  # 12 steps, 5 a call (the last call padded by 3): the same training as
  # one step a call.
  np.testing.assert_allclose(trained["jax"], by_step["jax"], atol=1e-5)
  assert trained["summary"]["final_loss"] == pytest.approx(
      by_step["summary"]["final_loss"], abs=1e-5)
  # Batches cut to their longest row (16 or 24 tokens, never 32, step
  # by step or at a chunk's longest): the training of uncut ones.
  assert max(results["lengths"]) < 32, results["lengths"]
  untrimmed = results["untrimmed"]
  np.testing.assert_allclose(trained["jax"], untrimmed["jax"], atol=1e-5)
  assert trained["summary"]["final_loss"] == pytest.approx(
      untrimmed["summary"]["final_loss"], abs=1e-5)
