"""Chunk tags: CoNLL IOB2 <-> BIOES, spans, and span-level counts.

A tag is "O" or "<prefix>-<type>" (prefix B, I, E or S). A span is
(start, end, type) with `end` inclusive. One reading of tags into spans
serves every scheme, and it is conlleval's: a chunk starts at B- or S-, or
at an I-/E- that does not continue an open chunk of its type (conlleval's
"I after O starts a chunk"); it ends at E- or S-, or before a tag that does
not continue it. IOB2 tags have no E-/S-, so on them this is exactly how
conlleval groups words.

BIOES (the dissertation, section 4.3.1, tags chunks with it): a one-word
chunk is S-X, a longer one B-X I-X ... E-X; O stays O. IOB2 -> BIOES reads
the spans and writes them out again, so even a stray I-X after O (an IOB1
habit) becomes the chunk conlleval would count.
"""

OUTSIDE = "O"
PREFIXES = ("B", "I", "E", "S")


def split_tag(tag):
  """"B-NP" -> ("B", "NP"); "O" -> ("O", ""). ValueError if malformed."""
  if tag == OUTSIDE:
    return OUTSIDE, ""
  prefix, sep, kind = tag.partition("-")
  if not sep or prefix not in PREFIXES or not kind:
    raise ValueError(f"malformed chunk tag '{tag}'")
  return prefix, kind


def get_spans(tags):
  """The chunks of a tag sequence (IOB2 or BIOES) as (start, end, type)."""
  spans = []
  start, open_kind = None, None  # the chunk that an I-/E- may continue
  for i, tag in enumerate(tags):
    prefix, kind = split_tag(tag)
    continues = (start is not None and kind == open_kind and
                 prefix in ("I", "E"))
    if not continues:
      if start is not None:
        spans.append((start, i - 1, open_kind))
      start, open_kind = (None, None) if prefix == OUTSIDE else (i, kind)
    if prefix in ("E", "S"):
      spans.append((start, i, kind))
      start, open_kind = None, None
  if start is not None:
    spans.append((start, len(tags) - 1, open_kind))
  return spans


def spans_to_bioes(spans, length):
  tags = [OUTSIDE] * length
  for start, end, kind in spans:
    if start == end:
      tags[start] = f"S-{kind}"
    else:
      tags[start] = f"B-{kind}"
      tags[start + 1:end] = [f"I-{kind}"] * (end - start - 1)
      tags[end] = f"E-{kind}"
  return tags


def spans_to_iob2(spans, length):
  tags = [OUTSIDE] * length
  for start, end, kind in spans:
    tags[start] = f"B-{kind}"
    tags[start + 1:end + 1] = [f"I-{kind}"] * (end - start)
  return tags


def iob2_to_bioes(tags):
  return spans_to_bioes(get_spans(tags), len(tags))


def bioes_to_iob2(tags):
  """For conlleval, which reads B/I/O: spans written back as IOB2."""
  return spans_to_iob2(get_spans(tags), len(tags))


def bioes_tag_set(kinds):
  """Every tag BIOES can write for these chunk types, sorted, with O."""
  return sorted([OUTSIDE] + [f"{p}-{k}" for k in kinds for p in PREFIXES])


def span_counts(gold_tags, predicted_tags):
  """(correct, predicted, gold) chunk counts of one sentence; a chunk is
  correct when its type, start and end all match a gold chunk."""
  gold = set(get_spans(gold_tags))
  predicted = set(get_spans(predicted_tags))
  return len(gold & predicted), len(predicted), len(gold)


def precision_recall_f1(correct, predicted, gold):
  """Corpus-level P, R, F1 (0-100) from summed span counts, as conlleval
  reports them (0 where a denominator is 0)."""
  precision = 100.0 * correct / predicted if predicted else 0.0
  recall = 100.0 * correct / gold if gold else 0.0
  total = precision + recall
  return precision, recall, (2 * precision * recall / total if total
                             else 0.0)
