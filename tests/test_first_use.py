"""What a new user meets first (issue 55): a run whose later scripts find
its vocabulary, the commands the project prints run as printed, errors
before TensorFlow loads, warnings on tiny data, the original release's
hparam forms, and an install that puts no package of ours on the path."""

import dataclasses
import json
import os
import re
import shlex
import shutil
import site
import subprocess
import sys

import pytest

from configure_finetuning import FinetuningConfig
from configure_pretraining import PretrainingConfig
from finetune import summary as finetune_summary
from pretrain import preflight
from pretrain import summary
from tests import script_checks
from tests.pretraining_runs import MICRO
from tests.pretraining_runs import ROOT
from tests.pretraining_runs import build_data_dir
from tests.shared_data import SHARED
from util.config import apply_overrides
from util.config import parse_config
from util.errors import UserError

# Runs a script's main as `python SCRIPT ARGS` would, then says whether
# TensorFlow was imported by the time it ended.
PROBE = """
import json, runpy, sys
sys.argv = sys.argv[1:]
sys.path.insert(0, sys.argv[0].rsplit("/", 1)[0])
code = 0
try:
  runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as e:
  code = e.code
print(json.dumps({"code": code, "tensorflow": "tensorflow" in sys.modules}))
"""


def probe(script, *argv, stdin=""):
  done = subprocess.run(
      [sys.executable, "-c", PROBE, os.path.join(ROOT, script),
       *map(str, argv)], capture_output=True, text=True, timeout=300,
      cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), input=stdin)
  return json.loads(done.stdout.strip().splitlines()[-1]), done


def umask():
  mask = os.umask(0)
  os.umask(mask)
  return mask


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  """A dataset (max_seq_length 64) without DATA_DIR/vocab.txt: its only
  vocabulary is the copy beside the TFRecords, as a user who built it
  from elsewhere has."""
  root = tmp_path_factory.mktemp("first_use")
  data_dir = build_data_dir(root)
  os.remove(os.path.join(data_dir, "vocab.txt"))
  return data_dir


def micro_hparams(path, **kw):
  """A micro preset file, as configs/electra_tiny.json is to the
  quickstart."""
  path.write_text(json.dumps(dict(
      MICRO, num_train_steps=4, num_warmup_steps=2, iterations_per_loop=2,
      save_checkpoints_steps=4, num_eval_steps=1, **kw)))
  return str(path)


def trained_config(data_dir, name, **kw):
  """A resolved config as a trained run of MICRO saves it."""
  config = apply_overrides(PretrainingConfig(data_dir=data_dir,
                                             model_name=name),
                           dict(MICRO, **kw))
  config.validate()
  config.vocab_size = 30522
  return config


def fake_trained_run(data_dir, name, **kw):
  """models/NAME as a run trained to step 20 leaves it, as far as the
  early checks read: its pretrain_config.json and a checkpoint index."""
  config = trained_config(data_dir, name, **kw)
  os.makedirs(config.model_dir)
  with open(os.path.join(config.model_dir, "pretrain_config.json"), "w") as f:
    json.dump(dataclasses.asdict(config), f)
  open(os.path.join(config.model_dir, "ckpt-20.index"), "w").close()
  return config


def test_errors_of_a_resume_a_length_and_a_vocab_come_before_tensorflow(
    built, tmp_path):
  fake_trained_run(built, "trained", temperature=1.0)
  cases = [
      (["--model-name", "trained", "--hparams", json.dumps(MICRO),
        "--temperature", "2.0"],
       r"models/trained was trained \(to step 20\) with other hparams: "
       r"temperature 1.0 -> 2.0"),
      (["--model-name", "m", "--hparams", json.dumps(MICRO),
        "--max-seq-length", "512"],
       r"max_seq_length 512 disagrees with the dataset \(64, from "
       r".*metadata.json\); set max_seq_length to 64 or rebuild the data "
       r"with build_pretraining_dataset.py --max-seq-length 512"),
      (["--model-name", "m", "--hparams", json.dumps(MICRO),
        "--vocab-file", str(tmp_path / "nowhere.txt")],
       r"vocab file not found: .*nowhere.txt"),
  ]
  before = script_checks.snapshot(built)
  for argv, match in cases:
    result, done = probe("run_pretraining.py", "--data-dir", built, *argv)
    assert result == {"code": 2, "tensorflow": False}, done.stderr
    error = done.stderr.strip().splitlines()[-1]
    assert re.match("error: .*" + match, error), error
  assert script_checks.snapshot(built) == before


def test_no_vocab_anywhere_is_refused_before_training(built, tmp_path):
  data_dir = tmp_path / "data"
  shutil.copytree(built, data_dir)
  os.remove(data_dir / "pretrain_tfrecords" / "vocab.txt")
  result, done = probe("run_pretraining.py", "--data-dir", data_dir,
                       "--model-name", "m", "--hparams", json.dumps(MICRO))
  assert result == {"code": 2, "tensorflow": False}, done.stderr
  assert done.stderr.strip().splitlines()[-1] == (
      f"error: vocab file not found: {data_dir}/vocab.txt nor the dataset's "
      f"copy {data_dir}/pretrain_tfrecords/vocab.txt; scoring, export and "
      "fine-tuning need the run's vocabulary: pass --vocab-file")
  assert not (data_dir / "models" / "m").exists()


def test_scoring_and_export_without_the_vocab_fail_before_tensorflow(
    built, tmp_path):
  data_dir = tmp_path / "data"
  shutil.copytree(built, data_dir)
  os.remove(data_dir / "pretrain_tfrecords" / "vocab.txt")
  config = fake_trained_run(str(data_dir), "novocab",
                            vocab_file=str(tmp_path / "gone.txt"))
  for script, extra in (("run_scoring.py", ()),
                        ("export_model.py", ("--format", "hf", "--output-dir",
                                             tmp_path / "out"))):
    result, done = probe(script, "--data-dir", data_dir, "--model-name",
                         "novocab", *extra, stdin="the cat sat .\n")
    assert result == {"code": 2, "tensorflow": False}, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: vocab file not found: {tmp_path}/gone.txt (named by "
        f"{config.model_dir}/pretrain_config.json); pass the pretraining "
        "vocab with --vocab-file")


def test_early_checks_compare_only_what_resolve_leaves_alone():
  """Each preset as parsed against the config a run of it saves: the
  early check finds no change (a field resolve() fills would be reported
  as one, and belongs in preflight.DERIVED)."""
  for name in sorted(os.listdir(os.path.join(ROOT, "configs"))):
    with open(os.path.join(ROOT, "configs", name)) as f:
      parsed = apply_overrides(PretrainingConfig(data_dir="d",
                                                 model_name="m"), json.load(f))
    saved = dataclasses.replace(parsed)
    saved.validate()
    saved.vocab_size = 30522
    saved = json.loads(json.dumps(dataclasses.asdict(saved)))
    fields = preflight.compared_fields(parsed)
    from pretrain.run_config import hparam_changes
    assert hparam_changes(saved, parsed, fields) == [], name
    preflight.check_architecture(dataclasses.replace(
        parsed, model_dir="d/models/m"), saved, fields)
    # And a real change is seen.
    hotter = dataclasses.replace(parsed, temperature=parsed.temperature + 1)
    assert [c[0] for c in hparam_changes(saved, hotter, fields)] == [
        "temperature"], name


def test_tiny_data_warns(capsys):
  config = PretrainingConfig(num_train_steps=100, num_warmup_steps=100,
                             train_batch_size=32, eval_batch_size=32,
                             num_eval_steps=20, do_eval=True)
  preflight.warn_small_data(config, {"num_examples": 37,
                                     "num_heldout_examples": 4})
  out = capsys.readouterr().out.splitlines()
  assert out == [
      "warning: num_train_steps 100 <= num_warmup_steps 100: the learning "
      "rate is still warming up when training ends (lower num_warmup_steps)",
      "warning: 100 steps x batch 32 read the dataset's 37 training examples"
      " ~86 times: a model that memorises them; build more data or train "
      "fewer steps",
      "warning: eval reads 640 sequences (num_eval_steps 20 x "
      "eval_batch_size 32) from 4 held-out examples: each is counted about "
      "160 times (lower num_eval_steps to 1 to read each about once)"]
  # The quickstart's shapes (configs/electra_tiny.json): 800 steps x 32
  # of 4,703 examples, 184 held out read as 20 x 32 (3.5 times, each
  # masked anew): no warning.
  quick = PretrainingConfig(num_train_steps=800, num_warmup_steps=100,
                            train_batch_size=32, eval_batch_size=32,
                            num_eval_steps=20, do_eval=True)
  preflight.warn_small_data(quick, {"num_examples": 4703,
                                    "num_heldout_examples": 184})
  assert capsys.readouterr().out == ""


def test_the_original_releases_hparam_forms():
  """Its README's `--hparams '{"model_size": "small", "task_names":
  ["mnli"]}'` (and its pretraining switches)."""
  config, _ = parse_config(FinetuningConfig, [
      "--data-dir", ROOT, "--model-name", "m", "--hparams",
      '{"model_size": "small", "task_names": ["mnli"]}'])
  assert config.tasks == ["mnli"] and config.model_size == "small"
  two = apply_overrides(FinetuningConfig(), {"task_names": ["rte", "MRPC"],
                                             "do_train": False,
                                             "do_eval": True,
                                             "num_trials": 2})
  assert two.tasks == ["rte", "mrpc"]
  with pytest.raises(UserError, match="'task_names' expects a list of task"):
    apply_overrides(FinetuningConfig(), {"task_names": [1]})
  pre = apply_overrides(PretrainingConfig(), {
      "debug": True, "model_size": "small", "electra_objective": False,
      "num_train_steps": 4010000, "vocab_size": 30522,
      "model_hparam_overrides": {"hidden_size": 64},
      "learning_rate": 1e-4, "train_batch_size": 8,
      "generator_hidden_size": 1.0, "do_train": False, "do_eval": True})
  assert pre.objective == "mlm" and pre.num_train_steps == 4010000


def test_every_versus_baseline_line_says_whether_it_is_beaten():
  class Task:
    name, metric = "rte", "accuracy"

  lines = finetune_summary.versus_baselines(
      {"rte": {"accuracy": 52.3, "loss": 0.7}}, [Task()], {"rte": 52.7})
  assert lines.splitlines() == [
      "no-text baselines (dev):",
      "  rte      accuracy               52.300 vs no-text baseline 52.700 "
      "(the training set's majority class; a constant for regression, "
      "correlation 0): does NOT beat it: no better than ignoring the text"]
  assert "beats it" in finetune_summary.versus_baselines(
      {"rte": {"accuracy": 60.0}}, [Task()], {"rte": 52.7})


def test_install_puts_none_of_our_packages_on_the_path(tmp_path):
  """setup.py installs the dependencies only (top_level.txt lists nothing),
  and a script runs from the clone without any install of ours: here with
  site's .pth files (an editable install's finder) left out."""
  subprocess.run([sys.executable, "setup.py", "-q", "egg_info",
                  "--egg-base", str(tmp_path)], cwd=ROOT, check=True,
                 capture_output=True)
  info, = tmp_path.glob("*.egg-info")
  assert (info / "top_level.txt").read_text().split() == []
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(site.getsitepackages()))
  done = subprocess.run(
      [sys.executable, "-S", os.path.join(ROOT, "run_pretraining.py"),
       "--data-dir", str(tmp_path / "nowhere"), "--model-name", "m"],
      cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
  assert done.returncode == 2 and done.stderr.strip() == (
      f"error: data_dir {tmp_path}/nowhere does not exist"), done.stderr


def test_docs_build_lengths_match_the_presets():
  text = open(os.path.join(ROOT, "docs", "build_pretraining_dataset.md")
              ).read()
  for name in os.listdir(os.path.join(ROOT, "configs")):
    with open(os.path.join(ROOT, "configs", name)) as f:
      length = json.load(f).get("max_seq_length", 128)
    assert f"--max-seq-length {length}" in text, name


def tiny_rte(data_dir):
  """finetuning_data/rte/: 40 training and 24 dev rows of GLUE's RTE."""
  folder = os.path.join(data_dir, "finetuning_data", "rte")
  os.makedirs(folder)
  for split, rows in (("train", 41), ("dev", 25)):
    with open(os.path.join(SHARED, "glue", "RTE", f"{split}.tsv")) as f:
      lines = f.read().splitlines()[:rows]
    with open(os.path.join(folder, f"{split}.tsv"), "w") as f:
      f.write("\n".join(lines) + "\n")


def run(command):
  return subprocess.run(command, shell=True, cwd=ROOT, capture_output=True,
                        text=True, timeout=900,
                        env=dict(os.environ, PYTHONPATH=ROOT))


def test_a_run_and_every_command_its_summary_prints(built, tmp_path):
  """The quickstart's path on a micro preset: a run whose only vocabulary
  is the dataset's copy trains, records that copy, and each `next:`
  command of its summary runs as printed (fine-tuning RTE, scoring,
  export into a folder whose parent is new, a hotter run); evaluating
  the fine-tuned model again (--no-do-train) just evaluates it."""
  data_dir = tmp_path / "data"
  shutil.copytree(built, data_dir)
  tiny_rte(str(data_dir))
  preset = micro_hparams(tmp_path / "micro.json")
  py = shlex.quote(sys.executable)
  trained = run(f"{py} run_pretraining.py --data-dir {data_dir} "
                f"--model-name m --hparams {preset} --do-eval")
  assert trained.returncode == 0, trained.stderr[-3000:]
  copy = f"{data_dir}/pretrain_tfrecords/vocab.txt"
  assert f"note: no {data_dir}/vocab.txt; using the dataset's copy {copy}" \
      in trained.stdout
  saved = json.loads((data_dir / "models" / "m" /
                      "pretrain_config.json").read_text())
  assert saved["vocab_file"] == copy
  assert trained.stdout.count("eval results") == 1  # printed once
  # The quickstart's last command: the table, the next commands, a plot.
  summed = run(f"{py} -m pretrain.summary --data-dir {data_dir} "
               f"--model-name m --pretrain-hparams {preset}")
  assert summed.returncode == 0, summed.stderr[-3000:]
  plot = data_dir / "models" / "m" / "train_curves.png"
  assert f"  train curves: {plot}" in summed.stdout.splitlines()
  assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

  config = summary.SummaryConfig(data_dir=str(data_dir), model_name="m",
                                 pretrain_hparams=preset)
  commands = summary.next_commands(config, py=sys.executable)
  assert [c.split(".py")[0].rsplit(" ", 1)[-1] for _, c in commands] == [
      "run_finetuning", "run_scoring", "export_model", "run_pretraining"]
  for what, command in commands:
    done = run(command)
    assert done.returncode == 0, (what, command, done.stderr[-3000:])
    if "run_finetuning" in command:
      assert "no-text baselines (dev):" in done.stdout
      assert re.search(r"rte +accuracy .* vs no-text baseline", done.stdout)
      assert "trial 1/1" in done.stdout and "kept trial 1's" in done.stdout
      out = data_dir / "models" / "m" / "finetuning"
      assert (out / "rte_dev_predictions_trial1.tsv").exists()
      result = json.loads(next(out.glob("results_rte_*.json")).read_text())
      assert result["kept_model"]["trial"] == 1
      assert set(result["baselines"]) == {"rte"}
      kept = script_checks.snapshot(out / "rte_model")
      again = run(command + " --no-do-train")
      assert again.returncode == 0, again.stderr[-3000:]
      assert f"evaluating {out}/rte_model (trial 1's model)" in again.stdout
      assert "overwrite" not in again.stdout + again.stderr
      assert script_checks.snapshot(out / "rte_model") == kept
    if "run_scoring" in command:
      assert "the cat sat on the mat ." in done.stdout
    if "export_model" in command:
      export = data_dir / "export" / "m"
      files = [p for p in export.rglob("*") if p.is_file()]
      assert any(p.name == "model.safetensors" for p in files)
      # Every file, safetensors too, readable as umask allows.
      assert {oct(p.stat().st_mode & 0o777) for p in files} == {
          oct(0o666 & ~umask())}


def doc_commands():
  """(file, script, argv) of every command of our scripts in a code block
  of the README and docs/ (templates: DATA_DIR, NAME and the like stand
  for the reader's; `[...]` marks optional flags)."""
  from dataset.config import BuildConfig
  from interop.config import ExportConfig
  from scoring.config import ScoringConfig
  scripts = {"build_pretraining_dataset.py": BuildConfig,
             "run_pretraining.py": PretrainingConfig,
             "run_finetuning.py": FinetuningConfig,
             "run_scoring.py": ScoringConfig, "export_model.py": ExportConfig}
  docs = ["README.md"] + [os.path.join("docs", n) for n in
                          sorted(os.listdir(os.path.join(ROOT, "docs")))]
  for doc in docs:
    with open(os.path.join(ROOT, doc)) as f:
      text = f.read()
    for block in re.findall(r"^```\n(.*?)^```", text, re.M | re.S):
      for line in block.replace("\\\n", " ").splitlines():
        for part in line.split("|"):
          if not any(name in part for name in scripts):
            continue
          words = shlex.split(part.replace("[", " ").replace("]", " "))
          script = next((w for w in words if w in scripts), None)
          if script:
            yield doc, scripts[script], words[words.index(script) + 1:]


def test_every_command_in_the_docs_names_flags_its_script_has():
  from util import config as config_util
  seen = 0
  for doc, cls, argv in doc_commands():
    parser = config_util.ArgumentParser()
    parser.add_argument("--hparams", action="append")
    config_util.add_config_flags(parser, cls)
    try:
      config_util.parse_args(parser, argv)
    except UserError as e:
      pytest.fail(f"{doc}: {' '.join(argv)}: {e}")
    seen += 1
  assert seen >= 10, seen
