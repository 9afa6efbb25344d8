"""Preemption and Ctrl-C: SIGTERM (the usual notice of a preemptible VM or
a batch scheduler) and SIGINT become a request the training loop honours
after its current host call: save a checkpoint, then stop with Preempted.
A second Ctrl-C stops at once, without saving."""

import os
import signal
import sys
import threading

# Exit statuses as if the signal had ended the process (128 + its number).
EXIT_CODES = {signal.SIGTERM: 143, signal.SIGINT: 130}


class Preempted(Exception):
  """Raised after the checkpoint that a signal asked for is saved; `code`
  is the exit status to end with."""

  def __init__(self, message, code=143):
    super().__init__(message)
    self.code = code


class PreemptionGuard:
  """Turns SIGTERM and SIGINT into a request that the loop honours after
  its current host call: save, then stop. Letting SIGINT raise
  KeyboardInterrupt inside TensorFlow's C++ instead gives a pybind11
  traceback, or a process that does not end."""

  def __init__(self):
    self.signal = None
    self._previous = {}

  @property
  def requested(self):
    return self.signal is not None

  @property
  def name(self):
    return signal.Signals(self.signal).name if self.signal else ""

  @property
  def exit_code(self):
    return EXIT_CODES.get(self.signal, 143)

  def _handler(self, signum, frame):
    del frame
    if signum == signal.SIGINT and self.signal == signal.SIGINT:
      print("error: interrupted twice: stopped without saving (the last "
            "checkpoint is kept)", file=sys.stderr, flush=True)
      os._exit(130)  # pylint: disable=protected-access
    if self.signal is None:
      self.signal = signum
    more = (" (Ctrl-C again stops at once, without saving)"
            if signum == signal.SIGINT else "")
    print(f"{signal.Signals(signum).name}: saving a checkpoint after this "
          f"loop, then stopping{more}", flush=True)

  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      for signum in EXIT_CODES:
        self._previous[signum] = signal.signal(signum, self._handler)
    return self

  def __exit__(self, *exc):
    for signum, previous in self._previous.items():
      signal.signal(signum, previous)
    self._previous = {}
