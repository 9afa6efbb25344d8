"""Pretrains an ELECTRA-style model.

  python run_pretraining.py --data-dir DATA_DIR --model-name NAME \
      --hparams configs/electra_small.json [--hparams '{"num_train_steps": 100}']

Reads DATA_DIR/pretrain_tfrecords/, writes checkpoints, TensorBoard logs and
eval results to DATA_DIR/models/NAME/, and resumes from there if restarted.
Under KERAS_BACKEND=jax the same command trains with JAX on every local
device (pretrain/jax_run.py; docs/distributed.md).
"""

import json
import os
import sys

# Before any Keras import: pins the backend, quiets TF's C++ chatter.
from util.tf_quiet import import_tensorflow
from util.tf_quiet import tensorflow_script

BACKEND = tensorflow_script("run_pretraining.py", jax=True)

from pretrain import config as configure_pretraining  # noqa: E402
from pretrain import preflight  # noqa: E402
from training.preemption import Preempted  # noqa: E402
from util.errors import UserError  # noqa: E402
from util.errors import main_guard  # noqa: E402


def format_metrics(results):
  width = max(len(k) for k in results)
  return "\n".join(f"  {k:<{width}}  {v:.4f}" if isinstance(v, float)
                   else f"  {k:<{width}}  {v}" for k, v in sorted(
                       results.items()))


def open_source(path):
  """init_checkpoint's reader (loading/sources.py), imported when asked:
  pretrain/ is below the loading layer."""
  from loading.sources import open_source as read  # pylint: disable=g-import-not-at-top
  return read(path)


@main_guard
def main(argv=None):
  # Paths, the dataset, the vocab and a resumed run's hparams are checked
  # before TensorFlow's seconds of import.
  config = configure_pretraining.load_config(argv, check_first=preflight.check)
  if config.seeds and BACKEND != "jax":
    raise UserError("--seeds trains several seeds in one compiled step under "
                    "KERAS_BACKEND=jax only: run each seed separately here")
  if config.seeds:
    return multi_seed_main(config)
  if BACKEND == "jax":
    from pretrain.jax_run import JaxRun as Run
  else:
    import_tensorflow()
    from pretrain.trainer import Trainer as Run
  with Run(config, open_source=open_source) as trainer:  # the lock
    if config.do_train:
      try:
        trainer.train()
      except Preempted as e:
        print(e, flush=True)
        sys.exit(e.code)  # 143 SIGTERM, 130 SIGINT: as if it had ended us
    if config.do_eval:
      results = trainer.evaluate()
      kept = ("" if config.eval_checkpoint else " (also in " + os.path.join(
          config.model_dir, "eval_results.json") + ")")
      print(f"eval results{kept}:\n" + format_metrics(results), flush=True)
      if not sys.stdout.isatty():  # for scripts (run_comparison.py reads it)
        print(json.dumps(results, sort_keys=True), flush=True)


def multi_seed_main(config):
  """--seeds K,...: each seed's run as its separate run writes it."""
  from pretrain.multi_seed_run import MultiSeedRun
  with MultiSeedRun(config, open_source) as runs:  # the seeds' locks
    if config.do_train:
      try:
        runs.train()
      except Preempted as e:
        print(e, flush=True)
        sys.exit(e.code)
    if config.do_eval:
      for k, results in runs.evaluate().items():
        where = runs.configs[runs.seeds.index(k)].model_dir
        kept = ("" if config.eval_checkpoint else " (also in " +
                os.path.join(where, "eval_results.json") + ")")
        print(f"seed {k} eval results{kept}:\n" + format_metrics(results),
              flush=True)
        if not sys.stdout.isatty():
          print(json.dumps(dict(results, pretrain_seed=k), sort_keys=True),
                flush=True)


if __name__ == "__main__":
  main()
