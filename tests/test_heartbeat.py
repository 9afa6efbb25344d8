"""training/heartbeat.py: a JAX call that compiles and runs for minutes
prints a line every LOG_SECONDS (issue 66), from beginning to end."""

import threading

from training.heartbeat import Heartbeat


class Lines:
  """A stream that counts the lines written to it."""

  def __init__(self, wanted):
    self.lines, self.wanted = [], wanted
    self.enough = threading.Event()

  def write(self, text):
    self.lines += [line for line in text.splitlines() if line]
    if len(self.lines) >= self.wanted:
      self.enough.set()

  def flush(self):
    pass


def test_a_line_while_the_call_runs_and_none_after():
  stream = Lines(wanted=2)
  with Heartbeat("compiling the training step (first call)", every=0.01,
                 stream=stream) as beat:
    assert stream.enough.wait(30)  # the "call": until two lines came
  printed = len(stream.lines)
  assert all(line.startswith("compiling the training step (first call): 0m")
             and line.endswith("s so far") for line in stream.lines)
  # Stopped with the block: the thread is gone, nothing more is written.
  assert not beat._thread.is_alive() and len(stream.lines) == printed  # pylint: disable=protected-access


def test_a_short_call_says_nothing():
  stream = Lines(wanted=1)
  with Heartbeat("steps 1-10", every=60, stream=stream):
    pass
  assert stream.lines == []
