"""The pretraining log's pacing (training/step_log.py): how many steps a
host call runs before the next line, from a given rate (set, not timed)."""

import contextlib
import time

from pretrain.config import PretrainingConfig
from training import step_log


def pacing(seconds_per_step=None, trained_seconds=0.0):
  log = step_log.StepLog(PretrainingConfig(), start_step=0)
  log.seconds_per_step = seconds_per_step
  log.start_time = time.time() - trained_seconds
  return log


def test_the_first_call_is_short_whatever_the_loop():
  # The quickstart's 100-step loop printed nothing for over 60 s.
  assert pacing().steps(0, 100, 100) == step_log.FIRST_LOOP_STEPS
  assert pacing().steps(0, 4, 100) == 4
  assert pacing().steps(437, 63, 100) == 3  # resumed: to a round step


def test_a_slow_loop_is_cut_at_round_steps_within_the_silence_allowed():
  # 0.4 s a step (the quickstart on 2 CPU cores): 37 steps fit in 15 s;
  # 25 is the largest divisor of 100 that does.
  log = pacing(0.4)
  assert log.steps(10, 90, 100) == 15  # 10 -> 25
  assert log.steps(25, 75, 100) == 25  # 25 -> 50
  assert log.steps(0, 100, 100) * 0.4 <= step_log.LOG_SECONDS
  # A slower rate: shorter calls, still ending on round steps.
  assert pacing(1.6).steps(10, 90, 100) == 5


def test_the_first_call_is_not_taken_as_the_rate():
  """It traces (XLA: a minute): 10 steps in 60 s must not cut the next
  call of a 10-step loop short."""
  log = pacing()
  step_log.StepLog.log(log, 10, 10, 60.0, {}, 0.0, NoWriter())
  assert log.seconds_per_step is None
  assert log.steps(10, 10, 10) == 10
  step_log.StepLog.log(log, 20, 10, 20.0, {}, 0.0, NoWriter())
  assert log.seconds_per_step == 2.0 and log.steps(20, 10, 10) == 5


class NoWriter:
  def as_default(self, step):
    return contextlib.nullcontext(step)


def test_a_fast_loop_or_a_long_run_keeps_its_configured_lines():
  assert pacing(0.1).steps(0, 100, 100) == 100  # 10 s: within 15
  assert pacing(0.1).steps(0, 200, 200) == 100  # 20 s: halved
  # After 2 hours a 40th of it (3 minutes) is allowed: 200 steps again.
  assert pacing(0.1, trained_seconds=7200).steps(0, 200, 200) == 200


def test_a_call_that_traced_again_does_not_shorten_the_next():
  """Two-stage training's switch retraces: that call's slow rate must not
  cut the calls after it (the fastest call's rate counts)."""
  log = pacing()
  for step, seconds in ((10, 60.0), (20, 1.0), (30, 40.0)):
    step_log.StepLog.log(log, step, 10, seconds, {}, 0.0, NoWriter())
  assert log.seconds_per_step == 0.1 and log.steps(30, 10, 10) == 10
