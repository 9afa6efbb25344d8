"""The tagging CRF head and the multiple-choice head give the same losses
and predictions under KERAS_BACKEND=jax, jitted as in a JAX training step,
as under TensorFlow (task.loss_and_outputs on given encoder states). One
subprocess for both: starting JAX costs seconds."""

import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np

from tests.tiny_heads import HIDDEN
from tests.tiny_heads import TAGS
from tests.tiny_heads import build_heads

ROOT = pathlib.Path(__file__).resolve().parents[1]

JAX_SCRIPT = textwrap.dedent("""
    import sys
    import jax
    import numpy as np
    import keras
    assert keras.backend.backend() == "jax", keras.backend.backend()
    from tests.tiny_heads import build_heads
    out = {}
    for name, (task, head) in build_heads().items():
      data = dict(np.load(f"{sys.argv[1]}/{name}.npz"))
      weights = [data.pop(f"weight{i}") for i in range(len(head.weights))]
      for variable, value in zip(head.weights, weights):
        variable.assign(value)
      hidden = data.pop("hidden")
      loss, outputs = jax.jit(lambda h, f: task.loss_and_outputs(
          head, h, f, False))(hidden, data)
      out[f"{name}_loss"] = np.asarray(loss)
      out[f"{name}_predictions"] = np.asarray(outputs["predictions"])
    np.savez(f"{sys.argv[1]}/out.npz", **out)
""")


def test_crf_and_multiple_choice_heads_run_the_same_under_jax(tmp_path):
  from keras import ops
  rng = np.random.default_rng(0)
  mask = (rng.random((3, 12)) < 0.6).astype(np.float32)
  mask[2] = 0  # a row without words
  data = {
      "pos": {"hidden": rng.normal(size=(3, 12, HIDDEN)),
              "label_weights": mask,
              "label_ids": rng.integers(0, len(TAGS), (3, 12))},
      "race": {"hidden": rng.normal(size=(3, 4, 12, HIDDEN)),
               "label_ids": np.array([0, 3, 1])}}
  want = {}
  for name, (task, head) in build_heads().items():
    features = {k: v.astype(np.float32 if v.dtype == np.float64 else
                            np.int32) for k, v in data[name].items()}
    for i, variable in enumerate(head.weights):  # CRF transitions too
      variable.assign(rng.normal(0, 1, variable.shape).astype(np.float32))
      features[f"weight{i}"] = ops.convert_to_numpy(variable)
    np.savez(tmp_path / f"{name}.npz", **features)
    loss, outputs = task.loss_and_outputs(head, features.pop("hidden"),
                                          features, False)
    want[f"{name}_loss"] = ops.convert_to_numpy(loss)
    want[f"{name}_predictions"] = ops.convert_to_numpy(
        outputs["predictions"])
  assert len(build_heads()["pos"][1].weights) == 5  # kernel, bias, CRF x3
  done = subprocess.run(
      [sys.executable, "-c", JAX_SCRIPT, str(tmp_path)], capture_output=True,
      text=True, timeout=300, cwd=ROOT,
      env=dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=str(ROOT),
               JAX_PLATFORMS="cpu"))
  assert done.returncode == 0, done.stderr[-3000:]
  got = np.load(tmp_path / "out.npz")
  for key in ("pos_loss", "race_loss"):
    np.testing.assert_allclose(got[key], want[key], rtol=1e-4, atol=1e-5)
  assert want["pos_loss"][2] == 0
  tagged = mask > 0
  np.testing.assert_array_equal(got["pos_predictions"][tagged],
                                want["pos_predictions"][tagged])
  np.testing.assert_array_equal(got["race_predictions"],
                                want["race_predictions"])
  assert len(set(want["pos_predictions"][tagged])) > 1
