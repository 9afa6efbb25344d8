"""The training log line (losses, lr, seq/s, tok/s, ETA) and its
TensorBoard scalars, written every log_every_steps."""

import time

import tensorflow as tf

from training.progress import format_seconds


class StepLog:
  """The log line and TensorBoard scalars, with throughput and ETA."""

  def __init__(self, config, start_step):
    self.config = config
    self.start_step, self.start_time = start_step, time.time()

  def log(self, step, n, elapsed, logs, lr, writer):
    config = self.config
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
    with writer.as_default(step=step):
      for k, v in logs.items():
        tf.summary.scalar(k, v)
      tf.summary.scalar("learning_rate", lr)
      tf.summary.scalar("sequences_per_second", seq_per_s)
