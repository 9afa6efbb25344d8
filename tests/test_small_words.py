"""What the scripts say, in small (issue 66): scoring's cost line counts
sentences, not blank lines, and says "1 sentence"; each no-text baseline
line describes its own kind of baseline; export's --help names every
format."""

import os
import subprocess
import sys
import types

import pytest

from finetune import summary as finetune_summary
from scoring import run as scoring_run
from scoring.pll import Scorer
from tests.pretraining_runs import ROOT


class Words:
  """A tokenizer that splits on spaces."""

  def tokenize_batch(self, texts):
    return [t.split() for t in texts]


def scorer(method):
  s = Scorer.__new__(Scorer)
  s.method, s.top_k, s.max_seq_length, s.tokenizer = method, 20, 128, Words()
  s.model = types.SimpleNamespace(PLL_METHOD="mlm")  # a BERT run's
  return s


def test_the_cost_line_counts_sentences_not_blank_lines():
  lines = ["the cat sat", "", "  ", "a dog"]
  assert scorer("electric").cost(lines) == (
      "method electric: 1 pass per sentence (every token at once), 2 passes "
      "for 2 sentences")
  assert scorer("mlm").cost(["the cat sat", ""]) == (
      "method mlm: 1 pass per token = ~3 passes per sentence here (3.0 "
      "tokens on average), ~3 for 1 sentence")


def test_scored_one_sentence(capsys):
  fake = types.SimpleNamespace(method="electric", max_seq_length=128,
                               last_stats=dict(sentences=1, tokens=6, rows=1,
                                               seconds=0.5, truncated=0))
  scoring_run.report_speed(fake, sys.stdout)
  assert capsys.readouterr().out.startswith(
      "scored 1 sentence (6 tokens, 1 model rows) in 0.50s: 2.0 sentences/s")


@pytest.mark.parametrize("name,metric,words", [
    ("rte", "accuracy", "the training set's majority class"),
    ("sts", "pearson", "a constant prediction: correlation 0"),
])
def test_a_baseline_line_describes_its_own_baseline(name, metric, words):
  task = types.SimpleNamespace(name=name, metric=metric,
                               is_regression=name == "sts")
  line = finetune_summary.versus_baselines(
      {name: {metric: 52.3}}, [task], {name: 52.7}).splitlines()[1]
  assert f"vs no-text baseline 52.700 ({words}): does NOT beat it" in line
  other = ("majority class" if name == "sts" else "constant")
  assert other not in line


def test_export_help_names_every_format():
  out = subprocess.run([sys.executable, "export_model.py", "--help"],
                       cwd=ROOT, capture_output=True, text=True,
                       timeout=120).stdout
  flat = " ".join(out.split())
  for name in ("hf", "savedmodel", "keras", "keras_hub", "KerasHub",
               "transformers"):
    assert name in flat, name


def test_the_install_is_not_editable():
  """setup.py installs no code, so `pip install .` (not -e, whose
  setuptools prints a warning block for nothing to edit)."""
  with open(os.path.join(ROOT, "Makefile")) as f:
    installs = [l.split() for l in f if "pip install" in l and
                "--upgrade pip" not in l]
  assert [w[-1] for w in installs] == [".", '".[test]"']
  assert not any("-e" in w for w in installs)
