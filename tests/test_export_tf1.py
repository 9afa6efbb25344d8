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
