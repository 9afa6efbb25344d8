"""The comparison's job runner: jobs at once with their share of the cores,
a job only after the jobs it needs, and no orphan when one fails or the
runner is stopped."""

import glob
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from comparison import jobs as J
from comparison.jobs import Job, JobRunner, last_json_line
from comparison.config import ROOT
from comparison.runner import select
from util.errors import UserError

# A job that records when it ran and the threads it was given.
TIMED = """
import json, os, sys, time
began = time.time()
time.sleep(float(sys.argv[1]))
print(json.dumps({"began": began, "ended": time.time(),
                  "threads": os.environ.get("TF_NUM_INTRAOP_THREADS")}))
"""
THREAD_VARS = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS",
               "OMP_NUM_THREADS")


def job(key, seconds=0.0, after=(), code=TIMED, defer=False, ready_file=""):
  return Job(key=key, group="g", units=1, argv=["-c", code, str(seconds)],
             parse=last_json_line, after=after, defer=defer,
             ready_file=ready_file)


@pytest.fixture(autouse=True)
def no_thread_settings(monkeypatch):
  for name in THREAD_VARS:
    monkeypatch.delenv(name, raising=False)


def test_parallel_jobs_overlap_and_wait_for_what_they_need(tmp_path):
  runner = JobRunner(str(tmp_path), parallel=2)
  reports = []
  # c needs a; b is free to run beside a.
  runner.run([job("a", 2.0), job("c", 0.1, after=("a",)), job("b", 1.0)],
             after_each=lambda: reports.append(1))
  a, b, c = (runner.result(k) for k in "abc")
  assert a["began"] < b["ended"] and b["began"] < a["ended"]  # at once
  assert c["began"] >= a["ended"]  # not before what it needs
  cores = len(os.sched_getaffinity(0))
  assert {r["threads"] for r in (a, b, c)} == {str(max(1, cores // 2))}
  assert len(reports) == 3
  # A rerun finds all three done and starts nothing.
  again = JobRunner(str(tmp_path), parallel=2)
  again.run([job("a", 60.0), job("c", 60.0), job("b", 60.0)])


def test_one_job_at_a_time_keeps_the_order_and_the_threads(tmp_path):
  runner = JobRunner(str(tmp_path))
  runner.run([job("a", 0.5), job("b", 0.5)])
  a, b = runner.result("a"), runner.result("b")
  assert b["began"] >= a["ended"]
  assert a["threads"] is None  # TensorFlow's default: every core


@pytest.mark.parametrize("parallel", [1, 2])
def test_a_finished_runs_jobs_come_before_the_next_pretraining(tmp_path,
                                                               parallel):
  runner = JobRunner(str(tmp_path), parallel=parallel)
  # Three runs' pretraining (deferred) and each run's eval; run 1 is short.
  jobs = [job("p1", 0.1, defer=True), job("p2", 3.0, defer=True),
          job("p3", 0.1, defer=True)]
  jobs += [job(f"e{i}", 0.1, after=(f"p{i}",)) for i in (1, 2, 3)]
  runner.run(jobs)
  began = {j.key: runner.result(j.key)["began"] for j in jobs}
  order = sorted(began, key=began.get)
  if parallel == 1:  # each run finished before the next one starts
    assert order == ["p1", "e1", "p2", "e2", "p3", "e3"]
  else:  # p1 and p2 at once; p1's slot does e1 before it takes p3
    assert order[:2] in (["p1", "p2"], ["p2", "p1"])
    assert began["e1"] < began["p3"] < began["e2"]


def test_a_failed_job_stops_the_others_and_names_itself(tmp_path, capsys):
  runner = JobRunner(str(tmp_path), parallel=2)
  failing = "import sys, time; time.sleep(0.5); print('error: boom'); " \
            "sys.exit(3)"
  began = time.time()
  with pytest.raises(UserError, match=r"^b failed \(exit 3\): error: boom"):
    runner.run([job("a", 60.0), job("b", code=failing)])
  assert time.time() - began < 30  # a was terminated, not waited for
  assert runner.result("a") is None and runner.result("b") is None
  out = capsys.readouterr().out
  assert "[2/2] b" in out and "stopping 1 running job(s)" in out
  assert not list(tmp_path.glob("jobs/*.running"))  # a rerun may take them


def test_a_job_waiting_on_an_unplanned_one_is_an_error(tmp_path):
  runner = JobRunner(str(tmp_path), parallel=2)
  with pytest.raises(UserError, match="x waits for nothing, which this "
                                      "command does not run"):
    runner.run([job("x", after=("nothing",))])


# A "pretraining" that saves a checkpoint (argv[2]) 1 s in, then trains on.
SAVES = """
import json, sys, time
time.sleep(1.0)
open(sys.argv[2], "w").close()
saved = time.time()
time.sleep(float(sys.argv[1]))
print(json.dumps({"saved": saved, "ended": time.time()}))
"""


def test_a_checkpoints_jobs_start_once_it_is_saved(tmp_path, monkeypatch):
  monkeypatch.setattr(J, "POLL_SECONDS", 0.1)
  index = str(tmp_path / "ckpt-1.index")
  pretrain = Job(key="p", group="g", units=1, argv=["-c", SAVES, "3", index],
                 parse=last_json_line)
  runner = JobRunner(str(tmp_path / "out"), parallel=2)
  runner.run([pretrain, job("e", 0.1, after=("p",), ready_file=index)])
  p, e = runner.result("p"), runner.result("e")
  assert p["saved"] <= e["began"] < p["ended"]  # not before, nor at the end


def test_a_job_another_process_finished_is_skipped(tmp_path):
  out = str(tmp_path)
  runner = JobRunner(out)

  def other_process():  # e.g. `--only b` while the full command runs a
    code = "import time; time.sleep(0.5); print('{\"by\": \"other\"}')"
    JobRunner(out).run([job("b", code=code)])

  thread = threading.Thread(target=other_process)
  thread.start()
  runner.run([job("a", 2.0), job("b", 0.0)])
  thread.join()
  assert runner.result("b") == {"by": "other"}  # not run a second time


def test_a_job_another_runner_runs_is_waited_for_not_run_twice(
    tmp_path, monkeypatch, capsys):
  # E.g. a rerun started while the last runner still stops: its pretraining
  # must not resume from an older checkpoint beside the one saving.
  monkeypatch.setattr(J, "POLL_SECONDS", 0.1)
  out = str(tmp_path)
  code = "import time; time.sleep(1.5); print('{\"by\": \"other\"}')"
  other = threading.Thread(target=lambda: JobRunner(out).run(
      [job("p", code=code)]))
  other.start()
  deadline = time.time() + 30
  while not os.path.exists(os.path.join(out, "jobs", "p.running")):
    assert time.time() < deadline, "the running job left no marker"
    time.sleep(0.01)
  runner = JobRunner(out, parallel=2)
  runner.run([job("p", 60.0, defer=True), job("e", 0.0, after=("p",))])
  other.join()
  assert runner.result("p") == {"by": "other"}  # started once
  assert runner.result("e")["began"] >= os.path.getmtime(
      os.path.join(out, "jobs", "p.json"))
  assert "waiting for p, which another runner runs (process " \
      f"{os.getpid()} on " in capsys.readouterr().out
  assert not list(tmp_path.glob("jobs/*.running"))


def test_a_killed_runners_claim_is_taken_over(tmp_path):
  gone = subprocess.Popen([sys.executable, "-c", "pass"])
  gone.wait()  # a runner killed with -9 leaves its marker behind
  (tmp_path / "jobs").mkdir()
  (tmp_path / "jobs" / "a.running").write_text(
      f"{gone.pid} {socket.gethostname()}\n")
  runner = JobRunner(str(tmp_path))
  runner.run([job("a", 0.0)])
  assert runner.result("a") is not None
  assert not list(tmp_path.glob("jobs/*.running"))


def test_only_selects_jobs_by_key_pattern():
  jobs = [job(k) for k in ("pretrain-electra", "eval-electra-2500",
                           "finetune-electra-5000-rte-1",
                           "finetune-mlm-9002-rte-1")]
  assert select(jobs, "") == jobs
  picked = select(jobs, "finetune-*-rte-1, eval-electra-2500")
  assert [j.key for j in picked] == [j.key for j in jobs[1:]]
  with pytest.raises(UserError, match=r"no planned job matches --only "
                     r"'blimp-\*'; job keys look like pretrain-electra"):
    select(jobs, "blimp-*")


# A runner of two jobs that each save (a file) when SIGTERM comes, as
# pretraining saves a checkpoint; argv[1] is the folder for their files.
RUNNER = """
import sys
from comparison.jobs import Job, JobRunner, last_json_line
from util.errors import main_guard
CHILD = '''
import os, signal, sys, time
def save(signum, frame):
  time.sleep(0.5)  # a checkpoint takes a while
  open(os.path.join(sys.argv[1], sys.argv[2] + '.saved'), 'w').close()
  sys.exit(143)
signal.signal(signal.SIGTERM, save)
open(os.path.join(sys.argv[1], sys.argv[2] + '.pid'), 'w').write(
    str(os.getpid()))
time.sleep(120)
'''
jobs = [Job(key=k, group="g", units=1, argv=["-c", CHILD, sys.argv[1], k],
            parse=last_json_line) for k in ("a", "b")]
main_guard(lambda: JobRunner(sys.argv[1], parallel=2).run(jobs))()
"""


def test_sigterm_stops_the_jobs_which_save_first(tmp_path):
  d = str(tmp_path)
  proc = subprocess.Popen([sys.executable, "-c", RUNNER, d], cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT), text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  pids = [os.path.join(d, k + ".pid") for k in "ab"]
  deadline = time.time() + 60
  while not all(os.path.exists(p) and os.path.getsize(p) for p in pids):
    assert time.time() < deadline and proc.poll() is None
    time.sleep(0.05)
  proc.send_signal(signal.SIGTERM)
  out, err = proc.communicate(timeout=60)
  assert proc.returncode == 2, err
  assert err.strip().splitlines()[-1].startswith(
      "error: stopped by SIGTERM"), err
  for k in "ab":  # each job got the notice and saved before the runner ended
    assert os.path.exists(os.path.join(d, k + ".saved")), k
    with open(os.path.join(d, k + ".pid")) as f:
      assert not os.path.exists(f"/proc/{f.read()}"), k  # and is gone
  assert not glob.glob(os.path.join(d, "jobs", "*.running"))  # unclaimed
