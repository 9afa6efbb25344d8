"""Seconds since the slot's command began, which its time limit counts."""

import time


class Clock:
  def __init__(self, started_at=None):
    self.start = started_at or time.time()

  def elapsed(self):
    return time.time() - self.start

  def log(self, message):
    print(f"[{self.elapsed():6.1f}s] {message}", flush=True)
