"""Which part of Electric's NCE logit separates noise from data.

  python benchmarks/electric_nce_parts.py --data-dir DATA \
      --hparams RUN/plan/electric.json CHECKPOINT [CHECKPOINT ...]

The logit is E(x)_t + log q(x_t) + log(k / (n - k)) (Electric section 2.5).
For each checkpoint, on `--batches` eval batches, prints the ROC AUC (noise
= positive, scikit-learn) of log q alone, of the energy E alone, and of
their sum, with each part's mean over noise and data tokens. A sum below
0.5 with log q below 0.5 says the noise distribution, not the energy, ranks
noise under data: early in training q is broad, and its samples are less
likely under q than the real tokens are. The correlation of E with log q
shows whether E has learnt to cancel q's own scores (about -1 with equal
standard deviations when E ~ -log q, NCE skill 0), the first step before E
can model the data better than q does.
"""

import argparse
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
from sklearn.metrics import roc_auc_score  # noqa: E402

from util.errors import main_guard  # noqa: E402
from util.machine import cpu_kind  # noqa: E402
from util.tf_quiet import import_tensorflow  # noqa: E402

KEYS = ("log_q", "energy", "nce_logits", "nce_labels", "input_mask")


def parts(trainer, checkpoint, batches, tf):
  """{key: array over real tokens} from `batches` eval batches."""
  from training import checkpointing
  checkpointing.read_checkpoint(trainer._checkpoint(), checkpoint)
  iterator = iter(trainer._distributed_dataset(
      trainer.config.eval_batch_size, False))

  @tf.function
  def step(batch):
    out = trainer.model(batch, training=False)
    return {k: out[k] for k in KEYS}

  got = [step(next(iterator)) for _ in range(batches)]
  arrays = {k: np.concatenate([np.asarray(g[k]) for g in got]) for k in KEYS}
  real = arrays.pop("input_mask") > 0
  return {k: v[real] for k, v in arrays.items()}


@main_guard
def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--data-dir", required=True)
  p.add_argument("--hparams", action="append", default=[],
                 help="the run's hparams (an electric objective)")
  p.add_argument("--batches", type=int, default=8)
  p.add_argument("checkpoints", nargs="+")
  args = p.parse_args(argv)
  tf = import_tensorflow()
  from pretrain import config as configure_pretraining
  from pretrain.trainer import Trainer
  with tempfile.TemporaryDirectory() as model_dir:
    config = configure_pretraining.load_config(
        ["--data-dir", args.data_dir, "--model-dir", model_dir,
         *[a for h in args.hparams for a in ("--hparams", h)],
         "--no-do-train", "--do-eval"])
    trainer = Trainer(config)
    print(f"CPU: {cpu_kind()}")
    for checkpoint in args.checkpoints:
      got = parts(trainer, checkpoint, args.batches, tf)
      noise = got["nce_labels"] > 0
      print(f"{checkpoint} ({noise.mean():.1%} noise tokens)")
      for key in ("log_q", "energy", "nce_logits"):
        v = got[key]
        print(f"  {key:<10} AUC {roc_auc_score(noise, v):.3f}   mean on "
              f"noise {v[noise].mean():7.3f}, on data {v[~noise].mean():7.3f}"
              f", std {v.std():6.3f}")
      corr = np.corrcoef(got["energy"], got["log_q"])[0, 1]
      print(f"  corr(E, log q) {corr:.3f}")


if __name__ == "__main__":
  main()
