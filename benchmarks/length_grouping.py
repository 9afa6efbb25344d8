"""How much of a GLUE epoch is padding, with batches cut to their longest
row (pad_to_multiple 16, the default) and with length-grouped batches
(group_by_length; finetune/length_groups.py), on the real train sets.

  python benchmarks/length_grouping.py [--window 50] [--seeds 1,2,3]

Rows tokenized with our WordPiece tokenizer and the BERT uncased vocab;
a row's length is min(128, its tokens + [CLS]/[SEP]s). Each epoch draws
the batches of 32 as the original does (a fresh permutation, the last
partial batch dropped); the grouped epoch regroups those draws with
length_groups.group_rows. The step's cost here is its positions (rows x
the batch's cut length), the count the encoder's matmuls scale with; the
attention's share grows with the square, so the saving in time is at
least this. Printed: positions per epoch as a share of 128 per row, mean
over the seeds.
"""

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

from benchmarks.finetune_e2e import GLUE  # noqa: E402
from benchmarks.finetune_e2e import VOCAB  # noqa: E402
from benchmarks.finetune_e2e import read_glue  # noqa: E402
from finetune import length_groups  # noqa: E402
from finetune import padding  # noqa: E402
from pretrain.arrays import batch_rows  # noqa: E402
from util.machine import cpu_kind  # noqa: E402
from util.tokenization import load_tokenizer  # noqa: E402

SEQ, BATCH, MULTIPLE = 128, 32, 16


def lengths_of(task, tokenizer):
  rows = read_glue(task, "train", 0)
  a = tokenizer.tokenize_batch([r[0] for r in rows])
  pairs = rows[0][1] is not None
  b = tokenizer.tokenize_batch([r[1] for r in rows]) if pairs else None
  n = np.array([len(x) for x in a]) + 2
  if pairs:
    n += np.array([len(x) for x in b]) + 1
  return np.minimum(n, SEQ)


def epoch_positions(lengths, order):
  """Positions the cut batches of `order` [steps, B] run."""
  total = 0
  for rows in order:
    mask = np.arange(SEQ)[None] < lengths[rows][:, None]
    total += len(rows) * padding.trimmed_length(mask, 1, MULTIPLE)
  return total


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--window", type=int, default=50)
  parser.add_argument("--seeds", default="1,2,3")
  args = parser.parse_args()
  seeds = [int(s) for s in args.seeds.split(",")]
  tokenizer = load_tokenizer(VOCAB)
  print(f"GLUE train epochs, batch {BATCH}, pad_to_multiple {MULTIPLE}, "
        f"group_by_length {args.window}; seeds {seeds}; {cpu_kind()}")
  print("| task | rows | mean length | at 128 | cut (default) | cut + "
        "grouped | grouped / cut |")
  print("|---|---|---|---|---|---|---|")
  for task in GLUE:
    lengths = lengths_of(task, tokenizer)
    steps = len(lengths) // BATCH
    cut, grouped = [], []
    for seed in seeds:
      order = batch_rows(seed, len(lengths), BATCH, 0, steps)
      cut.append(epoch_positions(lengths, order))
      grouped.append(epoch_positions(lengths, length_groups.group_rows(
          order, lengths, args.window, seed)))
    full = steps * BATCH * SEQ
    print(f"| {task} | {len(lengths)} | {lengths.mean():.1f} | 1.00 | "
          f"{np.mean(cut) / full:.3f} | {np.mean(grouped) / full:.3f} | "
          f"{np.mean(grouped) / np.mean(cut):.3f} |")
  return 0


if __name__ == "__main__":
  sys.exit(main())
