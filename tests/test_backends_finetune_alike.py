"""Both backends fine-tune alike (issue 62): from the same encoder and
head and the same batch, three train steps of run_finetuning.py's
TensorFlow step (finetune/trainer.py) and of its JAX step
(finetune/jax_trainer.py) give the same losses (so the model, the task's
loss, the clipping and the layer-wise AdamW are the same), for every task
kind: a GLUE classifier, SQuAD, tagging and its CRF, multiple choice, a
BAM student (classification and regression) mixing a teacher's outputs,
and multi-task runs (a classifier and a regression, plain and as BAM's
student), whose steps alternate between the tasks: a step trains only
its task's head, and the other head and its optimizer slots stay as
they are (else the next step of that task would differ).
The encoder read from the TensorFlow checkpoint under JAX is also the one
an .npz folder holds. One JAX subprocess for every case (the tests' own
process is on TensorFlow)."""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from finetune import bam
from finetune.config import FinetuningConfig
from finetune.model import head_weights
from finetune.optimization import create_optimizer
from finetune.trainer import FinetuningRunner
from interop import npz_weights
from loading.sources import open_source
from tests import tiny_runs
from tests.test_jax_run_finetuning import HPARAMS
from tests.test_jax_run_finetuning import SQUAD
from tests.test_jax_run_finetuning import jax_env
from tests.test_jax_run_finetuning import task_data

ROOT = str(tiny_runs.ROOT)
STEPS = 3
TEACHER_WEIGHT = 0.6  # BAM's 1 - lambda in the distilling cases' steps
# case: (tasks, hparams beyond HPARAMS); RACE's rows are [C, T]. The
# steps go through the tasks in turn (rte, sts, rte).
CASES = {"rte": ("rte", {}), "squadv1": ("squadv1", SQUAD),
         "chunk": ("chunk", {}),
         "chunk_crf": ("chunk", {"tagging_crf": True}),
         "race": ("race", {}),
         "rte_bam": ("rte", {"distill": True}),
         "sts_bam": ("sts", {"distill": True}),
         "rte_sts": ("rte,sts", {}),
         "rte_sts_bam": ("rte,sts", {"distill": True})}


def step_tasks(tasks):
  """The task of each of the STEPS steps."""
  return [tasks[i % len(tasks)] for i in range(STEPS)]

JAX_STEPS = textwrap.dedent("""
    import json, sys
    import jax
    import numpy as np
    from finetune import config as configure
    from finetune.jax_backend import JaxFinetuningRunner
    from finetune.model import pretrained_encoder_weights
    from finetune.model import set_encoder_weights, set_head_weights
    from loading.sources import find_pretrained
    cases, npz_dir = json.loads(sys.argv[1]), sys.argv[2]
    results = {}
    for case, (argv, tf_npz) in cases.items():
      config = configure.load_config(argv)
      saved = dict(np.load(tf_npz))
      runner = JaxFinetuningRunner(config)
      model = runner._build(config.seed)
      tuner = runner.finetuner(model)
      encoder = runner._encoder_weights
      # The JAX pretraining driver's .npz folder of the same weights.
      npz = find_pretrained(npz_dir)
      from_npz = {k: np.asarray(v) for k, v in
                  pretrained_encoder_weights(npz, config).items()}
      npz_same = npz.source.kind == "npz" and sorted(encoder) == sorted(
          from_npz) and all(np.array_equal(encoder[k], from_npz[k])
                            for k in encoder)
      set_encoder_weights(model.encoder, encoder)
      same, rows = True, {}
      for task in config.tasks:
        head = f"head/{task}/"
        set_head_weights(model.heads[task], {
            k[len(head):]: v for k, v in saved.items()
            if k.startswith(head)}, "the TensorFlow run")
        ids = saved[f"input_ids/{task}"]
        rows[task] = np.arange(len(ids), dtype=np.int32)
        same = same and np.array_equal(np.asarray(tuner.inputs[
            task].batch_numpy("train", rows[task])["input_ids"]), ids)
      weight = saved.get("teacher_weight")  # BAM's 1 - lambda
      state, losses = tuner._state(model), []
      # At the rows' full length, as the TensorFlow step runs them.
      step = jax.jit(tuner._train_step, static_argnums=(1, 3))
      for i in range(int(sys.argv[3])):
        task = config.tasks[i % len(config.tasks)]
        state, loss = step(state, task, rows[task],
                           tuner.inputs[task].seq_len, weight)
        losses.append(float(loss))
      results[case] = {"losses": losses, "same_rows": same,
                       "npz_same": npz_same}
    print("RESULTS " + json.dumps(results))
""")


def write_teacher(runner, task, path):
  """A BAM teacher's outputs on the run's train rows (random: a
  distribution per row, or a regression value), for `teachers`."""
  examples, features = runner.data.examples_and_features(task, "train")
  keys = bam.row_keys(examples, features)
  rng = np.random.default_rng(0)
  values = (rng.uniform(0, 5, len(keys)) if task.head_kind == "regression"
            else rng.dirichlet(np.ones(len(task.head_labels())), len(keys)))
  bam.write_teacher_outputs(path, task.name, keys, values)


def tensorflow_steps(data_dir, case, folder):
  """(the case's TensorFlow losses, its argv for the JAX side): the first
  batch of each task's train rows, its head's weights (and BAM's teacher
  weight) saved in folder/tf.npz for the JAX side."""
  tasks, extra = CASES[case]
  names = tasks.split(",")
  for task in names:
    task_data(data_dir, task)
  hparams = dict(HPARAMS, **extra, output_dir=os.path.join(folder, "out"))
  distill = bool(extra.get("distill"))
  if distill:
    hparams["teachers"] = {task: os.path.join(folder, f"teacher_{task}.npz")
                           for task in names}
  runner = FinetuningRunner(FinetuningConfig(
      data_dir=data_dir, model_name="pre", task_names=tasks, **hparams))
  if distill:
    for task in runner.tasks:
      write_teacher(runner, task, hparams["teachers"][task.name])
  # pylint: disable=protected-access
  model = runner._build(runner.config.seed)
  data = runner.data.train_data(runner.teachers.outputs() if distill
                                else None)
  batches, saved = {}, {}
  for task in names:
    features, _ = data[task]
    batches[task] = {k: v[:HPARAMS["train_batch_size"]]
                     for k, v in features.items()}
    saved[f"input_ids/{task}"] = batches[task]["input_ids"]
    saved.update({f"head/{task}/{k}": v for k, v in
                  head_weights(model.heads[task]).items()})
  if distill:
    saved["teacher_weight"] = np.float32(TEACHER_WEIGHT)
  np.savez(os.path.join(folder, "tf.npz"), **saved)
  optimizer = create_optimizer(runner.config, model.trainable_variables,
                               runner.model_config.num_hidden_layers,
                               sum(steps for _, steps in data.values()))
  steps = {task: runner._train_step(model, optimizer, task)
           for task in names}
  weight = (tf.constant(TEACHER_WEIGHT, tf.float32),) if distill else ()
  losses = [float(steps[task](batches[task], *weight))
            for task in step_tasks(names)]
  argv = ["--data-dir", data_dir, "--model-name", "pre", "--task-names",
          tasks, "--hparams", json.dumps(hparams)]
  return losses, argv


@pytest.fixture(scope="module")
def both(tmp_path_factory):
  """{case: (TensorFlow's losses, the JAX side's results)}."""
  root = tmp_path_factory.mktemp("alike")
  data_dir = tiny_runs.tiny_run_with_rte(root / "data")
  tf_losses, cases = {}, {}
  for case in CASES:
    folder = str(root / case)
    os.makedirs(folder)
    tf_losses[case], argv = tensorflow_steps(data_dir, case, folder)
    cases[case] = (argv, os.path.join(folder, "tf.npz"))
  # The run as the JAX pretraining driver writes one: weights.json and
  # .npz shards, a pretrain_config.json beside them.
  npz = str(root / "pre_npz")
  source = open_source(os.path.join(data_dir, "models", "pre"))
  npz_weights.write(npz, source.weights(), dataclasses.asdict(source.config))
  shutil.copy(os.path.join(data_dir, "models", "pre", "pretrain_config.json"),
              npz)
  done = subprocess.run(
      [sys.executable, "-c", JAX_STEPS, json.dumps(cases), npz, str(STEPS)],
      capture_output=True, text=True, timeout=600, cwd=ROOT, env=jax_env())
  assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
  line = next(l for l in done.stdout.splitlines() if l.startswith("RESULTS"))
  got = json.loads(line[len("RESULTS "):])
  return {case: (tf_losses[case], got[case]) for case in CASES}


@pytest.mark.parametrize("case", sorted(CASES))
def test_three_steps_give_the_same_losses(both, case):
  tf_losses, got = both[case]
  assert got["same_rows"]  # the same featurization, the same rows
  assert got["npz_same"]  # the same encoder from either format
  np.testing.assert_allclose(got["losses"], tf_losses, atol=1e-5)
  assert tf_losses[2] != tf_losses[0]  # the steps did train
