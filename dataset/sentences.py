"""A light sentence splitter: paragraphs -> sentences, by regex.

The original release packs whole lines; this builder splits the
paragraphs `dataset.corpus` reads into sentences first, so that segments
A and B end at sentence boundaries. No model and no language data: a
period after an abbreviation or an initial does not end a sentence.
"""

import re

# A sentence ends at . ! or ? (plus closing quotes/brackets), then whitespace,
# then something that can open a sentence: an upper-case letter, a digit or an
# opening quote/bracket.
_BOUNDARY = re.compile(r"([.!?][\"'\u201d\u2019)\]]*)\s+"
                       r"(?=[\"'\u201c\u2018(\[]?[A-Z0-9\u00c0-\u00de])")
# Words whose trailing period rarely ends a sentence.
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof st jr sr vs etc e.g i.e no vol fig approx ca c "
    "inc ltd co corp gen col lt sgt capt rev hon gov sen rep pres mt ft "
    "jan feb mar apr jun jul aug sep sept oct nov dec".split())


def _ends_with_abbreviation(paragraph, start, end):
  """Whether the word just before paragraph[end] (a period) is an
  abbreviation or an initial, so the period does not end a sentence."""
  # rfind, not a regex: this runs for every candidate boundary.
  cut = max(paragraph.rfind(" ", start, end), start - 1) + 1
  word = paragraph[cut:end].lstrip("\"'(\u201c[").rstrip(".").lower()
  # Single letters are initials ("J. R. R. Tolkien").
  return (len(word) == 1 and word.isalpha()) or word in _ABBREVIATIONS


def split_sentences(paragraph):
  """Splits a paragraph into sentences with a light regex heuristic."""
  sentences = []
  start = 0
  for match in _BOUNDARY.finditer(paragraph):
    end = match.end(1)
    if (match.group(1)[0] == "." and
        _ends_with_abbreviation(paragraph, start, match.start(1) + 1)):
      continue
    sentence = paragraph[start:end].strip()
    if sentence:
      sentences.append(sentence)
    start = match.end()
  tail = paragraph[start:].strip()
  if tail:
    sentences.append(tail)
  return sentences
