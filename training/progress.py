"""Progress lines with rate and ETA for long jobs (no TensorFlow, no
dependency), shared by scoring, fine-tuning, evaluation, dataset building
and export:

  progress = Progress("scoring", total=120_000, unit="passes")
  for ...:
    progress.update(done)
  progress.finish()

A line is printed each time another tenth of the job is done (once it has
run QUIET_SECONDS: shorter jobs print only their last line) and at least
every EVERY_SECONDS, and then every tenth of the time elapsed, so a day-long
job logs a few hundred lines. Whole lines, never carriage returns: logs and
pipes stay readable.
"""

import sys
import time

EVERY_SECONDS = 30.0  # the longest silence while a job runs
QUIET_SECONDS = 3.0  # jobs shorter than this print only their last line
PARTS = 10  # a line for each tenth done


def format_seconds(seconds):
  seconds = int(max(seconds, 0))
  if seconds >= 86400:
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"
  if seconds >= 3600:
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
  return f"{seconds // 60}m{seconds % 60:02d}s"


class Progress:
  """`what done/total unit (pct) | notes | rate unit/s | elapsed, ETA`."""

  def __init__(self, what, total, unit="", stream=None, timed=True):
    """timed=False: a job of unequal steps (export: loading, then
    writing), whose rate and ETA would mislead: elapsed time only."""
    self.what, self.total, self.unit = what, max(int(total), 0), unit
    self.stream = stream
    self.timed = timed
    self.start = self.last = time.perf_counter()
    self.done = 0
    self._part = 0

  def due(self, done):
    """Whether a line is due at `done` (and, if so, counts it printed)."""
    self.done = done
    now = time.perf_counter()
    elapsed = now - self.start
    part = PARTS * done // self.total if self.total else 0
    if (now - self.last >= max(EVERY_SECONDS, elapsed / PARTS) or
        (part > self._part and elapsed >= QUIET_SECONDS)):
      self._part, self.last = part, now
      return True
    return False

  def eta(self, done=None):
    """Seconds left at the rate so far."""
    done = self.done if done is None else done
    elapsed = time.perf_counter() - self.start
    return (self.total - done) * elapsed / done if done else float("inf")

  def rate(self, done=None):
    done = self.done if done is None else done
    return done / max(time.perf_counter() - self.start, 1e-9)

  def line(self, done, *notes, final=False):
    total = max(self.total, done)
    pct = f" ({100 * done / total:.0f}%)" if total else ""
    parts = [f"{self.what} {done:,}/{total:,} {self.unit}".rstrip() + pct]
    parts += [n for n in notes if n]
    elapsed = time.perf_counter() - self.start
    rate = self.rate(done)
    if self.timed:
      parts.append(f"{rate:,.1f} {self.unit or 'items'}/s" if rate >= 1 else
                   f"{1 / max(rate, 1e-9):,.1f} s per {_one(self.unit)}")
    if final:
      parts.append(f"took {format_seconds(elapsed)}")
    elif not self.timed:
      parts.append(f"elapsed {format_seconds(elapsed)}")
    else:
      eta = self.eta(done)
      parts.append(f"elapsed {format_seconds(elapsed)}, ETA " +
                   (format_seconds(eta) if eta != float("inf") else "?"))
    return " | ".join(parts)

  def report(self, done, *notes):
    """A line now (for jobs of a few long steps)."""
    self.done = done
    self._print(self.line(done, *notes))

  def update(self, done, *notes):
    self.done = done
    if done < self.total and self.due(done):
      self._print(self.line(done, *notes))

  def finish(self, *notes, done=None, always=True):
    """The last line (with always=False, only for a job that ran at least
    QUIET_SECONDS: a quick one says nothing)."""
    self.done = self.done if done is None else done
    if always or time.perf_counter() - self.start >= QUIET_SECONDS:
      self._print(self.line(self.done, *notes, final=True))

  def _print(self, text):
    print(text, file=self.stream or sys.stderr, flush=True)


def _one(unit):
  """The singular: passes -> pass, batches -> batch, steps -> step."""
  if unit.endswith(("ches", "shes", "sses")):
    return unit[:-2]
  return unit[:-1] if unit.endswith("s") else (unit or "item")
