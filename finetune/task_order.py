"""Which task each step of a multi-task run trains, on either backend
(NumPy only: the JAX path has no TensorFlow)."""

from finetune import bam


def schedule(steps_by_task):
  """Tasks interleaved evenly, each task's steps spread over the run in
  proportion to its count."""
  order = []
  for name, steps in steps_by_task.items():
    order += [((i + 0.5) / steps, name) for i in range(steps)]
  return [name for _, name in sorted(order)]


def train_order(config, steps_by_task, rows_by_task, seed):
  """The task of every step: `schedule`'s, or with BAM's
  task_weight_exponent drawn by |D|^exponent (section 3.3) over the same
  total."""
  if config.task_weight_exponent is None:
    return schedule(steps_by_task)
  return bam.sample_schedule(sum(steps_by_task.values()), rows_by_task,
                             config.task_weight_exponent, seed)
