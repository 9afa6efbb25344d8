"""Figures quoted from a results record stay the record's (issue 63).

A quote in Markdown is a marked block:

    <!-- results:comparison_tiny_gpu/results.md:table1 -->
    | ... the record's first table, as it stands ... |
    <!-- /results -->

`PATH` is relative to results/; `tableN` is the Nth Markdown table of that
file, `listN` its Nth bullet list. This script rewrites every block from
its record (`--check`: only says which differ, exit 1);
tests/test_quote_results.py fails when a block and its record differ.

    python benchmarks/quote_results.py [--check] [FILE ...]
"""

import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "results")
FILES = ("README.md", "results/README.md", "results/original_parity/README.md")
BLOCK = re.compile(r"(<!-- results:(\S+?):(table|list)(\d+) -->\n)(.*?)"
                   r"(<!-- /results -->)", re.S)
_KIND = {"table": "|", "list": "- "}


class QuoteError(ValueError):
  """A block names a record or a part of it that does not exist."""


def part(text, kind, number):
  """The `number`th (from 1) run of lines starting like a `kind` ("table":
  "|", "list": "- ") in `text`, a list item's wrapped lines with it."""
  runs, run = [], []
  for line in text.splitlines():
    starts = line.startswith(_KIND[kind])
    if starts or (run and kind == "list" and line.startswith("  ")):
      run.append(line)
    elif run:
      runs.append(run)
      run = []
  if run:
    runs.append(run)
  if not 1 <= number <= len(runs):
    raise QuoteError(f"it has {len(runs)} {kind}(s), not a {kind} {number}")
  return "\n".join(runs[number - 1]) + "\n"


def quoted(text, results=None):
  """`text` with every marked block rewritten from its record (under
  `results`, results/ by default)."""
  results = results or RESULTS

  def one(match):
    head, path, kind, number = match.group(1, 2, 3, 4)
    record = os.path.join(results, path)
    try:
      with open(record, encoding="utf-8") as f:
        body = part(f.read(), kind, int(number))
    except (OSError, QuoteError) as e:
      raise QuoteError(f"results:{path}:{kind}{number}: {e}") from None
    return head + body + match.group(6)
  return BLOCK.sub(one, text)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("files", nargs="*", default=FILES)
  parser.add_argument("--check", action="store_true")
  args = parser.parse_args(argv)
  stale = []
  for name in args.files:
    path = os.path.join(ROOT, name)
    try:
      with open(path, encoding="utf-8") as f:
        text = f.read()
      new = quoted(text)
    except (OSError, QuoteError) as e:
      print(f"quote_results: {name}: {e}", file=sys.stderr)
      return 2
    if new != text:
      stale.append(name)
      if not args.check:
        with open(path, "w", encoding="utf-8") as f:
          f.write(new)
  for name in stale:
    print(f"{'differs from its records' if args.check else 'rewrote'}: "
          f"{name}")
  return 1 if args.check and stale else 0


if __name__ == "__main__":
  sys.exit(main())
