"""interop/npz_weights.py: .npz shards + weights.json, the format the
TensorFlow-free JAX driver writes, read back as a loading/sources.py Source
(--init-checkpoint) with the weights that were saved."""

import dataclasses
import json
import os

import numpy as np
import pytest

from interop import npz_weights
from interop.weights import export_weights
from loading import sources
from loading.runs import restore_model
from pretrain.objectives import build_model
from pretrain.objectives import objective_names
from tests.tiny_models import electra_hparams
from util.errors import UserError


def saved_model(tmp_path, dtype="float32", max_shard_bytes=2 ** 20, **kw):
  config = electra_hparams(**kw)
  model = build_model(config)
  model.build_variables()
  rng = np.random.default_rng(0)
  for v in model.trainable_variables:  # not the initialiser's zeros/ones
    v.assign(rng.normal(0, 0.1, v.shape).astype(np.float32))
  weights = {role: export_weights(model, role) for role in model.networks()}
  out = str(tmp_path / "weights")
  paths = npz_weights.write(out, weights,
                            json.loads(json.dumps(dataclasses.asdict(config))),
                            dtype=dtype, max_shard_bytes=max_shard_bytes,
                            step=7)
  return out, weights, paths


# Every objective: each names its networks (the JAX driver saves them all).
@pytest.mark.parametrize("objective", objective_names())
def test_loaded_weights_equal_the_saved_ones(tmp_path, objective):
  path, weights, _ = saved_model(tmp_path, objective=objective)
  source = sources.open_source(path)
  assert source.kind == "npz"
  assert source.config.objective == objective
  loaded = source.weights()
  assert sorted(loaded) == sorted(weights)
  for role in weights:
    assert sorted(loaded[role]) == sorted(weights[role])
    for name, value in weights[role].items():
      np.testing.assert_array_equal(loaded[role][name], value, err_msg=name)
  # The model run_finetuning.py / export_model.py restore from it.
  model = restore_model(sources.find_pretrained(path))
  for role in weights:
    for name, value in export_weights(model, role).items():
      np.testing.assert_array_equal(value, weights[role][name], err_msg=name)


def test_shards_stay_under_the_limit_and_shared_tensors_are_stored_once(
    tmp_path):
  limit = 1024  # splits the embedding table by rows across shards
  path, weights, paths = saved_model(tmp_path, max_shard_bytes=limit)
  shards = [p for p in paths if p.endswith(".npz")]
  assert len(shards) > 3 and paths[-1].endswith(npz_weights.MANIFEST)
  for shard in shards:
    with np.load(shard) as data:
      assert sum(data[k].nbytes for k in data.files) <= limit
  manifest = npz_weights.read_manifest(path)
  word = "electra.embeddings.word_embeddings.weight"
  assert manifest["tensors"]["generator"][word] == {
      "same_as": f"discriminator/{word}"}  # ELECTRA's shared table
  assert len(manifest["tensors"]["discriminator"][word]["parts"]) > 1
  _, loaded = npz_weights.read(path)
  np.testing.assert_array_equal(loaded["generator"][word],
                                weights["generator"][word])


def test_float16_halves_the_size_and_reads_back_as_float32(tmp_path):
  path32, weights, paths32 = saved_model(tmp_path / "a")
  path16, _, paths16 = saved_model(tmp_path / "b", dtype="float16")
  size = lambda ps: sum(os.path.getsize(p) for p in ps if p.endswith(".npz"))  # noqa
  assert size(paths16) < 0.7 * size(paths32)  # npz headers: tiny model
  _, loaded = npz_weights.read(path16)
  for role in weights:
    for name, value in weights[role].items():
      assert loaded[role][name].dtype == np.float32
      np.testing.assert_array_equal(
          loaded[role][name], value.astype(np.float16).astype(np.float32))


def test_a_missing_shard_is_named(tmp_path):
  path, _, paths = saved_model(tmp_path)
  os.remove(paths[0])
  with pytest.raises(UserError, match="weights-00000.npz is missing"):
    sources.open_source(path).weights()
