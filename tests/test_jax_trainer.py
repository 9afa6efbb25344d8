"""pretrain/jax_trainer.py: data parallel over two (CPU) devices through
keras.distribution trains as one device does (input_sharding batches);
with input_sharding files each device holds and draws from its own share
of the training rows; the schedule in the jitted step is
training/optimization.py's, with traced step counts."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tests import slot_data

SCRIPT = textwrap.dedent("""
    import json, sys
    import jax
    import keras
    import numpy as np
    from pretrain import arrays
    from pretrain.config import PretrainingConfig
    from pretrain.jax_trainer import JaxTrainer
    from training import optimization
    path, model_dir, micro = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    assert len(jax.devices()) == 2, jax.devices()
    loaded = arrays.load(path)
    results = {}
    def configured(sharding):
      config = PretrainingConfig(
          pretrain_tfrecords=path, model_dir=model_dir, objective="electra",
          max_seq_length=32, train_batch_size=8, eval_batch_size=8,
          learning_rate=1e-3, num_warmup_steps=2, num_train_steps=6,
          num_eval_steps=2, mixed_precision="float32",
          input_sharding=sharding, **micro)
      config.validate()
      return config
    for name, devices in (("one", jax.devices()[:1]), ("two", jax.devices())):
      trainer = JaxTrainer(configured("batches"), loaded, devices=devices)
      losses = []
      for _ in range(2):  # two host calls of 3 steps
        sums, finite = trainer.advance(3, 6)
        losses.append(float(sums["loss"]) / float(finite))
      trainable, _, opt = trainer.state
      results[name] = {
          "losses": losses,
          "eval": trainer.evaluate(),
          "weights": float(sum(abs(w).sum() for w in trainable)),
          "devices": len(trainable[0].sharding.device_set),
          "lr": float(opt[trainer._lr_index]),
          "iterations": int(opt[trainer._iteration_index]),
          "tensorflow": "tensorflow" in sys.modules}
    # files: each device holds its share; a batch's rows come from each.
    trainer = JaxTrainer(configured("files"), loaded, devices=jax.devices())
    bounds, ids = trainer.shares.bounds, loaded.train["input_ids"]
    held = {shard.device: np.asarray(shard.data)[0]
            for shard in trainer.data["train"]["input_ids"].addressable_shards}
    rows = trainer.train_rows(3, 1)[0]
    got = jax.jit(trainer._from_shares)(trainer.data["train"], rows)
    results["files"] = {
        "total": loaded.num_examples(), "bounds": bounds,
        "held": trainer.arrays.num_examples(),
        "shares_in_place": [bool(np.array_equal(
            held[device][:bounds[d + 1] - bounds[d]],
            ids[bounds[d]:bounds[d + 1]]))
                            for d, device in enumerate(trainer.devices)],
        "batch_from_shares": bool(np.array_equal(
            np.asarray(got["input_ids"]),
            ids[[bounds[i // 4] + r for i, r in enumerate(rows)]])),
        "rows": rows.tolist()}
    results["last_lr"] = float(optimization.WarmupPolynomialDecay(
        1e-3, 6, 2)(5))
    print("RESULTS " + json.dumps(results))
""")


@pytest.fixture(scope="module")
def two_device_run(tmp_path_factory):
  root = tmp_path_factory.mktemp("dp")
  data_dir = slot_data.build_data(str(root / "data"))
  slot_data.export_arrays(data_dir, str(root / "arrays"))
  env = slot_data.slot_env(str(root), KERAS_BACKEND="jax",
                 XLA_FLAGS="--xla_force_host_platform_device_count=2")
  done = subprocess.run(
      [sys.executable, "-c", SCRIPT, str(root / "arrays"), str(root / "m"),
       json.dumps(slot_data.MICRO)], env=env, capture_output=True,
      text=True, timeout=900, cwd=slot_data.ROOT)
  assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
  line = [l for l in done.stdout.splitlines() if l.startswith("RESULTS ")]
  return json.loads(line[-1][len("RESULTS "):])


def test_two_devices_train_as_one(two_device_run):
  one, two = two_device_run["one"], two_device_run["two"]
  assert one["devices"] == 1 and two["devices"] == 2
  assert len(one["losses"]) == 2 and np.all(np.isfinite(one["losses"]))
  np.testing.assert_allclose(two["losses"], one["losses"], rtol=1e-4)
  np.testing.assert_allclose(two["weights"], one["weights"], rtol=1e-4)
  for key in ("disc_auc", "disc_loss", "masked_lm_loss"):
    np.testing.assert_allclose(two["eval"][key], one["eval"][key],
                               rtol=1e-3, err_msg=key)
  assert not one["tensorflow"] and not two["tensorflow"]


def test_files_gives_each_device_its_own_share(two_device_run):
  files = two_device_run["files"]
  total, bounds = files["total"], files["bounds"]
  assert bounds == [0, total // 2, total] and files["held"] == total
  assert files["shares_in_place"] == [True, True]
  assert files["batch_from_shares"]
  first, second = files["rows"][:4], files["rows"][4:]
  assert max(first) < bounds[1] and max(second) < total - bounds[1]


def test_the_step_uses_the_shared_schedule(two_device_run):
  for name in ("one", "two"):
    run = two_device_run[name]
    assert run["iterations"] == 6
    # The rate the last step applied: the schedule at step 5 of 6.
    np.testing.assert_allclose(run["lr"], two_device_run["last_lr"],
                               rtol=1e-6)
