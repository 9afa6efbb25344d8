"""Prose and records stay together (issue 63): every marked block in the
README and the results write-ups is its record's table or list as
committed, and each figure in README.md's Results table is in the record
its row links."""

import os
import re

import pytest

from benchmarks import quote_results

ROOT = quote_results.ROOT


@pytest.mark.parametrize("name", quote_results.FILES)
def test_every_quoted_block_is_its_record(name):
  with open(os.path.join(ROOT, name), encoding="utf-8") as f:
    text = f.read()
  assert quote_results.quoted(text) == text, (
      f"{name}: run python benchmarks/quote_results.py")


def test_the_readme_quotes_the_seed_tested_comparison():
  with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    text = f.read()
  for part in ("table1", "list1"):
    assert f"<!-- results:comparison_tiny_gpu/results.md:{part} -->" in text


def test_a_stale_block_is_rewritten_and_a_missing_part_named(tmp_path):
  (tmp_path / "run").mkdir()
  (tmp_path / "run" / "results.md").write_text(
      "| a | b |\n|---|---|\n| 1 | 2 |\n\ntext\n\n- x: 1\n  wrapped\n- y\n")
  stale = ("<!-- results:run/results.md:table1 -->\n| a | b |\n| 1 | 3 |\n"
           "<!-- /results -->\n<!-- results:run/results.md:list1 -->\n"
           "<!-- /results -->\n")
  assert quote_results.quoted(stale, results=str(tmp_path)) == (
      "<!-- results:run/results.md:table1 -->\n| a | b |\n|---|---|\n"
      "| 1 | 2 |\n<!-- /results -->\n<!-- results:run/results.md:list1 -->"
      "\n- x: 1\n  wrapped\n- y\n<!-- /results -->\n")
  with pytest.raises(quote_results.QuoteError, match="table2"):
    quote_results.quoted("<!-- results:run/results.md:table2 -->\n"
                         "<!-- /results -->", results=str(tmp_path))
  with pytest.raises(quote_results.QuoteError, match="nope.md"):
    quote_results.quoted("<!-- results:nope.md:table1 -->\n"
                         "<!-- /results -->", results=str(tmp_path))


def test_the_check_says_which_file_differs(tmp_path, capsys, monkeypatch):
  (tmp_path / "results" / "run").mkdir(parents=True)
  (tmp_path / "results" / "run" / "results.md").write_text("| a |\n")
  doc = tmp_path / "doc.md"
  doc.write_text("<!-- results:run/results.md:table1 -->\n<!-- /results -->")
  monkeypatch.setattr(quote_results, "ROOT", str(tmp_path))
  monkeypatch.setattr(quote_results, "RESULTS", str(tmp_path / "results"))
  assert quote_results.main(["--check", "doc.md"]) == 1
  assert "differs from its records: doc.md" in capsys.readouterr().out
  assert quote_results.main(["doc.md"]) == 0
  assert quote_results.main(["--check", "doc.md"]) == 0
  assert "| a |\n<!-- /results -->" in doc.read_text()


def _results_rows():
  with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    section = f.read().split("## Results\n")[1].split("\n## ")[0]
  for row in section.splitlines():
    link = re.search(r"\]\((results/[^)]+)\)", row)
    if row.startswith("|") and link:
      yield row, link.group(1)


def test_each_figure_of_the_readme_table_is_in_its_record():
  rows = list(_results_rows())
  assert len(rows) == 8
  for row, record in rows:
    with open(os.path.join(ROOT, record), encoding="utf-8") as f:
      text = f.read()
    shows = row.rstrip(" |").rsplit("|", 1)[1]
    for figure in re.findall(r"\d+\.\d+", shows):
      assert figure in text, (figure, record)
