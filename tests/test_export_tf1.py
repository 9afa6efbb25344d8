"""export_model.py --format tf1: a checkpoint in the original release's
variable names, which its scripts (and --init-checkpoint here) start from.
"""

import os

import numpy as np
import tensorflow as tf

import export_model
from tests.tf1_reference import Tf1Sizes
from tests.tf1_reference import save_tf1_variables
from tests.tf1_reference import write_tf1_checkpoint

REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         "reference")


def _export(source, out, vocab):
  export_model.main(["--init-checkpoint", source, "--vocab-file", vocab,
                     "--format", "tf1", "--output-dir", out])
  return {name: tf.train.load_variable(out, name)
          for name, _ in tf.train.list_variables(out)}


def _vocab(tmp_path, size):
  path = tmp_path / "vocab.txt"
  special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  path.write_text("".join(f"{t}\n" for t in special + [
      f"word{i}" for i in range(size - len(special))]))
  return str(path)


def test_the_original_discriminator_comes_back_in_its_own_names(tmp_path):
  """tests/reference/tiny_discriminator.npz holds every variable of the
  release's BertModel + discriminator head under the names its code gave
  them: imported and exported, the same names and values come back."""
  ref = np.load(os.path.join(REFERENCE, "tiny_discriminator.npz"))
  values = {k[len("weight:"):]: ref[k].astype(np.float32)
            for k in ref.files if k.startswith("weight:")}
  prefix = str(tmp_path / "release" / "model.ckpt-7")
  save_tf1_variables(prefix, values)
  vocab = _vocab(tmp_path, values[
      "electra/embeddings/word_embeddings"].shape[0])
  got = _export(prefix, str(tmp_path / "out"), vocab)
  # No global_step or optimizer slots. Restored as an ELECTRA pair, the
  # model also holds a (new) generator, written as the release would.
  assert set(values) <= set(got)
  assert all(n.startswith(("generator/", "generator_predictions/"))
             for n in set(got) - set(values))
  for name, value in values.items():
    np.testing.assert_array_equal(got[name], value, err_msg=name)


def test_a_pair_round_trips_with_its_generator_and_shared_embeddings(
    tmp_path):
  """The release's ELECTRA layout, a half-size generator under generator/
  sharing electra/embeddings: exported back exactly, and the export
  starts a model that holds the same weights."""
  sizes = Tf1Sizes()
  prefix = str(tmp_path / "release" / "model.ckpt-100")
  values = write_tf1_checkpoint(prefix, sizes, np.random.default_rng(3))
  vocab = _vocab(tmp_path, sizes.vocab_size)
  out = str(tmp_path / "out")
  got = _export(prefix, out, vocab)
  assert set(got) == set(values)
  assert not any(n.startswith("generator/embeddings/") for n in got)
  for name, value in values.items():
    np.testing.assert_array_equal(got[name], value, err_msg=name)
  assert open(os.path.join(out, "vocab.txt")).read() == open(vocab).read()
  # Relative in `checkpoint`: the export was written elsewhere and moved.
  assert tf.train.latest_checkpoint(out) == os.path.join(out, "model.ckpt")


def test_electric_exports_in_the_originals_names_and_comes_back(tmp_path):
  """An Electric model (two-tower cloze generator) of the parity runs'
  shape exports every variable the original's electric_objective saves,
  under its name and shape (tests/reference/electric_tf1_variables.json,
  read from its own checkpoint), and nothing else; imported back, the
  model holds the same weights, the towers' included."""
  # pylint: disable=g-import-not-at-top
  import json
  from interop import tf1
  from interop.weights import CLOZE
  from interop.weights import import_weights
  from interop.weights import role_slots
  from loading import sources
  from pretrain.config import PretrainingConfig
  from pretrain.objectives import build_model
  with open(os.path.join(REFERENCE, "electric_tf1_variables.json")) as f:
    original = json.load(f)["variables"]
  config = PretrainingConfig(model_size="tiny", objective="electric",
                             vocab_size=30522, max_seq_length=128)
  config.resolve()
  model = build_model(config)
  model.build_variables()
  rng = np.random.default_rng(0)
  for v in model.trainable_variables:  # not the initialiser's zeros/ones
    v.assign(rng.normal(0, 0.1, v.shape).astype(np.float32))
  values = tf1.release_weights(model)
  assert {n: list(v.shape) for n, v in values.items()} == original
  prefix = str(tmp_path / "model.ckpt-7")
  tf1.write_checkpoint(prefix, values, 7)
  again = build_model(config)
  again.build_variables()
  source = sources.open_source(prefix)
  assert (source.config.objective, source.config.generator_hidden_size,
          source.config.two_tower_generator) == ("electric", 0.25, True)
  import_weights(again, source.weights(), source=prefix)
  for role in (CLOZE, "discriminator"):
    for a, b in zip(role_slots(model, role), role_slots(again, role)):
      np.testing.assert_array_equal(a.value(), b.value(), err_msg=a.name)
