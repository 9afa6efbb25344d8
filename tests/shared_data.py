"""Where the shared public data lives: ../shared/data beside the repository
(as CI provides it), or $ELECTRA_SHARED_DATA, or /work/shared/data."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def shared_data_dir():
  for candidate in (os.environ.get("ELECTRA_SHARED_DATA", ""),
                    os.path.join(ROOT, "..", "shared", "data"),
                    "/work/shared/data"):
    if candidate and os.path.isdir(candidate):
      return os.path.abspath(candidate)
  raise FileNotFoundError("no shared data: set ELECTRA_SHARED_DATA or put it "
                          "at ../shared/data beside the repository")


SHARED = shared_data_dir()
BERT_VOCAB = os.path.join(SHARED, "vocab", "bert-base-uncased-vocab.txt")
