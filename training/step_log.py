"""The training log line (losses, lr, seq/s, tok/s, ETA) and its
TensorBoard scalars, written every log_every_steps, and sooner while a
host call of that many steps would run for longer than LOG_SECONDS."""

import json
import os
import time

from training.progress import format_seconds

LOG_SECONDS = 15.0  # the longest silence early in a run (see steps())
# Steps of a call while no rate is known: the first call's time is mostly
# tracing (a minute with XLA), so it is not taken as the steps' rate.
FIRST_LOOP_STEPS = 10
# The silence allowed grows to this share of the time trained so far, so a
# day-long run falls back to its log_every_steps and its log stays short.
SHARE_OF_ELAPSED = 1 / 40


class StepLog:
  """The log line and TensorBoard scalars, with throughput and ETA."""

  def __init__(self, config, start_step):
    self.config = config
    self.start_step, self.start_time = start_step, time.time()
    # The fastest host call's, the first aside: a call that traced again
    # (two-stage training's switch) must not shorten the calls after it.
    self.seconds_per_step = None
    self.calls = 0

  def steps(self, step, n, every):
    """How many of the next `n` steps (ending on a multiple of `every`) to
    run before the next line: all of them if they fit in LOG_SECONDS at
    the fastest call's rate, else the most that fit and end on a multiple of
    a divisor of `every` (round steps; the configured lines still come).
    Until a rate is known, FIRST_LOOP_STEPS."""
    if self.seconds_per_step is None:
      fit = FIRST_LOOP_STEPS
    else:
      budget = max(LOG_SECONDS,
                   (time.time() - self.start_time) * SHARE_OF_ELAPSED)
      fit = int(budget / max(self.seconds_per_step, 1e-9))
    if n <= fit:
      return n
    divisor = max(d for d in range(1, max(fit, 1) + 1) if every % d == 0)
    return min(n, (step // divisor + 1) * divisor - step)

  def log(self, step, n, elapsed, logs, lr, writer):
    config = self.config
    if self.calls:
      rate = elapsed / max(n, 1)
      self.seconds_per_step = min(rate, self.seconds_per_step or rate)
    self.calls += 1
    seq_per_s = n * config.train_batch_size / max(elapsed, 1e-9)
    overall = (step - self.start_step) * config.train_batch_size / max(
        time.time() - self.start_time, 1e-9)
    eta = (config.num_train_steps - step) * config.train_batch_size / max(
        overall, 1e-9)
    parts = [f"step {step}/{config.num_train_steps}"]
    parts += [f"{k} {v:.4f}" for k, v in logs.items()]
    parts += [f"lr {lr:.3g}", f"{seq_per_s:.1f} seq/s",
              f"{seq_per_s * config.max_seq_length:.0f} tok/s",
              f"ETA {format_seconds(eta)}"]
    print(" | ".join(parts), flush=True)
    write_scalars(writer, step, {**logs, "learning_rate": lr,
                                 "sequences_per_second": seq_per_s})


def write_scalars(writer, step, scalars):
  """TensorBoard scalars through a tf.summary writer, or a ScalarLog's."""
  if isinstance(writer, ScalarLog):
    writer.write(step, scalars)
    return
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  with writer.as_default(step=step):
    for k, v in scalars.items():
      tf.summary.scalar(k, v)


class ScalarLog:
  """The JAX driver's scalars, without TensorFlow (whose summary writer
  would also claim the GPU): TensorBoard event files through the
  tensorboard package's own writer where it is installed, and one JSON line
  per step in scalars.jsonl beside them."""

  def __init__(self, directory):
    self.path = os.path.join(directory, "scalars.jsonl")
    os.makedirs(directory, exist_ok=True)
    try:
      from tensorboard.summary.writer.event_file_writer import EventFileWriter  # pylint: disable=g-import-not-at-top
      self._events = EventFileWriter(directory)
    except ImportError:
      self._events = None

  def write(self, step, scalars):
    scalars = {k: float(v) for k, v in scalars.items()}
    with open(self.path, "a", encoding="utf-8") as f:
      f.write(json.dumps({"step": step, **scalars}) + "\n")
    if self._events:
      from tensorboard.compat.proto import event_pb2  # pylint: disable=g-import-not-at-top
      from tensorboard.compat.proto import summary_pb2  # pylint: disable=g-import-not-at-top
      summary = summary_pb2.Summary(value=[
          summary_pb2.Summary.Value(tag=k, simple_value=v)
          for k, v in scalars.items()])
      self._events.add_event(event_pb2.Event(wall_time=time.time(),
                                             step=step, summary=summary))

  def flush(self):
    if self._events:
      self._events.flush()
