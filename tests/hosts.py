"""Several hosts in a test: the processes of one JAX run on the loopback
(Keras' KERAS_DISTRIBUTION_* launch variables, one CPU device each), and a
process 1 that may not write (only process 0 writes a run's files)."""

import queue
import socket
import subprocess
import sys
import threading

from tests.tiny_runs import ROOT


def only_process_0_writes(script):
  """A `python -c` program that runs script.main(argv) and, in a process
  other than 0, fails the moment it opens a file to write, makes, moves
  or removes one (Python's own calls: every writer here goes through
  them). Keras, JAX and TensorFlow are imported first (Keras may write
  its config on import); JAX's compilation cache (conftest.py) is no
  output of the run: JAX reads it everywhere, writes it from process 0
  only."""
  return f"""
import builtins, io, os, sys
sys.path.insert(0, os.getcwd())
import jax, keras
from util.tf_quiet import import_tensorflow
import_tensorflow(with_text=True)
import {script}
if os.environ["KERAS_DISTRIBUTION_PROCESS_ID"] != "0":
  exempt = (os.devnull, os.environ.get("JAX_COMPILATION_CACHE_DIR") or
            os.devnull)
  def guarded(call, name, writes=lambda *args, **kwargs: True):
    def wrapper(*args, **kwargs):
      paths = [str(a) for a in args if isinstance(a, (str, os.PathLike))]
      if writes(*args[1:], **kwargs) and not all(
          p.startswith(exempt) for p in paths):
        print("process 1 wrote:", name, paths, file=sys.stderr, flush=True)
        raise RuntimeError(f"a process other than 0 wrote ({{name}} {{paths}})")
      return call(*args, **kwargs)
    return wrapper
  builtins.open = io.open = guarded(
      builtins.open, "open",
      lambda mode="r", *args, **kwargs: bool(set(mode) & set("wax+")))
  os.open = guarded(os.open, "os.open", lambda flags, *args, **kwargs: bool(
      flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND)))
  for name in ("rename", "replace", "mkdir", "makedirs", "remove", "unlink",
               "rmdir", "symlink", "link"):
    setattr(os, name, guarded(getattr(os, name), name))
{script}.main(sys.argv[1:])
"""


def launch(program, argv, env):
  """The two processes of a run (`python -c program argv`) joined on the
  loopback; env: a function of the extra variables to its environment."""
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
  return [subprocess.Popen(
      [sys.executable, "-c", program, *argv],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
      env=env(KERAS_DISTRIBUTION_JOB_ADDRESSES=f"127.0.0.1:{port}",
              KERAS_DISTRIBUTION_NUM_PROCESSES="2",
              KERAS_DISTRIBUTION_PROCESS_ID=str(k)))
          for k in (0, 1)]


def finished(procs):
  """Each process's (stdout, stderr), once both have ended well (and none
  wrote where only_process_0_writes refuses it); one that fails ends the
  others at once (not after jax.distributed's timeout)."""
  ended = queue.Queue()
  for k, p in enumerate(procs):
    threading.Thread(target=lambda k=k, p=p: ended.put(
        (k, p.communicate())), daemon=True).start()
  outs = [None] * len(procs)
  try:
    for _ in procs:
      k, outs[k] = ended.get(timeout=600)
      if procs[k].returncode:
        break
  finally:
    for p in procs:
      p.kill()
  if None in outs:  # the others' output once they are ended
    for _ in range(outs.count(None)):
      k, outs[k] = ended.get(timeout=60)
  # The one that failed first said why; the ones ended here, nothing.
  for p, (out, err) in sorted(zip(procs, outs),
                              key=lambda done: done[0].returncode == -9):
    assert p.returncode == 0, (out + err)[-3000:]
  for _, err in outs:  # a refused write that something caught
    assert "process 1 wrote:" not in err, err[-3000:]
  return outs
