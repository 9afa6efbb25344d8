"""The comparison as a list of jobs, each one of the project's own scripts.

A job's result is written to OUTPUT_DIR/jobs/<key>.json only when it ends
well, so a rerun of the same command skips what is finished; pretraining
resumes from its last checkpoint by itself. Progress lines carry an ETA from
the seconds per unit (FLOPs for pretraining, one run for the rest) of the
jobs of the same group finished so far. With parallel > 1 the runner keeps
that many jobs going at once, each with its share of the cores. A free slot
takes the first job in order whose `after` jobs have finished (or whose
`ready_file` exists: a checkpoint's jobs start once it is saved), a `defer`
job only when no other is ready. Runners may share an output dir (e.g. a
`--only` run beside the full command): a running job is claimed by a
marker, OUTPUT_DIR/jobs/<key>.running, so no other runner starts it (or
its resumed pretraining) meanwhile; a runner waits for the jobs another one
runs, and skips those another one finished.
"""

import concurrent.futures
import dataclasses
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from comparison.config import ROOT
from training.progress import format_seconds
from util import storage
from util.errors import UserError

POLL_SECONDS = 10  # how often a waiting runner looks for new checkpoints
# The thread counts a job's TensorFlow (and OpenMP) reads from its env.
THREAD_VARS = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS",
               "OMP_NUM_THREADS")


def threads_per_job(parallel):
  """Each of `parallel` jobs' share of this process's cores."""
  return max(1, len(os.sched_getaffinity(0)) // parallel)


@dataclasses.dataclass
class Job:
  key: str  # unique and file-safe; names the result and log files
  group: str  # jobs of one group cost alike per unit (for the ETA)
  units: float  # cost units: FLOPs for pretraining, 1 otherwise
  argv: list  # script and flags, run with this Python in the repo root
  parse: object  # (job, stdout text) -> the result dict
  echo: bool = False  # show the job's own log lines (pretraining)
  info: dict = dataclasses.field(default_factory=dict)
  after: tuple = ()  # keys of the jobs that must finish first
  # Started only when no other job is ready: a new pretraining waits while
  # a finished run's evals and fine-tunes are to do, so results come early.
  defer: bool = False
  # Makes the job ready before its `after` jobs end: a checkpoint's index
  # (written last), so its evals and fine-tunes need not wait for the run.
  ready_file: str = ""


class JobRunner:
  """Runs jobs in order, skipping finished ones, with progress and ETA;
  `parallel` of them at once."""

  def __init__(self, output_dir, parallel=1):
    self.state_dir = os.path.join(output_dir, "jobs")
    self.log_dir = os.path.join(output_dir, "logs")
    self.parallel = parallel
    self._procs = set()  # running children, stopped when the harness fails
    self._claimed = set()  # keys whose marker this runner wrote
    storage.makedirs(self.state_dir)
    storage.makedirs(self.log_dir)

  def _state_path(self, key):
    return os.path.join(self.state_dir, key + ".json")

  def _done(self, key):
    return storage.exists(self._state_path(key))

  def _marker(self, key):
    return os.path.join(self.state_dir, key + ".running")

  def _claim(self, key):
    """Marks `key` as run by this process; False if another has it."""
    try:
      fd = os.open(self._marker(key), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
      return False
    with os.fdopen(fd, "w") as f:
      f.write(f"{os.getpid()} {socket.gethostname()}\n")
    self._claimed.add(key)
    return True

  def _release(self, key):
    self._claimed.discard(key)
    try:
      os.remove(self._marker(key))
    except FileNotFoundError:
      pass

  def _holder(self, key):
    """'PID on HOST' of the other runner running `key`, or None. A marker
    whose process is gone (a killed runner) is removed."""
    if key in self._claimed:
      return None
    try:
      with open(self._marker(key)) as f:
        pid, host = f.read().split()
    except FileNotFoundError:
      return None
    except ValueError:  # being written by its claimer
      return "a runner starting it"
    if host == socket.gethostname():
      try:
        os.kill(int(pid), 0)
      except ProcessLookupError:
        self._release(key)
        return None
      except PermissionError:
        pass  # alive, another user's
    return f"{pid} on {host}"

  def _elsewhere(self, job):
    """(key, holder) of `job` or a job it needs run by another runner."""
    for key in (job.key,) + tuple(job.after):
      holder = self._holder(key)
      if holder:
        return key, holder
    return None

  def result(self, key):
    """A finished job's result (None when it has not finished)."""
    path = self._state_path(key)
    if not storage.exists(path):
      return None
    return json.loads(storage.read_text(path))["result"]

  def any_done(self, prefix):
    """Whether a job whose key starts with `prefix` has finished."""
    return bool(glob.glob(os.path.join(self.state_dir, prefix + "-*.json")))

  def _finished(self):
    out = []
    for path in glob.glob(os.path.join(self.state_dir, "*.json")):
      with open(path) as f:
        out.append(json.load(f))
    return out

  def eta(self, remaining):
    """Seconds left for `remaining` jobs, and how many groups are untimed."""
    rate = {}
    for state in self._finished():
      s, u = rate.get(state["group"], (0.0, 0.0))
      rate[state["group"]] = (s + state["seconds"], u + state["units"])
    seconds, untimed = 0.0, set()
    for job in remaining:
      if job.group in rate and rate[job.group][1] > 0:
        seconds += job.units * rate[job.group][0] / rate[job.group][1]
      else:
        untimed.add(job.group)
    # Job times were measured `parallel` at a time, each on its share.
    return seconds / self.parallel, untimed

  def _ready(self, job):
    if self._holder(job.key):
      return False
    if job.ready_file and storage.exists(job.ready_file):
      return True
    return all(self._done(k) for k in job.after)

  def _waiting(self, job):
    """Why `job` cannot start, for the error when nothing else runs."""
    missing = [k for k in job.after if not self._done(k)]
    why = f"{job.key} waits for {', '.join(missing)}, which this command " \
          "does not run"
    if job.ready_file:
      why += f" (or for its checkpoint {job.ready_file}, not saved yet)"
    return why

  def run(self, jobs, after_each=None, redo=False):
    """Runs what is not done yet (with `redo`, every job again). A SIGTERM
    stops the running jobs as a failure does: each gets SIGTERM (pretraining
    saves a checkpoint) and the runner ends with a UserError once they
    have."""
    if threading.current_thread() is not threading.main_thread():
      return self._run(jobs, after_each, redo)

    def stop(signum, frame):
      del signum, frame
      raise UserError("stopped by SIGTERM; the running jobs were stopped "
                      "(pretraining saved a checkpoint): rerun the same "
                      "command to continue")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
      return self._run(jobs, after_each, redo)
    finally:
      signal.signal(signal.SIGTERM, previous)

  def _run(self, jobs, after_each, redo):
    todo = [j for j in jobs if redo or not self._done(j.key)]
    print(f"{len(jobs)} jobs, {len(jobs) - len(todo)} already done",
          flush=True)
    start, started = time.time(), len(jobs) - len(todo)
    pending, running = list(todo), {}  # running: future -> (job, began)
    told = set()  # the keys whose wait for another runner was printed
    with concurrent.futures.ThreadPoolExecutor(self.parallel) as pool:
      try:
        while pending or running:
          while len(running) < self.parallel:
            for j in [j for j in pending
                      if not redo and self._done(j.key)]:
              pending.remove(j)  # finished by another process meanwhile
              started += 1
            ready = [j for j in pending if self._ready(j)]
            if not ready:
              break
            job = next((j for j in ready if not j.defer), ready[0])
            if not self._claim(job.key):
              continue  # another runner took it just now
            started += 1
            self._announce(job, f"[{started}/{len(jobs)}]", start,
                           pending + [j for j, _ in running.values()])
            pending.remove(job)
            running[pool.submit(self._execute, job)] = (job, time.time())
          if not running:
            if not pending:
              break
            waits = dict(filter(None, map(self._elsewhere, pending)))
            if not waits:
              raise UserError(self._waiting(pending[0]))
            for key in sorted(set(waits) - told):
              told.add(key)
              print(f"waiting for {key}, which another runner runs "
                    f"(process {waits[key]}; if that is no runner, delete "
                    f"{self._marker(key)})", flush=True)
            time.sleep(POLL_SECONDS)
            continue
          # A timeout, so that a checkpoint saved meanwhile frees its jobs.
          done, _ = concurrent.futures.wait(
              running, timeout=POLL_SECONDS,
              return_when=concurrent.futures.FIRST_COMPLETED)
          for future in done:
            job, began = running.pop(future)
            self._record(job, job.parse(job, future.result()), began)
            self._release(job.key)  # after the record: never neither
            if after_each:
              after_each()
      except BaseException:
        procs = list(self._procs)  # a failed or killed harness leaves no
        if procs:  # orphan behind; pretraining saves before it exits
          print(f"stopping {len(procs)} running job(s); pretraining saves "
                "a checkpoint first", flush=True)
        for proc in procs:
          proc.terminate()
        raise
      finally:
        pool.shutdown(wait=True)  # the stopped jobs have exited
        for key in list(self._claimed):
          self._release(key)
    print(f"all {len(jobs)} jobs done", flush=True)

  def _announce(self, job, counter, start, remaining):
    seconds, untimed = self.eta(remaining)
    eta = format_seconds(seconds) if seconds else "?"
    if untimed:  # no job of these groups has finished yet
      eta += f" + untimed {', '.join(sorted(untimed))}"
    print(f"{counter} {job.key} | elapsed "
          f"{format_seconds(time.time() - start)} | ETA {eta}", flush=True)

  def _record(self, job, result, began):
    storage.write_text_atomic(self._state_path(job.key), json.dumps(
        {"result": result, "seconds": time.time() - began,
         "units": job.units, "group": job.group, "info": job.info},
        indent=2))

  def _execute(self, job):
    log_path = os.path.join(self.log_dir, job.key + ".log")
    command = [sys.executable] + job.argv
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    echo = "    "
    if self.parallel > 1:  # the cores shared out; the lines told apart
      for name in THREAD_VARS:
        env.setdefault(name, str(threads_per_job(self.parallel)))
      echo = f"    [{job.key}] "
    lines = []
    with open(log_path, "a") as log:
      log.write(f"$ {' '.join(command)}\n")
      proc = subprocess.Popen(command, cwd=ROOT, env=env, text=True,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
      self._procs.add(proc)
      try:
        for line in proc.stdout:
          log.write(line)
          lines.append(line)
          if job.echo and not line.startswith(("I0000", "W0000")):
            print(echo + line.rstrip(), flush=True)
        rc = proc.wait()
      except BaseException:
        proc.terminate()
        proc.wait()
        raise
      finally:
        self._procs.discard(proc)
    if rc != 0:
      errors = [l.strip() for l in lines if l.startswith("error:")]
      last = errors[-1] if errors else (lines[-1].strip() if lines else "")
      raise UserError(f"{job.key} failed (exit {rc}): {last} (log: "
                      f"{log_path}); rerun the same command to continue")
    return "".join(lines)


def last_json_line(job, stdout):
  """The JSON object a script prints last (run_pretraining's eval)."""
  for line in reversed(stdout.splitlines()):
    line = line.strip()
    if line.startswith("{"):
      return json.loads(line)
  raise UserError(f"{job.key}: no JSON results in its output")


def finetune_result(job, stdout):
  """The one trial's metrics from run_finetuning's results file."""
  del stdout
  paths = sorted(glob.glob(os.path.join(job.info["output_dir"],
                                        "results_*.json")))
  if not paths:
    raise UserError(f"{job.key}: run_finetuning wrote no results file")
  with open(paths[-1]) as f:
    summary = json.load(f)["summary"]
  task = job.info["task"]
  return {k: v["median"] for k, v in summary[task].items()}


def blimp_result(job, stdout):
  del stdout
  with open(job.info["results_file"]) as f:
    results = json.load(f)
  return {"overall": results["overall"], "pairs": results["pairs"],
          "by_phenomenon": {k: v["accuracy"] for k, v in
                            results["by_phenomenon"].items()}}


def data_result(job, stdout):
  del stdout
  with open(job.info["metadata"]) as f:
    meta = json.load(f)
  return {k: meta.get(k) for k in ("vocab_size", "max_seq_length",
                                   "num_examples", "num_tokens")}


def pretrain_result(job, stdout):
  del stdout
  return {"steps": job.info["steps"], "flops": job.units}
