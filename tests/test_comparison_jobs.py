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

from comparison.jobs import Job, JobRunner, last_json_line
from comparison.config import ROOT
from comparison.runner import select
from util.errors import UserError

# A job that writes "start KEY" and "end KEY" to a shared event log
# (argv[1]), and between them, in order, for each step in argv[3:]: waits
# for another job's event ("wait=end b"), saves a file ("save=PATH", logged
# as "saved KEY") or fails ("fail"). The tests check the log's order, so
# that no outcome hangs on how long a job sleeps.
EVENTS = """
import json, os, sys, time
log, key, steps = sys.argv[1], sys.argv[2], sys.argv[3:]
def event(what):
  fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
  os.write(fd, f"{what} {key}\\n".encode())
  os.close(fd)
def seen(line):
  with open(log) as f:
    return line in f.read().splitlines()
event("start")
for step in steps:
  kind, _, arg = step.partition("=")
  if kind == "wait":
    deadline = time.monotonic() + 120  # a hang guard, not a timing check
    while not seen(arg):
      if time.monotonic() > deadline:
        event("gave-up")
        sys.exit(f"error: {key} never saw {arg!r}")
      time.sleep(0.01)
  elif kind == "save":
    open(arg, "w").close()
    event("saved")
  elif kind == "fail":
    print("error: boom")
    sys.exit(3)
event("end")
print(json.dumps({"threads": os.environ.get("TF_NUM_INTRAOP_THREADS")}))
"""
# A job that must not run (it is done, or another runner runs it).
RAN_AGAIN = "import sys; sys.exit('error: ran a second time')"
THREAD_VARS = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS",
               "OMP_NUM_THREADS")


def job(key, log="", steps=(), after=(), code=EVENTS, defer=False,
        ready_file=""):
  return Job(key=key, group="g", units=1, argv=["-c", code, log, key,
                                                *steps],
             parse=last_json_line, after=after, defer=defer,
             ready_file=ready_file)


def events(log):
  with open(log) as f:
    return f.read().splitlines()


def before(log, first, then):
  lines = events(log)
  return lines.index(first) < lines.index(then)


def wait_until(predicate, what):
  deadline = time.monotonic() + 120  # a hang guard, not a timing check
  while not predicate():
    if time.monotonic() > deadline:
      pytest.fail(f"{what} never happened")
    time.sleep(0.01)


@pytest.fixture(autouse=True)
def no_thread_settings(monkeypatch):
  for name in THREAD_VARS:
    monkeypatch.delenv(name, raising=False)


@pytest.fixture
def log(tmp_path):
  return str(tmp_path / "events.log")


def test_parallel_jobs_overlap_and_wait_for_what_they_need(tmp_path, log):
  runner = JobRunner(str(tmp_path / "out"), parallel=2)
  reports = []
  # c needs a; a and b each end only once the other has started: at once.
  runner.run([job("a", log, ["wait=start b"]),
              job("c", log, after=("a",)),
              job("b", log, ["wait=start a"])],
             after_each=lambda: reports.append(1))
  assert before(log, "end a", "start c")  # not before what it needs
  cores = len(os.sched_getaffinity(0))
  assert {runner.result(k)["threads"] for k in "abc"} == {
      str(max(1, cores // 2))}
  assert len(reports) == 3
  # A rerun finds all three done and starts nothing.
  again = JobRunner(str(tmp_path / "out"), parallel=2)
  again.run([job(k, code=RAN_AGAIN) for k in "acb"])
  assert len(events(log)) == 6


def test_one_job_at_a_time_keeps_the_order_and_the_threads(tmp_path, log):
  runner = JobRunner(str(tmp_path / "out"))
  runner.run([job("a", log), job("b", log)])
  assert events(log) == ["start a", "end a", "start b", "end b"]
  assert runner.result("a")["threads"] is None  # TF's default: every core


@pytest.mark.parametrize("parallel", [1, 2])
def test_a_finished_runs_jobs_come_before_the_next_pretraining(tmp_path, log,
                                                               parallel):
  runner = JobRunner(str(tmp_path / "out"), parallel=parallel)
  # Three runs' pretraining (deferred) and each run's eval. With two slots,
  # run 2 goes on until run 3 has started, so p1's slot chooses first.
  # p1 waits for p2 to start, so both start before either ends.
  long = ["wait=start p3"] if parallel == 2 else []
  first = ["wait=start p2"] if parallel == 2 else []
  jobs = [job("p1", log, first, defer=True),
          job("p2", log, long, defer=True), job("p3", log, defer=True)]
  jobs += [job(f"e{i}", log, after=(f"p{i}",)) for i in (1, 2, 3)]
  runner.run(jobs)
  order = [line.split()[1] for line in events(log)
           if line.startswith("start")]
  if parallel == 1:  # each run finished before the next one starts
    assert order == ["p1", "e1", "p2", "e2", "p3", "e3"]
  else:  # p1 and p2 at once; p1's slot does e1 before it takes p3
    assert sorted(order[:2]) == ["p1", "p2"]
    assert order.index("e1") < order.index("p3") < order.index("e2")


def test_a_failed_job_stops_the_others_and_names_itself(tmp_path, log,
                                                        capsys):
  runner = JobRunner(str(tmp_path / "out"), parallel=2)
  # a runs until stopped; b fails once a is running.
  with pytest.raises(UserError, match=r"^b failed \(exit 3\): error: boom"):
    runner.run([job("a", log, ["wait=never"]),
                job("b", log, ["wait=start a", "fail"])])
  # a was terminated, not waited for (it would have given up, and logged it)
  assert sorted(events(log)) == ["start a", "start b"]
  assert runner.result("a") is None and runner.result("b") is None
  out = capsys.readouterr().out
  assert "[2/2] b" in out and "stopping 1 running job(s)" in out
  assert not list(tmp_path.glob("out/jobs/*.running"))  # a rerun may take them


def test_a_job_waiting_on_an_unplanned_one_is_an_error(tmp_path):
  runner = JobRunner(str(tmp_path), parallel=2)
  with pytest.raises(UserError, match="x waits for nothing, which this "
                                      "command does not run"):
    runner.run([job("x", after=("nothing",))])


def test_a_checkpoints_jobs_start_once_it_is_saved(tmp_path, log,
                                                   monkeypatch):
  monkeypatch.setattr("comparison.jobs.POLL_SECONDS", 0.1)
  index = str(tmp_path / "ckpt-1.index")
  # p saves its checkpoint only after x, which waits for a free slot, has
  # ended: e taking a slot before the save would be logged first. Then p
  # trains on until e has started: e must not wait for p's end.
  pretrain = job("p", log, ["wait=end x", f"save={index}", "wait=start e"])
  runner = JobRunner(str(tmp_path / "out"), parallel=2)
  runner.run([pretrain, job("e", log, after=("p",), ready_file=index),
              job("x", log)])
  assert before(log, "saved p", "start e")  # not before the save
  assert before(log, "start e", "end p")  # nor at the end


def test_a_job_another_process_finished_is_skipped(tmp_path, log,
                                                   monkeypatch):
  monkeypatch.setattr("comparison.jobs.POLL_SECONDS", 0.1)  # b's record may lag its end
  out = str(tmp_path / "out")

  def other_process():  # e.g. `--only b` while the full command runs a
    JobRunner(out).run([job("b", log)])

  thread = threading.Thread(target=other_process)
  thread.start()
  # a ends once the other runner's b has: this runner then finds b done.
  JobRunner(out).run([job("a", log, ["wait=end b"]),
                      job("b", code=RAN_AGAIN)])
  thread.join()
  assert events(log).count("start b") == 1  # not run a second time


def test_a_job_another_runner_runs_is_waited_for_not_run_twice(
    tmp_path, log, monkeypatch, capsys):
  # E.g. a rerun started while the last runner still stops: its pretraining
  # must not resume from an older checkpoint beside the one saving.
  monkeypatch.setattr("comparison.jobs.POLL_SECONDS", 0.1)
  out = str(tmp_path / "out")
  other = JobRunner(out)
  claimed, claim = threading.Event(), other._claim
  other._claim = lambda key: claim(key) and (claimed.set() or True)
  # The other runner's p goes on until this runner has seen its claim.
  thread = threading.Thread(target=lambda: other.run(
      [job("p", log, ["wait=seen p"])]))
  thread.start()
  assert claimed.wait(120), "the other runner never claimed p"
  runner = JobRunner(out, parallel=2)
  holder = runner._holder

  def seeing(key):
    found = holder(key)
    if found and key == "p":
      with open(log, "a") as f:
        f.write("seen p\n")
    return found

  runner._holder = seeing
  runner.run([job("p", code=RAN_AGAIN, defer=True),
              job("e", log, after=("p",))])
  thread.join()
  assert events(log).count("start p") == 1  # started once
  assert before(log, "end p", "start e")
  assert "waiting for p, which another runner runs (process " \
      f"{os.getpid()} on " in capsys.readouterr().out
  assert not list(tmp_path.glob("out/jobs/*.running"))


def test_a_killed_runners_claim_is_taken_over(tmp_path, log):
  gone = subprocess.Popen([sys.executable, "-c", "pass"])
  gone.wait()  # a runner killed with -9 leaves its marker behind
  (tmp_path / "jobs").mkdir()
  (tmp_path / "jobs" / "a.running").write_text(
      f"{gone.pid} {socket.gethostname()}\n")
  runner = JobRunner(str(tmp_path))
  runner.run([job("a", log)])
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
def path(name):
  return os.path.join(sys.argv[1], name)
def save(signum, frame):  # a checkpoint takes until the test releases it
  open(path(sys.argv[2] + '.saving'), 'w').close()
  deadline = time.monotonic() + 120  # a hang guard, not a timing check
  while not os.path.exists(path('release')) and time.monotonic() < deadline:
    time.sleep(0.01)
  open(path(sys.argv[2] + '.saved'), 'w').close()
  sys.exit(143)
signal.signal(signal.SIGTERM, save)
open(path(sys.argv[2] + '.pid'), 'w').write(str(os.getpid()))
while True:
  signal.pause()
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
  wait_until(lambda: proc.poll() is not None or all(
      os.path.exists(p) and os.path.getsize(p) for p in pids),
             "both jobs running")
  assert proc.poll() is None
  proc.send_signal(signal.SIGTERM)
  wait_until(lambda: all(os.path.exists(os.path.join(d, k + ".saving"))
                         for k in "ab"), "both jobs saving")
  assert proc.poll() is None  # the runner waits while its jobs save
  open(os.path.join(d, "release"), "w").close()
  out, err = proc.communicate(timeout=120)  # a hang guard
  assert proc.returncode == 2, err
  assert err.strip().splitlines()[-1].startswith(
      "error: stopped by SIGTERM"), err
  for k in "ab":  # each job got the notice and saved before the runner ended
    assert os.path.exists(os.path.join(d, k + ".saved")), k
    with open(os.path.join(d, k + ".pid")) as f:
      assert not os.path.exists(f"/proc/{f.read()}"), k  # and is gone
  assert not glob.glob(os.path.join(d, "jobs", "*.running"))  # unclaimed
