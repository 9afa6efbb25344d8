"""Packs tokenized sentences into fixed-length pretraining examples.

Pure Python (no TensorFlow) so it is cheap to test. Sentences of one document
accumulate until they reach a target length; they are then split into one
or two segments, `[CLS] A [SEP] B [SEP]`, and padded. Examples never span
documents. Mirrors the packing of the original ELECTRA data builder.
"""

import random
import typing

SINGLE_SEGMENT_PROB = 0.1  # like classification inputs: only segment A
SHORT_TARGET_PROB = 0.05  # random-length targets, so short inputs are seen
SPILL_PROB = 0.5  # a sentence that overflows segment A may still join it
_UNLIMITED = 1 << 30


class Example(typing.NamedTuple):
  input_ids: list
  input_mask: list
  segment_ids: list
  num_tokens: int  # non-special tokens (A + B, after trimming)
  length: int  # tokens before padding, specials included
  single_segment: bool  # True when there is no B part


class ExampleBuilder:
  """Feed sentences with `add_sentence`, mark document ends with
  `end_document`; both return a finished `Example` or None."""

  def __init__(self, max_length, cls_id, sep_id, pad_id, rng=None):
    if max_length < 5:
      raise ValueError(f"max_length must be at least 5, got {max_length}")
    self._max_length = max_length
    self._cls = cls_id
    self._sep = sep_id
    self._pad = pad_id
    self._rng = rng if rng is not None else random.Random(0)
    self._sentences = []
    self._length = 0
    self._target_length = max_length

  @property
  def target_length(self):
    return self._target_length

  def add_sentence(self, token_ids):
    if not token_ids:
      return None
    self._sentences.append(token_ids)
    self._length += len(token_ids)
    if self._length >= self._target_length:
      return self._create_example()
    return None

  def add_long_sentence(self, token_ids):
    """Like `add_sentence` for a sentence of any length; returns the list of
    examples finished. One too long for an example fills whole examples
    piece by piece, where `add_sentence` would keep only its start."""
    if len(token_ids) <= self._max_length - 2:
      example = self.add_sentence(token_ids)
      return [example] if example else []
    examples = []
    if self._sentences:  # what came before goes out whole
      examples.append(self._create_example())
    room = self._max_length - 3  # [CLS] A [SEP] B [SEP]
    start = 0
    while len(token_ids) - start > room:
      piece = token_ids[start:start + room]
      # As two "sentences": the usual A/B split (or single segment) applies
      # and nothing is trimmed.
      half = len(piece) // 2
      self._sentences = [piece[:half], piece[half:]]
      examples.append(self._create_example())
      start += room
    example = self.add_sentence(token_ids[start:])
    if example:
      examples.append(example)
    return examples

  def end_document(self):
    """Flushes what is left of the document (if anything) as an example."""
    if self._sentences:
      return self._create_example()
    return None

  def _create_example(self):
    rng = self._rng
    if rng.random() < SINGLE_SEGMENT_PROB:
      first_target = _UNLIMITED
    else:
      # -3 leaves room for [CLS] and the two [SEP]s.
      first_target = (self._target_length - 3) // 2

    first, second = [], []
    for sentence in self._sentences:
      if (not first or len(first) + len(sentence) < first_target or
          (not second and len(first) < first_target and
           rng.random() < SPILL_PROB)):
        first.extend(sentence)
      else:
        second.extend(sentence)

    # Trim, keeping room for the special tokens still to be added.
    first = first[:self._max_length - 2]
    second = second[:max(0, self._max_length - len(first) - 3)]

    self._sentences = []
    self._length = 0
    if rng.random() < SHORT_TARGET_PROB:
      self._target_length = rng.randint(5, self._max_length)
    else:
      self._target_length = self._max_length
    return self._make_example(first, second)

  def _make_example(self, first, second):
    input_ids = [self._cls] + first + [self._sep]
    segment_ids = [0] * len(input_ids)
    if second:
      input_ids += second + [self._sep]
      segment_ids += [1] * (len(second) + 1)
    length = len(input_ids)
    pad = self._max_length - length
    return Example(
        input_ids=input_ids + [self._pad] * pad,
        input_mask=[1] * length + [0] * pad,
        segment_ids=segment_ids + [0] * pad,
        num_tokens=len(first) + len(second),
        length=length,
        single_segment=not second)
