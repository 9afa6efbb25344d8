"""Checkpoints in the original ELECTRA release's TF1 layout: every variable
lands where it should, outputs agree with a NumPy forward pass, and the
pretraining and fine-tuning CLIs start from them (or name what differs)."""

import json
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

import run_finetuning
import run_pretraining
from tests.pretraining_runs import hparams
from tests.script_checks import error_line
from tests.shared_data import SHARED
from tests.tf1_reference import Tf1Sizes
from tests.tf1_reference import numpy_discriminator_logits
from tests.tf1_reference import numpy_generator_logits
from tests.tf1_reference import write_tf1_checkpoint

SMALL = Tf1Sizes()  # generator: half the hidden/FFN size and heads
# Matches the e2e dataset's 30522-token vocabulary; Hg == H == E, so the
# generator has no embeddings_project.
FULL = Tf1Sizes(vocab_size=30522, hidden_size=128, num_heads=2, num_layers=1,
                intermediate_size=256, embedding_size=128,
                max_position=128).full_size_generator()
FULL_ARCH = {"model_hparam_overrides": {
    "hidden_size": 128, "num_hidden_layers": 1, "num_attention_heads": 2,
    "intermediate_size": 256, "embedding_size": 128,
    "max_position_embeddings": 128, "hidden_act": "gelu"},
             "generator_hidden_size": 1.0, "generator_layers": 1.0}


# ------------------------------------------------ TF1 name -> our variable
def _encoder_map(scope, encoder, with_embeddings):
  found = {}
  if with_embeddings:
    e = encoder.embeddings
    for table in ("word", "position", "token_type"):
      found[f"{scope}/embeddings/{table}_embeddings"] = getattr(
          e, f"{table}_embeddings").embeddings
    found[f"{scope}/embeddings/LayerNorm/gamma"] = e.layer_norm.gamma
    found[f"{scope}/embeddings/LayerNorm/beta"] = e.layer_norm.beta
  if encoder.embeddings_project is not None:
    found[f"{scope}/embeddings_project/kernel"] = (
        encoder.embeddings_project.kernel)
    found[f"{scope}/embeddings_project/bias"] = encoder.embeddings_project.bias
  for i, layer in enumerate(encoder.transformer_layers):
    p = f"{scope}/encoder/layer_{i}"
    parts = {"attention/self/query": layer.attention.query,
             "attention/self/key": layer.attention.key,
             "attention/self/value": layer.attention.value,
             "attention/output/dense": layer.attention_output,
             "intermediate/dense": layer.intermediate,
             "output/dense": layer.output_dense}
    for name, dense in parts.items():
      found[f"{p}/{name}/kernel"] = dense.kernel
      found[f"{p}/{name}/bias"] = dense.bias
    for name, norm in (("attention/output/LayerNorm",
                        layer.attention_layer_norm),
                       ("output/LayerNorm", layer.output_layer_norm)):
      found[f"{p}/{name}/gamma"] = norm.gamma
      found[f"{p}/{name}/beta"] = norm.beta
  return found


def tf1_to_ours(model):
  """{TF1 name: Keras variable} of an ElectraModel sharing embeddings."""
  pair = model.pair
  assert pair.generator.encoder.embeddings is pair.discriminator.embeddings
  found = _encoder_map("electra", pair.discriminator, True)
  found.update(_encoder_map("generator", pair.generator.encoder, False))
  d, g = model.discriminator_predictions, pair.generator.predictions
  found.update({
      "discriminator_predictions/dense/kernel": d.dense.kernel,
      "discriminator_predictions/dense/bias": d.dense.bias,
      "discriminator_predictions/dense_1/kernel": d.dense_prediction.kernel,
      "discriminator_predictions/dense_1/bias": d.dense_prediction.bias,
      "generator_predictions/dense/kernel": g.dense.kernel,
      "generator_predictions/dense/bias": g.dense.bias,
      "generator_predictions/LayerNorm/gamma": g.layer_norm.gamma,
      "generator_predictions/LayerNorm/beta": g.layer_norm.beta,
      "generator_predictions/output_bias": g.output_bias,
  })
  return found


def assert_holds(model, values):
  """Every TF1 value is in its variable; every trainable variable is one."""
  mapping = tf1_to_ours(model)
  assert set(mapping) == set(values)
  for name, variable in mapping.items():
    np.testing.assert_array_equal(np.asarray(variable), values[name],
                                  err_msg=name)
  mapped = {id(v) for v in mapping.values()}
  extra = [v.path for v in model.trainable_weights if id(v) not in mapped]
  assert not extra, extra


# ------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def small(tmp_path_factory):
  prefix = str(tmp_path_factory.mktemp("release") / "model.ckpt-100")
  values = write_tf1_checkpoint(prefix, SMALL, np.random.default_rng(0))
  return prefix, values


@pytest.fixture(scope="module")
def small_model(small):
  from loading import runs
  from loading.sources import find_pretrained
  return runs.restore_model(find_pretrained(small[0]))


@pytest.fixture(scope="module")
def full(data_dir, tmp_path_factory):
  """A full-size-generator checkpoint with the dataset's vocab beside it."""
  folder = tmp_path_factory.mktemp("full")
  values = write_tf1_checkpoint(str(folder / "model.ckpt-100"), FULL,
                                np.random.default_rng(1))
  shutil.copy(os.path.join(data_dir, "vocab.txt"), folder / "vocab.txt")
  return str(folder / "model.ckpt-100"), values


# ------------------------------------------------------------ unit tests
def test_config_is_inferred_from_the_shapes(small):
  from loading import sources
  prefix, _ = small
  for path in (prefix, os.path.dirname(prefix)):
    src = sources.open_source(path)
    c = src.config
    assert src.kind == "tf1" and c.objective == "electra"
    assert c.vocab_size == SMALL.vocab_size
    overrides = c.model_hparam_overrides
    assert overrides["hidden_size"] == SMALL.hidden_size
    assert overrides["embedding_size"] == SMALL.embedding_size
    assert overrides["num_hidden_layers"] == SMALL.num_layers
    assert overrides["intermediate_size"] == SMALL.intermediate_size
    assert overrides["hidden_act"] == "gelu"  # the release's erf GELU
    assert c.generator_hidden_size == pytest.approx(0.5)
    assert c.weight_sharing == "embeddings"


def test_every_variable_lands_and_adam_slots_are_ignored(small, small_model):
  assert_holds(small_model, small[1])  # slots hold other random values


def test_outputs_match_a_numpy_forward_pass(small, small_model):
  _, values = small
  rng = np.random.default_rng(2)
  ids = rng.integers(0, SMALL.vocab_size, (2, 12)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, 8:] = 0  # a padded row
  ids[1, 8:] = 0
  segs = np.zeros_like(ids)
  segs[:, 5:] = 1
  segs[1, 8:] = 0
  m = small_model
  hidden = m.pair.discriminator(ids, mask, segs, training=False)
  ours = np.asarray(m.discriminator_predictions(hidden))
  ref = numpy_discriminator_logits(values, ids, mask, segs, SMALL)
  np.testing.assert_allclose(ours, ref, atol=1e-4, rtol=1e-4)

  positions = np.array([[0, 4, 11], [1, 5, 7]], np.int32)
  features = {"masked_input_ids": ids, "input_mask": mask,
              "segment_ids": segs}
  logits, _ = m.pair.generator(features, positions, training=False)
  ref = numpy_generator_logits(values, ids, mask, segs, positions, SMALL)
  np.testing.assert_allclose(np.asarray(logits), ref, atol=1e-4, rtol=1e-4)


# ---------------------------------------- the original release's outputs
REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         "reference")


def test_gelu_is_the_original_exact_erf_form():
  """tests/reference/gelu.json: the release's modeling.gelu on a grid."""
  from model.encoder import activation
  with open(os.path.join(REFERENCE, "gelu.json")) as f:
    ref = json.load(f)
  x = np.asarray(ref["x"], np.float32)
  want = np.asarray(ref["gelu"])
  np.testing.assert_allclose(np.asarray(activation("gelu")(x)), want,
                             atol=1e-6, rtol=1e-6)
  tanh = np.asarray(activation("gelu_approx")(x))
  assert np.abs(tanh - want).max() > 1e-4  # the grid tells the two apart


def _original_discriminator(tmp_path):
  """The tiny discriminator of tests/reference/tiny_discriminator.npz as
  a TF1 checkpoint: (prefix, inputs, the original's logits)."""
  from tests.tf1_reference import save_tf1_variables
  ref = np.load(os.path.join(REFERENCE, "tiny_discriminator.npz"))
  values = {k[len("weight:"):]: ref[k].astype(np.float32)
            for k in ref.files if k.startswith("weight:")}
  prefix = str(tmp_path / "model.ckpt-7")
  save_tf1_variables(prefix, values)
  inputs = tuple(ref[k] for k in ("input_ids", "input_mask", "segment_ids"))
  return prefix, inputs, ref["logits"]


def _discriminator_logits(model, inputs):
  hidden = model.pair.discriminator(*inputs, training=False)
  return np.asarray(model.discriminator_predictions(hidden))


def test_imported_logits_match_the_original_release(tmp_path):
  """Issue 37 item 6: the release's BertModel + discriminator head on fixed
  weights, run by its own TF1 code, against our import of the same
  checkpoint; with the tanh GELU they are 3e-4 off."""
  from interop.weights import import_weights
  from loading import runs
  from loading import sources
  from loading.sources import find_pretrained
  from pretrain.objectives import build_model
  prefix, inputs, want = _original_discriminator(tmp_path)
  model = runs.restore_model(find_pretrained(prefix))
  assert model.pair.discriminator.config.hidden_act == "gelu"
  ours = _discriminator_logits(model, inputs)
  np.testing.assert_allclose(ours, want, atol=1e-5, rtol=0)  # got 3e-7
  # The same weights with the tanh form: off by far more than the above.
  src = sources.open_source(prefix)
  config = src.config
  config.model_hparam_overrides = dict(config.model_hparam_overrides,
                                       hidden_act="gelu_approx")
  approx = build_model(config)
  approx.build_variables()
  import_weights(approx, src.weights(), source=prefix)
  assert np.abs(_discriminator_logits(approx, inputs) - want).max() > 1e-4


def test_import_into_a_different_model_lists_what_differs(small):
  from loading import sources
  from interop.weights import import_weights
  from pretrain.objectives import build_model
  from util.errors import UserError
  prefix, _ = small
  src = sources.open_source(prefix)
  config = src.config
  config.generator_hidden_size = 0.25  # generator hidden 32, not 64
  model = build_model(config)
  model.build_variables()
  with pytest.raises(UserError) as info:
    import_weights(model, src.weights(), source=prefix)
  message = str(info.value)
  assert re.search(r"\(128, 64\)|\(64, 64\)", message), message
  assert "32" in message, message


# ------------------------------------------------------------ the CLIs
def test_pretraining_continues_from_a_full_size_generator(data_dir, full,
                                                          capsys):
  from loading import runs
  from loading.sources import find_pretrained
  prefix, values = full
  # One step at warm-up step 0 (learning rate 0): the saved weights are
  # the imported ones.
  run_pretraining.main([
      "--data-dir", data_dir, "--model-name", "from_tf1",
      "--init-checkpoint", prefix, "--hparams",
      hparams(num_train_steps=1, num_warmup_steps=1, iterations_per_loop=1,
              save_checkpoints_steps=1, **FULL_ARCH)])
  out = capsys.readouterr().out
  assert "initialised weights from" in out, out
  model_dir = os.path.join(data_dir, "models", "from_tf1")
  assert tf.train.latest_checkpoint(model_dir).endswith("ckpt-1")
  model = runs.restore_model(find_pretrained(model_dir))
  assert model.pair.generator.encoder.embeddings_project is None
  assert_holds(model, values)


def test_pretraining_with_other_hparams_names_the_shapes(data_dir, full,
                                                         capsys):
  arch = dict(FULL_ARCH, generator_hidden_size=0.25)
  line = error_line(run_pretraining.main, [
      "--data-dir", data_dir, "--model-name", "tf1_mismatch",
      "--init-checkpoint", full[0], "--hparams",
      hparams(num_train_steps=1, **arch)], capsys)
  assert "generator" in line and re.search(r"\(128, 128\)", line), line
  assert re.search(r"\b32\b", line), line


def test_pretraining_on_another_vocabulary_is_one_error(data_dir, small,
                                                        capsys):
  arch = {"model_hparam_overrides": {
      "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
      "intermediate_size": 256, "embedding_size": 64,
      "max_position_embeddings": 128, "hidden_act": "gelu"},
          "generator_hidden_size": 0.5}
  line = error_line(run_pretraining.main, [
      "--data-dir", data_dir, "--model-name", "tf1_vocab",
      "--init-checkpoint", small[0], "--hparams",
      hparams(num_train_steps=1, **arch)], capsys)
  assert "word_embeddings" in line and "30522" in line and "40" in line, line


@pytest.fixture(scope="module")
def rte_dir(data_dir):
  raw = os.path.join(data_dir, "finetuning_data")
  os.makedirs(raw, exist_ok=True)
  if not os.path.exists(os.path.join(raw, "rte")):
    os.symlink(os.path.join(SHARED, "glue", "RTE"), os.path.join(raw, "rte"))
  return data_dir


TINY_RTE = {"train_examples_limit": 24, "eval_examples_limit": 16,
            "num_train_epochs": 1.0, "train_batch_size": 8,
            "eval_batch_size": 8, "max_seq_length": 64, "log_every_steps": 1,
            "learning_rate": 1e-4}


def test_finetuning_from_a_tf1_checkpoint(rte_dir, full, capsys):
  prefix, _ = full
  summary = run_finetuning.main([
      "--data-dir", rte_dir, "--model-name", "ft_tf1", "--init-checkpoint",
      prefix, "--task-names", "rte", "--hparams", json.dumps(TINY_RTE)])
  out = capsys.readouterr().out
  assert re.search(r"step 3/3 \| loss [0-9.]+", out), out
  assert np.isfinite(summary["rte"]["accuracy"]["median"])


def test_finetuning_encoder_starts_from_the_tf1_discriminator(rte_dir, full):
  from configure_finetuning import FinetuningConfig
  from finetune.trainer import FinetuningRunner
  prefix, values = full
  config = FinetuningConfig(data_dir=rte_dir, model_name="ft_tf1_encoder",
                            init_checkpoint=prefix, task_names="rte",
                            **TINY_RTE)
  runner = FinetuningRunner(config)
  model = runner._build(0)  # pylint: disable=protected-access
  mapping = _encoder_map("electra", model.encoder, True)
  assert len(mapping) == len(model.encoder.weights)
  for name, variable in mapping.items():
    np.testing.assert_array_equal(np.asarray(variable), values[name],
                                  err_msg=name)


def test_finetuning_with_a_wrong_vocab_is_one_error(rte_dir, full, tmp_path,
                                                    capsys):
  prefix, _ = full
  folder = tmp_path / "wrong_vocab"
  folder.mkdir()
  for f in os.listdir(os.path.dirname(prefix)):
    if f != "vocab.txt":
      shutil.copy(os.path.join(os.path.dirname(prefix), f), folder / f)
  with open(os.path.join(rte_dir, "vocab.txt")) as f:
    (folder / "vocab.txt").write_text("".join(f.readlines()[:1000]))
  line = error_line(run_finetuning.main, [
      "--data-dir", rte_dir, "--model-name", "ft_bad_vocab",
      "--init-checkpoint", str(folder / "model.ckpt-100"),
      "--task-names", "rte", "--hparams", json.dumps(TINY_RTE)], capsys)
  assert "vocab" in line and "1000" in line and "30522" in line, line
