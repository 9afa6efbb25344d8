"""Hostile run directories and events for run_pretraining.py and
run_comparison.py (export_model.py's are in test_hostile_scripts.py).

A trained tiny run (checkpoints at steps 10 and 20) is copied and damaged
as a careless user or a full disk would: a `checkpoint` index that names
a missing checkpoint or is gone, a truncated, binary or missing
pretrain_config.json, another objective's directory, a truncated
checkpoint, a model_dir that is a file, a symlink loop or read-only, a
second run on a folder in use. Each case must exit 2 with exactly one
`error:` line, no traceback, and leave every file that was there
byte-identical. Then the events: Ctrl-C while training saves and exits,
and a killed run does not leave its folder locked.
"""

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

import run_comparison
import run_pretraining
from tests.pretraining_runs import ROOT
from tests.pretraining_runs import hparams
from tests.script_checks import refused
from tests.script_checks import snapshot

RUN = hparams(num_train_steps=20, save_checkpoints_steps=10,
              num_eval_steps=1)


@pytest.fixture(scope="module")
def trained(data_dir):
  """DATA/models/m: 20 steps, ckpt-10 and ckpt-20, evaluated once."""
  run_pretraining.main(["--data-dir", data_dir, "--model-name", "m",
                        "--hparams", RUN, "--do-eval"])
  model_dir = os.path.join(data_dir, "models", "m")
  assert {"ckpt-10.index", "ckpt-20.index", "eval_results.json",
          "training.lock"} <= set(os.listdir(model_dir))
  return model_dir


def _copy(trained, tmp_path, damage=None):
  copy = tmp_path / "run"
  shutil.copytree(trained, copy)
  if damage:
    damage(copy)
  return copy


def _pt(data_dir, model_dir, *extra, run=RUN):
  return ["--data-dir", data_dir, "--model-dir", str(model_dir),
          "--hparams", run, *[str(x) for x in extra]]


EVAL = ("--no-do-train", "--do-eval")

PRETRAINING = {}  # name -> (argv maker, the error line's pattern)


def case(match):
  def register(fn):
    PRETRAINING[fn.__name__] = (fn, match)
    return fn
  return register


def _index(text):
  def damage(folder):
    (folder / "checkpoint").write_bytes(text)
  return damage


def _remove(name):
  def damage(folder):
    (folder / name).unlink()
  return damage


def _write(name, data):
  def damage(folder):
    (folder / name).write_bytes(data)
  return damage


def _half(name):
  def damage(folder):
    data = (folder / name).read_bytes()
    (folder / name).write_bytes(data[:len(data) // 2])
  return damage


MISSING_99 = (r"run/checkpoint names ckpt-99, which is not there, but "
              r".*/run holds ckpt-10, ckpt-20: nothing was read or written; "
              r"to go on from ckpt-20, put the line model_checkpoint_path: "
              r"\"ckpt-20\" in .*/run/checkpoint$")


@case(MISSING_99)
def eval_with_index_naming_a_missing_checkpoint(d, t, w):  # issue 41, 1.
  return _pt(d, _copy(w, t, _index(b'model_checkpoint_path: "ckpt-99"\n')),
             *EVAL)


@case(MISSING_99)
def train_with_index_naming_a_missing_checkpoint(d, t, w):
  return _pt(d, _copy(w, t, _index(b'model_checkpoint_path: "ckpt-99"\n')))


@case(r"run/checkpoint, the list of checkpoints, is missing but .*/run holds "
      r"ckpt-10, ckpt-20")
def index_missing(d, t, w):
  return _pt(d, _copy(w, t, _remove("checkpoint")))


@case(r"run/checkpoint \(the list of checkpoints\) is damaged")
def index_binary(d, t, w):
  return _pt(d, _copy(w, t, _index(b"\xff\xfe\x00garbage" * 8)), *EVAL)


@case(r"run/pretrain_config.json is not valid JSON \(.*\); the run's "
      r"checkpoints are left alone")
def config_truncated(d, t, w):  # issue 41, 2.
  return _pt(d, _copy(w, t, _half("pretrain_config.json")))


@case(r"run/pretrain_config.json line 1: not UTF-8 text")
def config_binary(d, t, w):
  return _pt(d, _copy(w, t, _write("pretrain_config.json", b"\x80\x81{}")))


@case(r"run/pretrain_config.json is not a JSON object of hparams")
def config_a_list(d, t, w):
  return _pt(d, _copy(w, t, _write("pretrain_config.json", b"[1, 2]")),
             *EVAL)


@case(r"run/pretrain_config.json is a folder, not a file")
def config_a_folder(d, t, w):
  def damage(folder):
    (folder / "pretrain_config.json").unlink()
    (folder / "pretrain_config.json").mkdir()
  return _pt(d, _copy(w, t, damage))


@case(r"run holds checkpoints \(the newest ckpt-20\) but no "
      r"pretrain_config.json: the hparams they were trained with are "
      r"unknown")
def config_missing(d, t, w):
  return _pt(d, _copy(w, t, _remove("pretrain_config.json")))


@case(r"run holds a model trained with objective='mlm', but this run has "
      r"objective='electra'")
def another_objectives_run(d, t, w):
  def damage(folder):
    path = folder / "pretrain_config.json"
    path.write_text(json.dumps(dict(json.loads(path.read_text()),
                                    objective="mlm")))
  return _pt(d, _copy(w, t, damage))


@case(r"cannot restore checkpoint .*run/ckpt-20")
def checkpoint_truncated(d, t, w):
  return _pt(d, _copy(w, t, _half("ckpt-20.data-00000-of-00001")),
             "--num-train-steps", 30)


@case(r"cannot restore checkpoint .*run/ckpt-20")
def eval_checkpoint_truncated(d, t, w):
  return _pt(d, _copy(w, t, _half("ckpt-20.data-00000-of-00001")), *EVAL)


@case(r"eval_checkpoint not found: .*run/ckpt-30")
def eval_checkpoint_missing(d, t, w):
  copy = _copy(w, t)
  return _pt(d, copy, *EVAL, "--eval-checkpoint", copy / "ckpt-30")


@case(r"model_dir .*notes.txt is a file, not a folder")
def model_dir_a_file(d, t, w):
  (t / "notes.txt").write_text("the user's own file\n")
  return _pt(d, t / "notes.txt")


@case(r"model_dir .*loop/run: .*loop is a broken symlink or a symlink loop")
def model_dir_in_a_symlink_loop(d, t, w):
  os.symlink("loop", t / "loop")
  return _pt(d, t / "loop" / "run")


@case(r"max_seq_length 32 disagrees with the dataset \(64")
def data_of_another_length(d, t, w):
  return _pt(d, _copy(w, t), run=hparams(max_seq_length=32))


@case(r"run was trained \(to step 20\) with other hparams: mask_prob 0.15 "
      r"-> 0.2")
def resumed_with_other_hparams(d, t, w):
  return _pt(d, _copy(w, t), "--mask-prob", 0.2, "--num-train-steps", 30)


@case(r"^error: init_checkpoint .*/nowhere/ckpt-5 does not exist$")
def init_checkpoint_missing(d, t, w):  # issue 54, 8: "no checkpoint found"
  return _pt(d, t / "new", "--init-checkpoint", t / "nowhere" / "ckpt-5")


@pytest.mark.parametrize("name", sorted(PRETRAINING))
def test_pretraining_refuses(data_dir, trained, tmp_path, capsys, name):
  make_argv, match = PRETRAINING[name]
  argv = make_argv(data_dir, tmp_path, trained)
  out, _ = refused(run_pretraining.main, argv, match, capsys,
                   [data_dir, tmp_path])
  assert "step 1" not in out and "saved" not in out


def test_pretraining_refuses_a_read_only_model_dir(data_dir, trained,
                                                   tmp_path, capsys,
                                                   monkeypatch):
  """Permissions do not stop root (as tests run here): the folder reads
  as not writable."""
  copy = _copy(trained, tmp_path)
  real_access = os.access
  monkeypatch.setattr(os, "access", lambda path, mode: (
      False if os.path.abspath(path) == str(copy) else
      real_access(path, mode)))
  refused(run_pretraining.main, _pt(data_dir, copy, "--num-train-steps", 30),
          r"cannot write to model_dir .*run: permission denied", capsys,
          [data_dir, tmp_path])


def test_a_second_run_on_a_folder_in_use_is_refused(data_dir, trained,
                                                    tmp_path, capsys):
  """The lock another run holds (here: this process, through another open
  file) refuses a training run, naming the holder; an eval-only run goes
  on; once released, training goes on."""
  from pretrain import run_dir
  copy = _copy(trained, tmp_path)
  lock = run_dir.RunLock(str(copy))
  try:
    refused(run_pretraining.main, _pt(data_dir, copy, "--num-train-steps", 30),
            rf"run is in use by another training run \(pid {os.getpid()} on "
            r".*, started .*\): wait for it to end, or use another "
            r"--model-name", capsys, [data_dir, tmp_path])
  finally:
    lock.release()
  run_pretraining.main(_pt(data_dir, copy, "--num-train-steps", 30))
  assert "from step 20 to 30" in capsys.readouterr().out


LOCK_AND_WAIT = """
import sys
from pretrain import run_dir
lock = run_dir.RunLock(sys.argv[1])
print("locked", flush=True)
sys.stdin.read()  # holds the lock until killed
"""


def test_a_killed_run_leaves_no_lock(tmp_path):
  """SIGKILL gives no chance to clean up: the kernel drops the flock."""
  from pretrain import run_dir
  proc = subprocess.Popen([sys.executable, "-c", LOCK_AND_WAIT,
                           str(tmp_path)], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT))
  try:
    assert proc.stdout.readline() == "locked\n"
    from util.errors import UserError
    with pytest.raises(UserError, match=rf"pid {proc.pid} on "):
      run_dir.RunLock(str(tmp_path))
  finally:
    proc.kill()
    proc.wait()
  run_dir.RunLock(str(tmp_path)).release()  # free again


# Ctrl-C as the first loop's log line is written: from inside, so the
# signal lands at a known point (no timing).
SIGINT_AT_FIRST_LOG = """
import os, signal, sys
from training import step_log
log = step_log.StepLog.log
def log_then_interrupt(self, *args, **kwargs):
  log(self, *args, **kwargs)
  os.kill(os.getpid(), signal.SIGINT)
step_log.StepLog.log = log_then_interrupt
import run_pretraining
run_pretraining.main(sys.argv[1:])
"""


def test_ctrl_c_saves_and_exits_like_sigterm(data_dir):
  model_dir = os.path.join(data_dir, "models", "interrupted")
  result = subprocess.run(
      [sys.executable, "-c", SIGINT_AT_FIRST_LOG, "--data-dir", data_dir,
       "--model-name", "interrupted", "--hparams",
       hparams(num_train_steps=1000, save_checkpoints_steps=1000,
               iterations_per_loop=10)],
      capture_output=True, text=True, timeout=600, cwd=ROOT,
      env=dict(os.environ, PYTHONPATH=ROOT))
  assert result.returncode == 130, result.stderr[-2000:]
  assert "Traceback" not in result.stderr, result.stderr[-2000:]
  assert "SIGINT: saving a checkpoint after this loop, then stopping" in \
      result.stdout
  # No save was due before step 1000: this one is the interrupt's.
  assert result.stdout.rstrip().endswith(
      f"saved {model_dir}/ckpt-10\nSIGINT: saved step 10 and stopped"), \
      result.stdout[-2000:]
  assert [f for f in os.listdir(model_dir) if f.endswith(".index")] == [
      "ckpt-10.index"]


# ---------------------------------------------------------- comparison
def _cmp(tmp_path, *extra):
  return ["--output-dir", str(tmp_path / "cmp"), "--tasks", "",
          "--objectives", "electra", *[str(x) for x in extra]]


COMPARISON = {
    # Issue 65, 11: against the model's 512 positions, before planning.
    "seq_length_past_positions": (
        ("--dry-run", "--max-seq-length", "100000000"),
        r"^error: max_seq_length 100000000 exceeds the model's 512 "
        r"positions"),
    "seq_length_past_set_positions": (
        ("--dry-run", "--max-seq-length", "256", "--pretrain-hparams",
         '{"model_hparam_overrides": {"max_position_embeddings": 128}}'),
        r"max_seq_length 256 exceeds the model's 128 positions"),
    "negative_budget": (("--budget-flops=-1e12",),
                        r"hparam 'budget_flops' must be >= 0, got -1e\+12"),
    "nan_budget": (("--budget-flops", "nan"),
                   r"hparam 'budget_flops' must be a finite number, got nan"),
    "objective_twice": (("--objectives", "electra,mlm,electra"),
                        r"objective 'electra' is named twice in --objectives"),
    "no_objectives": (("--objectives", " , "), r"no objectives"),
    "zero_checkpoints": (("--num-checkpoints", "0"),
                         r"hparam 'num_checkpoints' must be >= 1, got 0"),
    "warmup_fraction_one": (("--warmup-fraction", "1"),
                            r"hparam 'warmup_fraction' must be in \(0, 1\)"),
    "bad_pretrain_hparam": (("--pretrain-hparams", '{"clip_norm": -1}'),
                            r"--pretrain-hparams: hparam 'clip_norm' must be "
                            r">= 0, got -1"),
    "duplicate_key": (("--pretrain-hparams",
                       '{"temperature": 1, "temperature": 2}'),
                      r"hparam 'pretrain_hparams' names 'temperature' twice"),
    "budget_below_a_step_per_checkpoint": (
        ("--budget-flops", "1e6", "--dry-run"),
        r"budget_flops 1e\+06 is less than electra's 4 steps \(one per "
        r"checkpoint\) of .* FLOPs: give at least "),
    "glue_dir_a_file": (("--tasks", "rte", "--glue-dir", __file__),
                        r"glue_dir .*test_hostile_runs.py is a file, not a "
                        r"folder"),
    "finetune_checkpoint_out_of_range": (
        ("--finetune-checkpoints", "5"),
        r"finetune_checkpoints must be all, final or numbers in 1..4"),
    # issue 54, 6.
    "unknown_task_dry_run": (("--tasks", "cola,bogus", "--dry-run"),
                             r"unknown task 'bogus' in --tasks \(choose from "
                             r"cola, sst, "),
    "unknown_objective": (("--objectives", "mlm,electraa:2"),
                          r"unknown objective 'electraa' in --objectives "
                          r"\(choose from .*all_tokens_mlm, bert, electra,"),
}

REFUSED_BEFORE_KERAS = """
import sys, run_comparison
try:
  run_comparison.main(sys.argv[1:])
except SystemExit as e:
  print(e.code, sorted(m for m in ("keras", "tensorflow", "jax")
                       if m in sys.modules))
"""


def test_an_unknown_objective_is_refused_before_keras_loads(tmp_path):
  """Issue 54, 6: in under a second, not after TensorFlow's import."""
  done = subprocess.run(
      [sys.executable, "-c", REFUSED_BEFORE_KERAS, "--output-dir",
       str(tmp_path / "cmp"), "--objectives", "electraa", "--tasks", ""],
      capture_output=True, text=True, timeout=120, cwd=ROOT)
  assert done.stdout.split("\n")[0] == "2 []", done.stdout + done.stderr
  assert "unknown objective 'electraa'" in done.stderr


@pytest.mark.parametrize("name", sorted(COMPARISON))
def test_comparison_refuses(tmp_path, capsys, name):
  extra, match = COMPARISON[name]
  refused(run_comparison.main, _cmp(tmp_path, *extra), match, capsys,
          [tmp_path])
  assert not (tmp_path / "cmp").exists()


def _planned(data_dir, tmp_path, budget):
  """A comparison over the built data whose plan.json holds `budget`."""
  out = tmp_path / "cmp"
  (out / "jobs").mkdir(parents=True)
  (out / "logs").mkdir()
  (out / "plan.json").write_text(json.dumps({
      "budget_flops": budget, "model_size": "tiny", "max_seq_length": 64,
      "runs": {}}))
  return ["--pretrain-data-dir", data_dir, "--max-seq-length", 64]


def test_comparison_refuses_a_changed_plan_on_resume(data_dir, tmp_path,
                                                     capsys):
  extra = _planned(data_dir, tmp_path, 1e12)
  refused(run_comparison.main, _cmp(tmp_path, "--budget-flops", 2e12, *extra),
          r"cmp holds a comparison with budget_flops=1000000000000.0, not "
          r"2000000000000.0; use another --output-dir or the same settings",
          capsys, [data_dir, tmp_path])


@pytest.mark.parametrize("damage,match", [
    (b'{"budget_flops": 1e12, "model', r"cmp/plan.json is not valid JSON"),
    (b"[1, 2]", r"cmp/plan.json is not a comparison plan"),
])
def test_comparison_refuses_a_damaged_plan(data_dir, tmp_path, capsys,
                                           damage, match):
  extra = _planned(data_dir, tmp_path, 1e12)
  (tmp_path / "cmp" / "plan.json").write_bytes(damage)
  refused(run_comparison.main, _cmp(tmp_path, "--budget-flops", 1e12, *extra),
          match, capsys, [data_dir, tmp_path])


def test_comparison_refuses_an_output_dir_that_is_a_file(tmp_path, capsys):
  """Issue 54, 8: --dry-run writes nothing, but a file there is refused
  all the same, as the real run would."""
  (tmp_path / "cmp").write_text("the user's file\n")
  refused(run_comparison.main, _cmp(tmp_path, "--dry-run"),
          r"^error: output_dir .*/cmp is a file, not a folder$", capsys,
          [tmp_path])


def test_snapshot_sees_a_changed_file(tmp_path):
  """The byte-identity check these cases rely on does catch a change."""
  (tmp_path / "f").write_bytes(b"a")
  before = snapshot(tmp_path)
  (tmp_path / "f").write_bytes(b"b")
  assert snapshot(tmp_path) != before
