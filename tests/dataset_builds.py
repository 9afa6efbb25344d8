"""Pretraining datasets and a SentencePiece model built from the sample
text, for the builder, hostile-input, tokenizer and export tests."""

import pathlib

import numpy as np

import build_pretraining_dataset as bpd
from dataset import corpus
from dataset import example_writer

REPO = pathlib.Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_data" / "corpus" / "wiki_sample.txt"
SEQ = 64


def run_builder(**flags):
  """Runs main() in-process with `key=value` flags; returns the exit code."""
  argv = []
  for key, value in flags.items():
    flag = "--" + key.replace("_", "-")
    if value is True:
      argv.append(flag)
    elif value is False:
      argv.append("--no-" + flag[2:])
    else:
      argv += [flag, str(value)]
  try:
    return bpd.main(argv)
  except SystemExit as e:
    return e.code


def read_examples(out_dir, seq_len=SEQ):
  """Parses every shard back with tf.data; returns stacked numpy arrays and
  the number of records per shard."""
  import tensorflow as tf
  spec = {name: tf.io.FixedLenFeature([seq_len], tf.int64)
          for name in example_writer.FEATURES}
  rows = {name: [] for name in example_writer.FEATURES}
  per_file = {}
  for path in sorted(pathlib.Path(out_dir).glob("pretrain_data.tfrecord-*")):
    count = 0
    for batch in tf.data.TFRecordDataset(str(path)).batch(4096):
      parsed = tf.io.parse_example(batch, spec)
      for name in example_writer.FEATURES:
        assert parsed[name].dtype == tf.int64
        assert parsed[name].shape[1:] == (seq_len,)
        rows[name].append(parsed[name].numpy())
      count += int(batch.shape[0])
    per_file[path.name] = count
  arrays = {k: np.concatenate(v) if v else np.zeros((0, seq_len), np.int64)
            for k, v in rows.items()}
  return arrays, per_file


def sample_paragraphs(limit):
  out = []
  for doc in corpus.read_documents(str(SAMPLE)):
    out.extend(doc)
    if len(out) >= limit:
      break
  return out[:limit]


def train_sentencepiece(tmp_path, with_specials=True, vocab_size=800):
  """Trains a small SentencePiece model on the sample; returns its path."""
  import sentencepiece as spm
  text = tmp_path / "sp_train.txt"
  text.write_text("\n".join(sample_paragraphs(400)) + "\n", encoding="utf-8")
  prefix = tmp_path / ("sp" if with_specials else "sp_plain")
  extra = {}
  if with_specials:
    extra = dict(user_defined_symbols=["[CLS]", "[SEP]", "[MASK]"],
                 pad_id=0, pad_piece="[PAD]", unk_id=1)
  spm.SentencePieceTrainer.train(
      input=str(text), model_prefix=str(prefix), vocab_size=vocab_size,
      model_type="unigram", bos_id=-1, eos_id=-1, minloglevel=2, **extra)
  return str(prefix) + ".model"
