"""BAM: born-again multi-task networks with teacher annealing
(dissertation chapter 3; Clark et al., 2019, "BAM! Born-Again Multi-Task
Networks for Natural Language Understanding").

Single-task teachers are fine-tuned first and write their outputs on their
training set (`write_distill_outputs`); one multi-task student then learns
each task from a mix of the gold label and its teacher (section 3.2.2):

  classification: CE(lambda * y + (1 - lambda) * f_tau(x; teacher), student)
  regression:     (lambda * y + (1 - lambda) * f_tau(x; teacher) - student)^2

Teacher annealing raises lambda linearly from 0 to 1 over training; without
it lambda stays 0 (pure distillation, Table 3.4's ablation). Section 3.3:
each step trains task tau with probability proportional to |D_tau|^0.75.
The losses use keras.ops only, like the heads; the rest is NumPy.
"""

import numpy as np
from keras import ops

from util import outputs
from util import storage
from util.errors import UserError


# ------------------------------------------------------------ the losses
def teacher_weight(step, total_steps, annealing=True):
  """1 - lambda at 0-based `step` of `total_steps`: the teacher's share of
  the target, 1 at the first step and 1/total at the last with annealing,
  else 1 throughout."""
  if not annealing:
    return 1.0
  return 1.0 - step / max(total_steps, 1)


def classification_loss(log_probs, label_ids, teacher_probs, weight):
  """Cross-entropy of the student's log_probs [B, C] against the targets
  (1 - weight) * onehot(label_ids) + weight * teacher_probs; weight [B]."""
  log_probs = ops.cast(log_probs, "float32")
  gold = ops.one_hot(ops.cast(label_ids, "int32"), ops.shape(log_probs)[-1])
  weight = ops.cast(weight, "float32")[:, None]
  target = (1.0 - weight) * gold + weight * ops.cast(teacher_probs, "float32")
  return -ops.sum(target * log_probs, axis=-1)


def regression_loss(predictions, labels, teacher_values, weight):
  """Squared distance of the student's predictions [B] to the target
  (1 - weight) * labels + weight * teacher_values; weight [B]."""
  weight = ops.cast(weight, "float32")
  target = ((1.0 - weight) * ops.cast(labels, "float32") +
            weight * ops.cast(teacher_values, "float32"))
  return ops.square(ops.cast(predictions, "float32") - target)


# -------------------------------------------------------- task sampling
def task_probabilities(sizes, exponent=0.75):
  """{task: probability} proportional to size ** exponent (section 3.3;
  1.0: in proportion to the data, 0.0: uniform over tasks)."""
  weights = {name: float(n) ** exponent for name, n in sizes.items()}
  total = sum(weights.values())
  return {name: w / total for name, w in weights.items()}


def sample_schedule(total_steps, sizes, exponent, seed):
  """The task of each of total_steps steps, drawn independently with
  task_probabilities(sizes, exponent); the same for the same seed."""
  probs = task_probabilities(sizes, exponent)
  names = list(probs)
  draws = np.random.default_rng(seed).choice(
      len(names), size=total_steps, p=[probs[n] for n in names])
  return [names[i] for i in draws]


# ------------------------------------------------------ teacher outputs
def row_keys(examples, features):
  """A key per feature row: its example's guid and the row's rank among
  that guid's rows ("train-3#0"), so that a teacher's rows and a student's
  match one to one when both featurize the same examples."""
  seen = {}
  keys = []
  for index in np.asarray(features["example_index"]).tolist():
    guid = examples[index].guid
    keys.append(f"{guid}#{seen.get(guid, 0)}")
    seen[guid] = seen.get(guid, 0) + 1
  return keys


def write_teacher_outputs(path, task_name, keys, values):
  """The teacher's outputs on its train rows (probabilities [N, C], or
  predictions [N] for regression), whole or not at all."""
  def write(f):
    np.savez(f, task=np.array(task_name), keys=np.array(keys),
             values=np.asarray(values, np.float32))
  outputs.write_atomic(path, write, binary=True)


def read_teacher_outputs(path, task_name, keys, shape):
  """The teacher's values for `keys` (the student's train rows), each of
  `shape` ((C,) probabilities or () a regression value)."""
  if not storage.exists(path):
    raise UserError(f"{task_name}: teacher outputs {path} not found (write "
                    "them with a single-task run of write_distill_outputs)")
  try:
    with storage.open_file(path, "rb") as f:
      data = np.load(f)
      teacher, stored, values = (str(data["task"]), data["keys"].tolist(),
                                 data["values"])
  except (OSError, ValueError, KeyError) as e:
    raise UserError(f"{task_name}: {path} is not a file of teacher outputs "
                    f"({str(e)[:80]})") from None
  if teacher != task_name:
    raise UserError(f"{path} holds a {teacher} teacher, not {task_name}'s")
  return match_teacher_outputs(path, task_name, stored, values, keys, shape)


def match_teacher_outputs(path, task_name, stored, values, keys, shape):
  """values (a teacher's, one per key of `stored`) for `keys`, each of
  `shape`; `path` names the teacher in the errors."""
  if tuple(values.shape[1:]) != tuple(shape):
    raise UserError(f"{task_name}: the teacher in {path} gives outputs of "
                    f"shape {tuple(values.shape[1:])}, this task "
                    f"{tuple(shape)} (another label set?)")
  where = {k: i for i, k in enumerate(stored)}
  missing = [k for k in keys if k not in where]
  if missing:
    raise UserError(f"{task_name}: the teacher in {path} has no output for "
                    f"{len(missing)} of the {len(keys)} train rows (first: "
                    f"{missing[0]}); teach with the same train examples")
  return values[[where[k] for k in keys]]
