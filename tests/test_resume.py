"""Resuming a pretraining run: the hparams that change the math must be the
run's own (raising num_train_steps aside) unless --accept-hparam-changes,
and then the run's old config is kept beside the new one."""

import json
import os
import re

import pytest
import tensorflow as tf

import run_pretraining
from training import progress
from tests.pretraining_runs import hparams


def config_of(model_dir, name="pretrain_config.json"):
  with open(os.path.join(model_dir, name)) as f:
    return json.load(f)


def latest_step(model_dir):
  return int(tf.train.latest_checkpoint(model_dir).rsplit("-", 1)[1])


def run(data_dir, capsys, *argv, **kw):
  run_pretraining.main(["--data-dir", data_dir, "--model-name", "resumed",
                        "--hparams", hparams(**kw), *argv])
  return capsys.readouterr().out


def refused(data_dir, capsys, *argv, **kw):
  with pytest.raises(SystemExit) as info:
    run(data_dir, capsys, *argv, **kw)
  assert info.value.code == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1, err
  return err[0]


def test_resume_refuses_changed_hparams_unless_accepted(data_dir, capsys,
                                                        monkeypatch):
  model_dir = os.path.join(data_dir, "models", "resumed")
  run(data_dir, capsys, num_train_steps=20, temperature=2.0)
  assert latest_step(model_dir) == 20
  before = sorted(os.listdir(model_dir))

  # The run: the quickstart's temperature left out.
  line = refused(data_dir, capsys, num_train_steps=40)
  assert re.fullmatch(
      r"error: \S+/models/resumed was trained \(to step 20\) with other "
      r"hparams: temperature 2\.0 -> 1\.0; pass the run's own hparams .*"
      r"--accept-hparam-changes .*", line), line
  line = refused(data_dir, capsys, num_train_steps=20, temperature=2.0,
                 mask_prob=0.2, iterations_per_loop=5)
  assert "mask_prob 0.15 -> 0.2" in line
  assert "temperature" not in line and "iterations_per_loop" not in line
  # Nothing was written: same files, the saved config as it was.
  assert sorted(os.listdir(model_dir)) == before
  assert config_of(model_dir)["temperature"] == 2.0
  assert latest_step(model_dir) == 20

  # Evaluating with the run's own hparams works (and does not rewrite its
  # config); where and how often are not the math.
  monkeypatch.setattr(progress, "QUIET_SECONDS", 0.0)
  out = run(data_dir, capsys, "--no-do-train", "--do-eval",
            num_train_steps=20, temperature=2.0, num_eval_steps=2,
            iterations_per_loop=5, save_checkpoints_steps=7)
  assert re.search(r"^eval 2/2 batches \(100%\) \| 16 sequences \| "
                   r"[0-9.,]+ (batches/s|s per batch) \| took ", out,
                   re.M), out
  assert config_of(model_dir)["do_train"] is True
  assert set(os.listdir(model_dir)) - set(before) == {"eval",
                                                      "eval_results.json"}

  # Raising num_train_steps goes on, is logged, keeps the old config.
  out = run(data_dir, capsys, num_train_steps=30, temperature=2.0)
  assert ("num_train_steps raised from 20 to 30: continuing the run from "
          "step 20") in out
  assert "from step 20 to 30" in out and latest_step(model_dir) == 30
  assert config_of(model_dir)["num_train_steps"] == 30
  kept = config_of(model_dir, "pretrain_config.step-20.json")
  assert (kept["num_train_steps"], kept["temperature"]) == (20, 2.0)

  # --accept-hparam-changes: goes on at the new temperature; the old
  # config is kept beside (the earlier kept one untouched).
  out = run(data_dir, capsys, "--accept-hparam-changes", num_train_steps=40)
  assert ("hparams changed from step 30 on (--accept-hparam-changes): "
          "temperature 2.0 -> 1.0") in out
  assert latest_step(model_dir) == 40
  assert config_of(model_dir)["temperature"] == 1.0
  assert config_of(model_dir, "pretrain_config.step-30.json")[
      "temperature"] == 2.0
  assert config_of(model_dir, "pretrain_config.step-20.json") == kept
