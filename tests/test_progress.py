"""What a user sees on long jobs and first errors: progress lines with
rate and ETA, what scoring will cost, quick errors for a missing
--data-dir, and a quickstart that does not redo or mislabel work."""

import io
import json
import os
import re
import subprocess
import sys
import time

import pytest

import build_pretraining_dataset
import run_finetuning
import run_scoring
from dataset import example_writer
from training import progress
from tests.finetuning_data import QUICK

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Clock:
  def __init__(self):
    self.now = 1000.0

  def perf_counter(self):
    return self.now


def lines_of(stream):
  return stream.getvalue().splitlines()


def test_progress_lines_each_tenth_with_rate_and_eta(monkeypatch):
  clock = Clock()
  monkeypatch.setattr(progress, "time", clock)
  out = io.StringIO()
  p = progress.Progress("scoring", 1000, "passes", out)
  for done in range(10, 1001, 10):  # 1 s per 10 passes: 100 s in all
    clock.now += 1.0
    p.update(done, "note")
  p.finish(done=1000)
  lines = lines_of(out)
  assert len(lines) == 10  # nine tenths (the tenth is the last line)
  assert lines[0] == ("scoring 100/1,000 passes (10%) | note | 10.0 passes/s "
                      "| elapsed 0m10s, ETA 1m30s")
  assert lines[-1] == ("scoring 1,000/1,000 passes (100%) | 10.0 passes/s | "
                       "took 1m40s")


def test_quick_jobs_print_their_last_line_only_and_slow_ones_keep_talking(
    monkeypatch):
  clock = Clock()
  monkeypatch.setattr(progress, "time", clock)
  out = io.StringIO()
  p = progress.Progress("eval", 100, "batches", out)
  for done in range(1, 101):  # 2 s in all: under QUIET_SECONDS
    clock.now += 0.02
    p.update(done)
  p.finish(always=False)
  assert lines_of(out) == []
  p = progress.Progress("export", 2, "steps", out)
  clock.now += 0.5
  p.finish(done=2)
  assert lines_of(out) == ["export 2/2 steps (100%) | 4.0 steps/s | took 0m00s"]
  # Steps of unequal work (export: a 48 s load, then a write): no rate,
  # no ETA, the time taken.
  out = io.StringIO()
  p = progress.Progress("export", 2, "steps", out, timed=False)
  clock.now += 48.0
  p.report(1, "loaded the model")
  clock.now += 0.2
  p.finish("wrote hf export OUT", done=2)
  assert lines_of(out) == [
      "export 1/2 steps (50%) | loaded the model | elapsed 0m48s",
      "export 2/2 steps (100%) | wrote hf export OUT | took 0m48s"]

  # A job whose first tenth takes long still says something every 30 s.
  out = io.StringIO()
  p = progress.Progress("scoring", 10 ** 6, "passes", out)
  for done in range(1, 200):
    clock.now += 1.0
    p.update(done)
  lines = lines_of(out)
  assert len(lines) == 199 // 30
  assert lines[0].startswith("scoring 30/1,000,000 passes (0%) | 1.0 passes/s"
                             " | elapsed 0m30s, ETA 11d")


def test_scoring_says_its_cost_first_and_shows_progress(runs, capsys,
                                                        monkeypatch):
  data_dir, _ = runs
  monkeypatch.setattr(progress, "QUIET_SECONDS", 0.0)
  monkeypatch.setattr("sys.stdin", io.StringIO(
      "the cat sat on the mat\na big dog ran\nthey saw it\n" * 20))
  run_scoring.main(["--data-dir", data_dir, "--model-name", "electra",
                    "--top-k", "20", "--batch-size", "16"])
  err = capsys.readouterr().err.splitlines()
  assert re.fullmatch(
      r"loaded electra model from \S+ in [0-9.]+s; method electra \(appendix "
      r"G, top_k 20\): 1 generator \+ up to 21 discriminator passes per token "
      r"= ~95 passes per sentence here \(4\.3 tokens on average\), ~5,720 for "
      r"60 sentences; faster: --top-k 10 \(~12 passes per token\) or "
      r"--method mlm \(1 pass per token: the generator alone\)", err[0]), err[0]
  ticks = [line for line in err if line.startswith("scoring ")]
  assert len(ticks) >= 5, err
  for line in ticks:
    assert re.fullmatch(r"scoring [0-9,]+/5,720 passes \(\d+%\) \| ~[0-9.,]+ "
                        r"sentences/s \| [0-9.,]+ (passes/s|s per pass) \| "
                        r"elapsed \d+m\d\ds, ETA \d+m\d\ds", line), line
  assert re.match(r"scored 60 sentences \(260 tokens, 5\d\d\d model rows\)",
                  err[-1])

  monkeypatch.setattr("sys.stdin", io.StringIO("a cat\nthe dog ran\n"))
  run_scoring.main(["--data-dir", data_dir, "--model-name", "electric"])
  first = capsys.readouterr().err.splitlines()[0]
  assert first.endswith("; method electric: 1 pass per sentence (every "
                        "token at once), 2 passes for 2 sentences"), first


def test_dataset_building_reports_share_done_and_eta(tmp_path, capsys,
                                                     monkeypatch):
  monkeypatch.setattr(example_writer, "_PROGRESS_SECONDS", 0.0)
  monkeypatch.setattr(example_writer, "_SENTENCES_PER_BATCH", 2000)
  build_pretraining_dataset.main([
      "--corpus-dir", os.path.join(ROOT, "sample_data", "corpus"),
      "--vocab-file", os.path.join(ROOT, "sample_data", "vocab_8k.txt"),
      "--output-dir", str(tmp_path / "out"), "--max-seq-length", "64"])
  lines = [line for line in capsys.readouterr().out.splitlines()
           if line.startswith("files ")]
  shares = [int(re.search(r"~(\d+)% of the text", line).group(1))
            for line in lines]
  assert len(shares) >= 5 and shares == sorted(shares), lines
  assert 80 <= shares[-1] <= 100  # the estimate ends near the truth
  assert all(re.search(r"tokens/s, ~\d+% of the text, elapsed \d+m\d\ds, "
                       r"ETA \d+m\d\ds$", line) for line in lines)


@pytest.mark.parametrize("script,extra", [
    ("run_pretraining", []),
    ("run_finetuning", ["--task-names", "rte"]),
    ("run_scoring", []),
    ("export_model", ["--output-dir", "/tmp/never_written"]),
])
def test_a_missing_data_dir_is_said_before_tensorflow_loads(tmp_path, script,
                                                            extra):
  missing = str(tmp_path / "no_such_dir")
  code = (f"import sys, time; start = time.perf_counter()\n"
          f"import {script}\n"
          f"try:\n"
          f"  {script}.main(['--data-dir', {missing!r}, '--model-name', 'm']"
          f" + {extra!r})\n"
          f"except SystemExit as e:\n"
          f"  print(e.code, 'tensorflow' in sys.modules, "
          f"round(time.perf_counter() - start, 2))\n")
  proc = subprocess.run([sys.executable, "-c", code], capture_output=True,
                        text=True, cwd=ROOT, timeout=120,
                        env=dict(os.environ, PYTHONPATH=ROOT))
  assert proc.stderr.strip() == f"error: data_dir {missing} does not exist"
  exit_code, tf_loaded, seconds = proc.stdout.split()
  assert (exit_code, tf_loaded) == ("2", "False"), proc.stdout
  assert float(seconds) < 5.0  # imports only; about 0.1 s when idle


def make_quickstart(tmp_path, qs):
  """`make quickstart` with a stand-in for Python that logs each command
  (and, as the builder and the eval would, writes metadata.json and
  eval_results.json)."""
  stub = tmp_path / "python"
  stub.write_text(
      "#!/bin/sh\n"
      f"echo \"$@\" >> {tmp_path}/commands\n"
      "case \"$1\" in build_pretraining_dataset.py)\n"
      f"  mkdir -p {qs}/pretrain_tfrecords && touch "
      f"{qs}/pretrain_tfrecords/metadata.json;;\n"
      "run_pretraining.py)\n"
      f"  mkdir -p {qs}/models/electra_tiny && echo {{}} > "
      f"{qs}/models/electra_tiny/eval_results.json;;\n"
      "esac\n")
  stub.chmod(0o755)
  venv = tmp_path / "venv"
  venv.mkdir(exist_ok=True)
  marker = venv / ".installed"
  marker.touch()
  later = time.time() + 3600  # newer than setup.py: nothing to install
  os.utime(marker, (later, later))
  (tmp_path / "commands").write_text("")
  proc = subprocess.run(
      ["make", "--no-print-directory", "quickstart", f"QS={qs}",
       f"PY={stub}", f"VENV={venv}"], capture_output=True, text=True,
      cwd=ROOT, timeout=120)
  assert proc.returncode == 0, proc.stderr
  return proc.stdout, (tmp_path / "commands").read_text().splitlines()


def test_quickstart_rerun_builds_nothing_and_labels_before_training_honestly(
    tmp_path):
  qs = tmp_path / "qs"
  out, commands = make_quickstart(tmp_path, qs)
  scripts = [c.split()[0] for c in commands]
  assert scripts == ["build_pretraining_dataset.py", "run_pretraining.py",
                     "run_pretraining.py", "-m"]
  assert "--no-do-train --do-eval" in commands[1]
  assert "== before training\n" in out
  # The summary's table compares with the untrained model's eval, kept.
  assert commands[3].startswith("-m pretrain.summary ")
  assert f"--before {qs}/models/electra_tiny/eval_before.json" in commands[3]
  assert (qs / "models" / "electra_tiny" / "eval_before.json").exists()

  # Run again once a model is trained: the TFRecords are there and the
  # untrained-model eval would show the trained model's metrics.
  (qs / "models" / "electra_tiny").mkdir(parents=True, exist_ok=True)
  (qs / "models" / "electra_tiny" / "checkpoint").write_text("")
  out, commands = make_quickstart(tmp_path, qs)
  assert len(commands) == 2 and commands[0].startswith("run_pretraining.py")
  assert "--no-do-train" not in commands[0]
  assert "== before training: skipped" in out


def test_finetuning_shows_progress_and_checks_its_data_before_trial_1(
    pretrained, capsys, monkeypatch):
  monkeypatch.setattr(progress, "QUIET_SECONDS", 0.0)
  base = ["--data-dir", pretrained, "--model-name", "pre", "--hparams",
          json.dumps(dict(QUICK, log_every_steps=100, train_examples_limit=96,
                          output_dir=os.path.join(pretrained, "progress")))]
  run_finetuning.main(base + ["--task-names", "rte"])
  out = capsys.readouterr().out
  # 6 steps, log_every_steps 100: a line each tenth, not just the last.
  steps = re.findall(r"^step (\d+)/6 \| loss [0-9.]+ \| [0-9.]+ examples/s \| "
                     r"elapsed \d+m\d\ds, ETA \d+m\d\ds$", out, re.M)
  assert steps == [str(i) for i in range(1, 7)], out
  assert re.search(r"^dev rte 32/32 examples \(100%\) \| .* \| took ", out,
                   re.M), out

  # A task whose files are missing fails before any trial starts, in the
  # words of docs/run_finetuning.md.
  with pytest.raises(SystemExit):
    run_finetuning.main(base + ["--task-names", "rte,qnli"])
  out, err = capsys.readouterr()
  assert "trial 1/1" not in out and "step " not in out
  assert re.fullmatch(r"error: qnli: \S+/finetuning_data/qnli/train.tsv not "
                      r"found \(GLUE files go in the data folder's qnli/ or "
                      r"QNLI/; data folder: --raw-data-dir, default "
                      r"DATA_DIR/finetuning_data\)\n", err), err
