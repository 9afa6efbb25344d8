"""A line every LOG_SECONDS while one long blocking call runs: a JAX
step compiles and then runs a whole chunk (or a fine-tuning trial) in one
call, where the TensorFlow path prints between its steps.

  with Heartbeat("compiling the training step (first call)"):
    trainer.advance(...)

prints `compiling the training step (first call): 0m15s so far` every
15 s until the call returns; nothing for a call shorter than that.
"""

import sys
import threading
import time

from training.progress import format_seconds
from training.step_log import LOG_SECONDS


class Heartbeat:
  """While the `with` block runs, `what: <elapsed> so far` every `every`
  seconds (from a daemon thread; whole lines, flushed)."""

  def __init__(self, what, every=LOG_SECONDS, stream=None):
    self.what, self.every, self.stream = what, every, stream
    self._stop = threading.Event()
    self._thread = None
    self.start = None

  def _beat(self):
    while not self._stop.wait(self.every):
      elapsed = format_seconds(time.perf_counter() - self.start)
      print(f"{self.what}: {elapsed} so far", file=self.stream or sys.stdout,
            flush=True)

  def __enter__(self):
    self.start = time.perf_counter()
    self._thread = threading.Thread(target=self._beat, daemon=True)
    self._thread.start()
    return self

  def __exit__(self, *exc):
    self._stop.set()
    self._thread.join()
    return False
