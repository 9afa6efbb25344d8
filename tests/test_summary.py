"""The quickstart's last lines (pretrain/summary.py): the eval before ->
after table, the time taken, and next commands whose flags each script
accepts (so they cannot go stale)."""

import json
import os
import shlex

import pytest

from configure_finetuning import FinetuningConfig
from configure_pretraining import PretrainingConfig
from interop.config import ExportConfig
from pretrain import summary
from scoring.config import ScoringConfig
from util import config as config_util

SCRIPTS = {"run_finetuning.py": FinetuningConfig,
           "run_scoring.py": ScoringConfig, "export_model.py": ExportConfig,
           "run_pretraining.py": PretrainingConfig}
BEFORE = {"disc_auc": 0.51, "masked_lm_loss": 8.96, "global_step": 0}
AFTER = {"disc_auc": 0.536, "masked_lm_loss": 6.21, "global_step": 800,
         "disc_recall": 0.0}


def run_dir(tmp_path, results=AFTER):
  model_dir = tmp_path / "models" / "tiny"
  model_dir.mkdir(parents=True)
  (model_dir / "eval_results.json").write_text(json.dumps(results))
  return model_dir


def test_before_after_table_time_and_next_commands(tmp_path, capsys):
  model_dir = run_dir(tmp_path)
  (model_dir / "eval_before.json").write_text(json.dumps(BEFORE))
  summary.main(["--data-dir", str(tmp_path), "--model-name", "tiny",
                "--before", str(model_dir / "eval_before.json"),
                "--pretrain-hparams", "configs/electra_tiny.json"])
  lines = capsys.readouterr().out.splitlines()
  assert lines[0] == f"== {model_dir}"  # no --started: no time said
  assert lines[1].split() == ["eval", "metric", "before", "(step", "0)",
                              "after", "(step", "800)"]
  # Metrics both evals have, each with its before and after value.
  assert [l.split() for l in lines[2:4]] == [
      ["disc_auc", "0.5100", "0.5360"], ["masked_lm_loss", "8.9600",
                                         "6.2100"]]
  assert lines[4] == "next:"
  commands = [l.strip() for l in lines[5:] if not l.strip().startswith("#")]
  assert len(commands) == 4


def test_done_in_minutes():
  cfg = summary.SummaryConfig(data_dir="d", model_name="m")
  lines = summary.summary_lines(cfg, None, AFTER, seconds=275)
  assert lines[0] == f"== {os.path.join('d', 'models', 'm')}, done in 4.6 min"
  # Without a before: the after column alone, every metric.
  assert lines[1].split() == ["eval", "metric", "after", "(step", "800)"]
  assert len(lines) == 2 + 3 + 1 + 8


def test_every_next_command_parses_with_its_script(tmp_path):
  cfg = summary.SummaryConfig(data_dir=str(tmp_path), model_name="tiny",
                              pretrain_hparams="configs/electra_tiny.json")
  seen = set()
  for _, command in summary.next_commands(cfg):
    words = shlex.split(command.split("|")[-1])
    assert words[0] == "python"
    script, argv = words[1], words[2:]
    seen.add(script)
    parser = config_util.ArgumentParser()
    parser.add_argument("--hparams", action="append")
    config_util.add_config_flags(parser, SCRIPTS[script])
    args = config_util.parse_args(parser, argv)  # unknown flag: UserError
    assert args.data_dir == str(tmp_path)
    # A hotter run is a new model: a changed temperature on the trained
    # one is refused by the resume check.
    if script == "run_pretraining.py":
      assert args.model_name != "tiny" and args.temperature == "2.0"
    else:
      assert args.model_name == "tiny"
  assert seen == set(SCRIPTS)


def test_missing_results_are_one_error_line(tmp_path, capsys):
  with pytest.raises(SystemExit) as info:
    summary.main(["--data-dir", str(tmp_path), "--model-name", "tiny"])
  assert info.value.code == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and err[0].startswith(
      f"error: no eval results at {tmp_path}/models/tiny/eval_results.json")


def test_a_rerun_without_a_before_file_shows_after_only(tmp_path, capsys):
  model_dir = run_dir(tmp_path)
  summary.main(["--data-dir", str(tmp_path), "--model-name", "tiny",
                "--before", str(model_dir / "eval_before.json")])
  assert "before" not in capsys.readouterr().out.splitlines()[1]
