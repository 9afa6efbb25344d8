"""Pretrains and evaluates with the original release's own code (issue 50).

Runs google-research/electra's PretrainingModel, masking, optimizer
(create_optimizer) and input pipeline (pretrain_data.get_input_fn) under
tensorflow.compat.v1, from an extracted copy given on the command line, in
the venv of tests/reference/README.md (TF 2.21 + tf-slim + tf-keras). The
only stand-in is the loop: TPUEstimator is gone from TF 2.16, so a session
runs the train_op its model_fn returns and saves a checkpoint every
save_checkpoints_steps, as the Estimator did. None of its code is here.

  python original_pretrain.py ORIGINAL --data-dir D --model-name M \
      --hparams JSON --seed S [--eval-only | --init-only]

Train: resumes from model_dir's latest checkpoint (the input pipeline starts
afresh, as the Estimator's did); appends {step, loss, seconds} every 100
steps to model_dir/train_log.jsonl. Then evaluates every saved checkpoint
that has no model_dir/eval/step_N.json yet with the original's eval metrics
(its metric_fn, num_eval_steps batches of --eval-tfrecords).
--write-eval-rows PATH only writes the rows that eval reads, in its order.
"""

import argparse
import glob
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "reference"))
import record_original  # noqa: E402  (the shims)


def _config(args):
  import configure_pretraining  # the original's
  hparams = json.loads(args.hparams)
  return configure_pretraining.PretrainingConfig(args.model_name,
                                                 args.data_dir, **hparams)


def train(tf, config, seed, init_only=False):
  import pretrain.pretrain_data as pretrain_data  # the original's
  import run_pretraining  # the original's
  graph = tf.Graph()
  with graph.as_default():
    tf.set_random_seed(seed)
    features = tf.data.make_one_shot_iterator(
        pretrain_data.get_input_fn(config, True)(
            {"batch_size": config.train_batch_size})).get_next()
    spec = run_pretraining.model_fn_builder(config)(features, None, "train",
                                                    {})
    step_t = tf.train.get_or_create_global_step()
    saver = tf.train.Saver(max_to_keep=100)  # None would list only the last
    os.makedirs(config.model_dir, exist_ok=True)
    log_path = os.path.join(config.model_dir, "train_log.jsonl")
    with tf.Session(graph=graph) as sess:
      latest = tf.train.latest_checkpoint(config.model_dir)
      if latest:
        saver.restore(sess, latest)
      else:
        sess.run(tf.global_variables_initializer())
      step = int(sess.run(step_t))
      if init_only:  # the draw its run of this seed starts from, but for
        # the glorot kernels: two processes of one graph seed draw those apart
        saver.save(sess, os.path.join(config.model_dir, "model.ckpt"),
                   global_step=step)
        return
      print(f"original: training from step {step}", flush=True)
      start, losses = time.time(), []
      while step < config.num_train_steps:
        loss, _ = sess.run([spec.loss, spec.train_op])
        step += 1
        losses.append(float(loss))
        if step % 100 == 0:
          record = {"step": step, "loss": sum(losses) / len(losses),
                    "seconds": time.time() - start}
          with open(log_path, "a") as f:
            f.write(json.dumps(record) + "\n")
          print(json.dumps(record), flush=True)
          losses = []
        if (step % config.save_checkpoints_steps == 0
            or step == config.num_train_steps):
          saver.save(sess, os.path.join(config.model_dir, "model.ckpt"),
                     global_step=step)


def evaluate(tf, config, seed, eval_tfrecords):
  import pretrain.pretrain_data as pretrain_data  # the original's
  import run_pretraining  # the original's
  # Every checkpoint on disk: a resumed run's Saver lists only its own
  # saves in the state file.
  paths = sorted((p[:-len(".index")] for p in glob.glob(os.path.join(
      config.model_dir, "model.ckpt-*.index"))),
                 key=lambda p: int(p.rsplit("-", 1)[1]))
  out_dir = os.path.join(config.model_dir, "eval")
  os.makedirs(out_dir, exist_ok=True)
  config.pretrain_tfrecords = eval_tfrecords
  for path in paths:
    step = int(path.rsplit("-", 1)[1])
    out = os.path.join(out_dir, f"step_{step}.json")
    if os.path.exists(out):
      with open(out) as f:
        if "disc_auc_real_tokens" in json.load(f):
          continue  # else recorded before ours' definitions were added
    graph = tf.Graph()
    with graph.as_default():
      tf.set_random_seed(seed + 1)  # the same eval masks at every step
      features = tf.data.make_one_shot_iterator(
          pretrain_data.get_input_fn(config, False)(
              {"batch_size": config.eval_batch_size})).get_next()
      spec = run_pretraining.model_fn_builder(config)(features, None,
                                                      "eval", {})
      metric_fn, values = spec.eval_metrics
      metrics = metric_fn(*values)
      updates = [m[1] for m in metrics.values()]
      saver = tf.train.Saver()
      with tf.Session(graph=graph) as sess:
        saver.restore(sess, path)
        sess.run(tf.local_variables_initializer())
        outputs = []
        for _ in range(config.num_eval_steps):
          outputs.append(sess.run([updates, values])[1])
        results = {k: float(sess.run(m[0])) for k, m in metrics.items()}
    results.update(_on_real_tokens(outputs, len(values)))
    results["global_step"] = step
    with open(out + ".tmp", "w") as f:
      json.dump(results, f, indent=2, sort_keys=True)
    os.replace(out + ".tmp", out)
    print(f"original: eval step {step}: {json.dumps(results)}", flush=True)


def write_eval_rows(tf, config, seed, eval_tfrecords, path):
  """The rows evaluate() reads for `seed` (its graph seed, its input_fn:
  the held-out shards repeated and shuffled), in its order, as a TFRecord
  at `path`."""
  import pretrain.pretrain_data as pretrain_data  # the original's
  config.pretrain_tfrecords = eval_tfrecords
  graph = tf.Graph()
  with graph.as_default():
    tf.set_random_seed(seed + 1)
    features = tf.data.make_one_shot_iterator(
        pretrain_data.get_input_fn(config, False)(
            {"batch_size": config.eval_batch_size})).get_next()
    keys = ("input_ids", "input_mask", "segment_ids")
    with tf.Session(graph=graph) as sess, tf.io.TFRecordWriter(path) as out:
      for _ in range(config.num_eval_steps):
        batch = sess.run({k: features[k] for k in keys})
        for i in range(len(batch["input_ids"])):
          out.write(tf.train.Example(features=tf.train.Features(feature={
              k: tf.train.Feature(int64_list=tf.train.Int64List(
                  value=[int(v) for v in batch[k][i]])) for k in keys
          })).SerializeToString())


def common_parser(doc):
  """The flags both drivers of the original take."""
  parser = argparse.ArgumentParser(description=doc.splitlines()[0])
  parser.add_argument("original", help="extracted google-research/electra")
  parser.add_argument("--data-dir", required=True)
  parser.add_argument("--model-name", required=True)
  parser.add_argument("--hparams", default="{}")
  parser.add_argument("--seed", type=int, default=1)
  return parser


def _on_real_tokens(outputs, n):
  """The discriminator's AUC and loss as ours computes them, from the same
  eval outputs: sklearn's exact AUC and the mean log loss over real tokens
  ([CLS]/[SEP] included). The original's own disc_auc is tf.metrics.auc's
  200-threshold approximation over every position, padding included as
  negatives scored 0, which a model cannot fail to rank last."""
  from sklearn import metrics as sk_metrics
  import numpy as np
  # eval_fn_values, in the original's order: input_ids, masked_lm_preds,
  # mlm_loss, masked_lm_ids, masked_lm_weights, input_mask, disc_loss,
  # disc_labels, disc_probs, disc_preds, sampled_tokids.
  columns = [np.concatenate([o[i] for o in outputs]) for i in range(n)]
  mask, labels, probs = columns[5] > 0, columns[7], columns[8]
  y, p = labels[mask] > 0, np.clip(probs[mask], 1e-7, 1 - 1e-7)
  return {"disc_auc_real_tokens": float(sk_metrics.roc_auc_score(y, p)),
          "disc_loss_real_tokens": float(-np.mean(
              np.where(y, np.log(p), np.log(1 - p))))}


def main():
  parser = common_parser(__doc__)
  parser.add_argument("--eval-tfrecords", required=True)
  parser.add_argument("--eval-only", action="store_true")
  parser.add_argument("--init-only", action="store_true",
                      help="only save the initial weights (model.ckpt-0) "
                      "of this seed's graph")
  parser.add_argument("--write-eval-rows", default="",
                      help="only write the rows eval reads to this TFRecord")
  args = parser.parse_args()
  tf = record_original.shim(os.path.abspath(args.original))
  tf.logging.set_verbosity(tf.logging.ERROR)
  config = _config(args)
  if args.write_eval_rows:
    write_eval_rows(tf, config, args.seed, args.eval_tfrecords,
                    args.write_eval_rows)
    return
  if args.init_only:
    train(tf, config, args.seed, init_only=True)
    return
  if not args.eval_only:
    train(tf, config, args.seed)
  evaluate(tf, config, args.seed, args.eval_tfrecords)


if __name__ == "__main__":
  main()
