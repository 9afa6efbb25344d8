"""The JAX driver's checkpoints (training/npz_checkpoints.py) under faults
(issue 65, 3 and 5): a disk that fills at a save leaves nothing of it (no
ckpt-N.npz.tmp, the index and every earlier file byte-identical) and says
so in one line; a truncated checkpoint is named. NumPy only: the same code
runs under KERAS_BACKEND=jax (pretrain/jax_run.py)."""

import numpy as np
import pytest

from tests.script_checks import snapshot
from tests.small_disk import no_space
from tests.small_disk import small_disk
from training import npz_checkpoints
from util.errors import UserError

STATE = {"model": [np.arange(6, dtype=np.float32).reshape(2, 3)],
         "optimizer": [np.zeros(3, np.float32), np.ones(2, np.int64)]}


def _big():
  """A state larger than the room the disk is left with."""
  return {"model": [np.ones((512, 1024), np.float32)], "optimizer": []}


def test_a_full_disk_at_a_save_leaves_nothing_of_it(tmp_path, monkeypatch):
  with small_disk(tmp_path / "disk", "8m") as disk:
    model_dir = str(disk.path)
    npz_checkpoints.save(model_dir, 10, _big())
    before = snapshot(disk.path)
    if disk.mounted:
      disk.fill(leave=64 << 10)  # room for part of ckpt-20 only
    else:
      real_open = npz_checkpoints.storage.open_file

      def open_file(path, mode="r"):
        if path.endswith("ckpt-20.npz.tmp"):
          f = real_open(path, mode)
          f.write(b"PK\x03\x04 half")  # a part written, then ENOSPC

          class Full:
            def __enter__(self):
              return self

            def __exit__(self, *exc):
              f.close()

            def write(self, data):
              raise no_space(path)

            def __getattr__(self, name):
              return getattr(f, name)
          return Full()
        return real_open(path, mode)
      monkeypatch.setattr(npz_checkpoints.storage, "open_file", open_file)
    with pytest.raises(UserError) as info:
      npz_checkpoints.save(model_dir, 20, _big())
    assert str(info.value) == (
        f"cannot save checkpoint {model_dir}/ckpt-20.npz: No space left on "
        f"device; the last complete checkpoint is {model_dir}/ckpt-10.npz "
        "(nothing else was changed)")
    disk.free()
    assert snapshot(disk.path) == before  # no .tmp, the index as it was
    assert npz_checkpoints.latest(model_dir).endswith("ckpt-10.npz")


def test_a_truncated_checkpoint_is_named(tmp_path):
  path = npz_checkpoints.save(str(tmp_path), 10, STATE)
  data = open(path, "rb").read()
  for cut in (data[:len(data) // 2], data[:40], b""):
    with open(path, "wb") as f:
      f.write(cut)
    with pytest.raises(UserError, match=rf"^cannot read checkpoint {path}: "
                       r"\w+: .* \(truncated or damaged; the one before it "
                       r"may be whole: name it in checkpoint.json\)$"):
      npz_checkpoints.load(path, STATE)
  with open(path, "wb") as f:
    f.write(data)
  loaded = npz_checkpoints.load(path, STATE)
  assert np.array_equal(loaded["model"][0], STATE["model"][0])


def test_changed_hparams_are_recorded_only_with_a_save(tmp_path):
  """Issue 65, 12, as the JAX driver finds its run (npz checkpoints): with
  --accept-hparam-changes, pretrain_config.json stays as it was until a
  checkpoint trained with the new hparams is saved (commit(saved=True),
  which JaxRun.train calls after each save; the TF Trainer likewise)."""
  import dataclasses  # pylint: disable=g-import-not-at-top
  import json  # pylint: disable=g-import-not-at-top
  from pretrain import run_dir  # pylint: disable=g-import-not-at-top
  from pretrain.config import PretrainingConfig  # pylint: disable=g-import-not-at-top
  config = PretrainingConfig(data_dir=str(tmp_path), model_name="m")
  config.resolve()
  model_dir = tmp_path / "models" / "m"
  model_dir.mkdir(parents=True)
  saved = json.dumps(dataclasses.asdict(config), indent=2, sort_keys=True)
  (model_dir / "pretrain_config.json").write_text(saved)
  npz_checkpoints.save(str(model_dir), 10, STATE)
  changed = dataclasses.replace(config, learning_rate=1e6,
                                accept_hparam_changes=True)
  lock, commit = run_dir.prepare(changed, True, lock=True, backend="jax")
  try:
    commit()  # restored: nothing saved yet (a diverging loss stops here)
    assert (model_dir / "pretrain_config.json").read_text() == saved
    assert not (model_dir / "pretrain_config.step-10.json").exists()
    commit(saved=True)
    assert json.loads((model_dir / "pretrain_config.json").read_text())[
        "learning_rate"] == 1e6
    assert (model_dir / "pretrain_config.step-10.json").read_text() == saved
  finally:
    lock.release()
