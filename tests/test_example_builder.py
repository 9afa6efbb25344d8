"""Packing of tokenized sentences into [CLS] A [SEP] B [SEP] examples."""

import pathlib
import random
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from dataset import example_builder  # noqa: E402
from dataset.example_builder import ExampleBuilder  # noqa: E402

CLS, SEP, PAD = 2, 3, 0
MAX_LEN = 64


def _builder(seed=0, max_len=MAX_LEN):
  return ExampleBuilder(max_len, CLS, SEP, PAD, random.Random(seed))


def _build(docs, seed=0, max_len=MAX_LEN, with_targets=False):
  """Runs documents (lists of sentences) through a builder."""
  builder = _builder(seed, max_len)
  out = []
  for doc in docs:
    for sentence in doc:
      target = builder.target_length
      example = builder.add_sentence(sentence)
      if example:
        out.append((example, target) if with_targets else example)
    example = builder.end_document()
    if example:
      out.append((example, None) if with_targets else example)
  return out


def _random_docs(rng, num_docs, max_sentence=40):
  """Token t = doc * 100000 + position: lets tests find the source doc."""
  docs = []
  for d in range(num_docs):
    doc, pos = [], 0
    for _ in range(rng.randint(1, 30)):
      n = rng.randint(1, max_sentence)
      doc.append([d * 100000 + 1000 + pos + i for i in range(n)])
      pos += n
    docs.append(doc)
  return docs


def _segments(example):
  """Splits an example into (A, B) and checks its layout on the way."""
  ids, mask, seg = example.input_ids, example.input_mask, example.segment_ids
  n = example.length
  assert len(ids) == len(mask) == len(seg) == MAX_LEN
  assert 3 <= n <= MAX_LEN
  assert mask == [1] * n + [0] * (MAX_LEN - n)
  assert ids[n:] == [PAD] * (MAX_LEN - n)
  assert seg[n:] == [0] * (MAX_LEN - n)
  assert ids[0] == CLS and ids[n - 1] == SEP
  seps = [i for i in range(n) if ids[i] == SEP]
  assert CLS not in ids[1:n] and PAD not in ids[:n]
  if example.single_segment:
    assert seps == [n - 1]
    assert seg[:n] == [0] * n
    return ids[1:n - 1], []
  assert len(seps) == 2 and seps[1] == n - 1
  first_sep = seps[0]
  assert seg[:first_sep + 1] == [0] * (first_sep + 1)
  assert seg[first_sep + 1:n] == [1] * (n - first_sep - 1)
  a, b = ids[1:first_sep], ids[first_sep + 1:n - 1]
  assert a and b
  assert example.num_tokens == len(a) + len(b)
  return a, b


def test_layout_lengths_and_documents():
  docs = _random_docs(random.Random(1), 300)
  examples = _build(docs, seed=3)
  assert len(examples) > 300
  for example in examples:
    a, b = _segments(example)
    tokens = a + b
    # Never spans documents.
    assert len({t // 100000 for t in tokens}) == 1
    # Sentences keep their order inside each segment.
    assert a == sorted(a) and b == sorted(b)


def test_every_document_yields_an_example():
  # Short documents (under the target) still become one example each.
  docs = [[[10 + d, 11 + d]] for d in range(50)]
  examples = _build(docs)
  assert len(examples) == 50
  for d, example in enumerate(examples):
    assert example.single_segment
    assert example.input_ids[:4] == [CLS, 10 + d, 11 + d, SEP]


def test_empty_input_and_flush():
  builder = _builder()
  assert builder.add_sentence([]) is None
  assert builder.end_document() is None
  assert builder.add_sentence([7, 8]) is None
  example = builder.end_document()
  assert example.input_ids[:4] == [CLS, 7, 8, SEP]
  assert builder.end_document() is None


def test_long_sentence_is_trimmed():
  builder = _builder()
  example = builder.add_sentence(list(range(100, 400)))
  assert example.length == MAX_LEN
  a, b = _segments(example)
  assert a == list(range(100, 100 + MAX_LEN - 2)) and not b


def test_segment_and_short_target_shares():
  # One endless document of 10-token sentences: only the 10% coin makes a
  # single-segment example (plus the few tiny random targets).
  builder = _builder(seed=7, max_len=128)
  num, single, short = 0, 0, 0
  while num < 20000:
    target = builder.target_length
    example = builder.add_sentence(list(range(10, 20)))
    if example:
      num += 1
      single += example.single_segment
      short += target < 128
  assert 0.085 < single / num < 0.125, single / num
  # randint(5, 128) hits 128 itself 1/124 of the time.
  assert 0.040 < short / num < 0.060, short / num


def test_short_targets_make_short_examples():
  pairs = _build([[[10] for _ in range(20000)]], seed=5, max_len=128,
                 with_targets=True)
  shorts = [(e, t) for e, t in pairs if t is not None and t < 128]
  assert shorts
  for example, target in shorts:
    # One-token sentences: the example holds exactly `target` tokens.
    assert example.num_tokens == min(target, 126)
    assert example.length <= target + 3


def test_deterministic_for_a_seed():
  docs = _random_docs(random.Random(2), 100)
  first = _build(docs, seed=11)
  assert first == _build(docs, seed=11)
  assert first != _build(docs, seed=12)


def test_constants_match_the_original_recipe():
  assert example_builder.SINGLE_SEGMENT_PROB == 0.1
  assert example_builder.SHORT_TARGET_PROB == 0.05
