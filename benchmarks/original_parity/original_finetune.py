"""Fine-tunes and scores one task with the original release's own code
(issue 50): its FinetuningModel, task featurization and scorers,
create_optimizer (layer-wise) and Preprocessor, under tensorflow.compat.v1
(venv and shims as original_pretrain.py). TPUEstimator is gone, so a
session runs its model_fn's train_op for the Preprocessor's step count,
saves, then runs its PREDICT outputs over the dev set into the task's own
scorer, as ModelRunner.evaluate_task does. None of its code is here.

  python original_finetune.py ORIGINAL --data-dir D --model-name M \
      --hparams JSON --seed S --output JSON_FILE

D/models/M holds the pretrained checkpoint (the original's init_checkpoint
default) and D/finetuning_data/<task>/ the task's files. Writes
{"task", "seed", "train_steps", "results": the scorer's, "losses"}.
"""

import json
import os
import random
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "reference"))
import record_original  # noqa: E402  (the shims)
from original_pretrain import common_parser  # noqa: E402


def finetune(tf, config, seed):
  from finetune import preprocessing  # the original's
  from finetune import task_builder  # the original's
  import run_finetuning  # the original's
  from util import utils  # the original's
  random.seed(seed)  # the Preprocessor shuffles the train set with it
  np.random.seed(seed)
  tasks = task_builder.get_tasks(config)
  preprocessor = preprocessing.Preprocessor(config, tasks)
  train_input_fn, steps = preprocessor.prepare_train()
  model_fn = run_finetuning.model_fn_builder(config, tasks, steps)
  checkpoint = os.path.join(config.model_dir, "model.ckpt")
  losses = []
  graph = tf.Graph()
  with graph.as_default():
    tf.set_random_seed(seed)
    features = tf.data.make_one_shot_iterator(train_input_fn(
        {"batch_size": config.train_batch_size})).get_next()
    spec = model_fn(features, None, "train", {})
    _check_init(tf, config.init_checkpoint)
    saver = tf.train.Saver()
    with tf.Session(graph=graph) as sess:
      sess.run(tf.global_variables_initializer())  # + init_from_checkpoint
      start = time.time()
      for step in range(1, steps + 1):
        loss, _ = sess.run([spec.loss, spec.train_op])
        losses.append(float(loss))
        if step % 100 == 0 or step == steps:
          print(f"original: {config.task_names[0]} step {step}/{steps} "
                f"loss {np.mean(losses[-100:]):.4f} "
                f"({time.time() - start:.0f} s)", flush=True)
      saver.save(sess, checkpoint)

  predict_input_fn, _ = preprocessor.prepare_predict(tasks, "dev")
  scorer = tasks[0].get_scorer()
  graph = tf.Graph()
  with graph.as_default():
    features = tf.data.make_one_shot_iterator(predict_input_fn(
        {"batch_size": config.eval_batch_size})).get_next()
    spec = model_fn(features, None, "infer", {})
    saver = tf.train.Saver()
    with tf.Session(graph=graph) as sess:
      saver.restore(sess, checkpoint)
      while True:
        try:
          batch = sess.run(spec.predictions)
        except tf.errors.OutOfRangeError:
          break
        for i in range(len(batch["task_id"])):
          r = {k: v[i] for k, v in batch.items()}
          if r["task_id"] != len(tasks):  # padding examples
            r = utils.nest_dict(r, config.task_names)
            scorer.update(r[tasks[0].name])
  return steps, {k: float(v) for k, v in scorer.get_results()}, losses


def _check_init(tf, checkpoint):
  """The original's init_from_checkpoint quietly leaves a variable the
  checkpoint lacks at its random init: every encoder variable must be
  there, in its shape."""
  held = dict(tf.train.list_variables(checkpoint))
  encoder = [v for v in tf.trainable_variables()
             if v.op.name.startswith("electra/")]
  wrong = [v.op.name for v in encoder
           if held.get(v.op.name) != v.shape.as_list()]
  if not encoder or wrong:
    sys.exit(f"original: {checkpoint} does not hold {wrong[:4] or 'electra/'}")
  print(f"original: all {len(encoder)} encoder variables from {checkpoint}",
        flush=True)


def main():
  parser = common_parser(__doc__)
  parser.add_argument("--output", required=True)
  args = parser.parse_args()
  tf = record_original.shim(os.path.abspath(args.original))
  tf.logging.set_verbosity(tf.logging.ERROR)
  # protobuf 4+ refuses the 0-d NumPy arrays the original's padding
  # examples hold and SQuAD's boolean is_impossible (protobuf 3 took
  # both): the same values as floats and ints.
  float_list, int64_list = tf.train.FloatList, tf.train.Int64List
  tf.train.FloatList = lambda value=(): float_list(
      value=[float(v) for v in value])
  tf.train.Int64List = lambda value=(): int64_list(
      value=[int(v) for v in value])
  import configure_finetuning  # the original's
  config = configure_finetuning.FinetuningConfig(
      args.model_name, args.data_dir, **json.loads(args.hparams))
  # Each seed its own shuffled train records and model folder.
  work = args.output + ".work"
  config.preprocessed_data_dir = os.path.join(work, "tfrecords")
  config.model_dir = os.path.join(work, "model")
  os.makedirs(config.model_dir, exist_ok=True)
  steps, results, losses = finetune(tf, config, args.seed)
  record = {"task": config.task_names[0], "seed": args.seed,
            "train_steps": steps, "results": results,
            "losses_per_100": [float(np.mean(losses[i:i + 100]))
                               for i in range(0, len(losses), 100)]}
  with open(args.output + ".tmp", "w") as f:
    json.dump(record, f, indent=2, sort_keys=True)
  os.replace(args.output + ".tmp", args.output)
  print(json.dumps(record["results"]), flush=True)


if __name__ == "__main__":
  main()
