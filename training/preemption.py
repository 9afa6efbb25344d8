"""Preemption: SIGTERM (the usual notice of a preemptible VM or a batch
scheduler) becomes a request the training loop honours after its current
host call: save a checkpoint, then stop with Preempted."""

import signal
import threading


class Preempted(Exception):
  """Raised after the checkpoint that a SIGTERM asked for is saved."""


class PreemptionGuard:
  """Turns SIGTERM (the usual preemption notice) into a request that the
  loop honours after its current host call: save, then stop."""

  def __init__(self):
    self.requested = False
    self._previous = None

  def _handler(self, signum, frame):
    del signum, frame
    self.requested = True
    print("SIGTERM: saving a checkpoint after this loop, then stopping",
          flush=True)

  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      self._previous = signal.signal(signal.SIGTERM, self._handler)
    return self

  def __exit__(self, *exc):
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._previous)
