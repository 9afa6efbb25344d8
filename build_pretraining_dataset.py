"""Builds ELECTRA pretraining TFRecords from a raw text corpus.

Reads plain text, WikiExtractor or JSON Lines files, splits paragraphs into
sentences, tokenizes them (WordPiece or SentencePiece), packs them into
`[CLS] A [SEP] B [SEP]` examples and writes sharded TFRecords with the
`input_ids`, `input_mask` and `segment_ids` features, plus metadata.json,
token_counts.txt and a copy of the vocabulary.

Example:
  python build_pretraining_dataset.py --corpus-dir sample_data/corpus \
      --vocab-file sample_data/vocab.txt --output-dir /tmp/pretrain_data \
      --num-processes 2
"""

# Before any Keras import: pins the backend, quiets TF's C++ chatter.
from util.tf_quiet import tensorflow_script

tensorflow_script("build_pretraining_dataset.py")

import sys

from dataset.build import build_dataset
from dataset.config import BuildConfig
from util.config import parse_config
from util.errors import main_guard


@main_guard
def main(argv=None):
  config, _ = parse_config(BuildConfig, argv, description=__doc__.split(
      "\n")[0])
  build_dataset(config)
  return 0


if __name__ == "__main__":
  sys.exit(main())
