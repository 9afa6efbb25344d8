"""Shared input encoding: [CLS] a [SEP] (b [SEP]), padded to a length."""

import numpy as np


def model_inputs(features):
  """The arrays fed to the model (keys with "_" hold Python metadata)."""
  return {k: v for k, v in features.items() if not k.startswith("_")}


def limit(examples, n):
  """The first n examples (n = 0: all), as train/eval_examples_limit."""
  return examples[:n] if n else examples


def truncate_pair(a, b, max_tokens):
  """Drops tokens from the end of the longer one until both fit (BERT)."""
  a, b = list(a), list(b)
  while len(a) + len(b) > max_tokens:
    (a if len(a) > len(b) else b).pop()
  return a, b


def pack(tokenizer, a, b, max_seq_length):
  """One row's ids, mask and segments from token-id lists a and b."""
  ids = tokenizer.special_ids
  tokens = [ids["cls"]] + list(a) + [ids["sep"]]
  segments = [0] * len(tokens)
  if b is not None:
    tokens += list(b) + [ids["sep"]]
    segments += [1] * (len(b) + 1)
  pad = max_seq_length - len(tokens)
  return (tokens + [ids["pad"]] * pad, [1] * len(tokens) + [0] * pad,
          segments + [0] * pad)


def encode_pairs(tokenizer, texts_a, texts_b, max_seq_length):
  """Features of sentence (pair) inputs; texts_b entries may be None.

  Every text is tokenized in one batch; pairs are truncated longest-first.
  """
  has_b = [b is not None for b in texts_b]
  tokens = tokenizer.tokenize_batch(
      list(texts_a) + [b for b in texts_b if b is not None])
  tokens_a, tokens_b = tokens[:len(texts_a)], iter(tokens[len(texts_a):])
  rows = []
  for a, pair in zip(tokens_a, has_b):
    b = next(tokens_b) if pair else None
    if b is None:
      a = a[:max_seq_length - 2]
    else:
      a, b = truncate_pair(a, b, max_seq_length - 3)
    rows.append(pack(tokenizer, a, b, max_seq_length))
  input_ids, input_mask, segment_ids = (np.array(x, np.int32).reshape(
      len(rows), max_seq_length) for x in zip(*rows)) if rows else (
          np.zeros((0, max_seq_length), np.int32),) * 3
  return {"input_ids": input_ids, "input_mask": input_mask,
          "segment_ids": segment_ids,
          "example_index": np.arange(len(rows), dtype=np.int32)}
