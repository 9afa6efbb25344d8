"""Frozen-feature probe of pretrained encoders on STS-B.

  python benchmarks/sts_frozen_probe.py --glue-dir GLUE_DIR \
      --vocab-file VOCAB CHECKPOINT [CHECKPOINT ...]

Ridge regression (scikit-learn, alpha by leave-one-out) on the frozen final
hidden states of each checkpoint's fine-tuning encoder, read at [CLS] and
mean-pooled over the tokens; prints the dev Spearman x100 of each. It asks
what fine-tuning starts from: whether a checkpoint's poor STS-B score is in
its features or in how the [CLS] head reads them (comparison_tiny's BERT:
results/comparison_tiny/STATUS.md).
"""

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
from scipy.stats import spearmanr  # noqa: E402
from sklearn.linear_model import RidgeCV  # noqa: E402

from finetune.classification.classification_tasks import STS  # noqa: E402
from finetune.config import FinetuningConfig  # noqa: E402
from finetune.featurization import encode_pairs  # noqa: E402
from finetune.model import source_encoder  # noqa: E402
from loading import runs  # noqa: E402
from loading.sources import find_pretrained  # noqa: E402
from util.errors import main_guard  # noqa: E402
from util.machine import cpu_kind  # noqa: E402


def features(encoder, tokenizer, examples, max_seq_length, batch=256):
  """([CLS] states, mean-pooled states), one row per example."""
  f = encode_pairs(tokenizer, [e.text_a for e in examples],
                   [e.text_b for e in examples], max_seq_length)
  first, mean = [], []
  for s in range(0, len(examples), batch):
    mask = f["input_mask"][s:s + batch]
    hidden = np.asarray(encoder(f["input_ids"][s:s + batch], mask,
                                f["segment_ids"][s:s + batch]), np.float32)
    first.append(hidden[:, 0])
    mean.append((hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True))
  return np.concatenate(first), np.concatenate(mean)


@main_guard
def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("checkpoints", nargs="+")
  parser.add_argument("--glue-dir", required=True)
  parser.add_argument("--vocab-file", default="")
  parser.add_argument("--max-seq-length", type=int, default=128)
  args = parser.parse_args()
  print(cpu_kind())
  # Reading the TSVs needs no tokenizer; each checkpoint tokenizes with its own.
  task = STS(FinetuningConfig(raw_data_dir=args.glue_dir), None)
  train, dev = task.get_examples("train"), task.get_examples("dev")
  y_train = np.array([float(e.label) for e in train])
  y_dev = np.array([float(e.label) for e in dev])
  for path in args.checkpoints:
    pretrained = find_pretrained(path)
    tokenizer = runs.load_tokenizer_for(pretrained.config, args.vocab_file)
    # The encoder that fine-tuning starts from (the discriminator's for
    # ELECTRA).
    encoder = source_encoder(runs.restore_model(pretrained), "discriminator")
    scores = []
    for name, x_train, x_dev in zip(
        ("[CLS]", "mean-pooled"),
        features(encoder, tokenizer, train, args.max_seq_length),
        features(encoder, tokenizer, dev, args.max_seq_length)):
      ridge = RidgeCV(alphas=np.logspace(-3, 3, 13)).fit(x_train, y_train)
      rho = spearmanr(ridge.predict(x_dev), y_dev)[0]
      scores.append(f"{name} {100 * rho:.1f}")
    print(f"{path}: STS-B dev Spearman, frozen features: "
          + ", ".join(scores), flush=True)


if __name__ == "__main__":
  main()
