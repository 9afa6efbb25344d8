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
      "(the training set's majority class): does NOT beat it: no better "
      "than ignoring the text"]
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


def fresh_clone(tmp_path):
  """The working tree as a fresh clone of it holds it (its tracked and new
  files, nothing git ignores: no runs/, no data) with only shared/ beside
  it, holding 40 training and 24 dev rows of GLUE's RTE; the test's
  environment (.venv) linked in, as `make install` would have made it."""
  clone = tmp_path / "clone"
  listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard",
                           "-z"], cwd=ROOT, capture_output=True, check=True,
                          text=True).stdout.split("\0")
  for name in listed:
    source = os.path.join(ROOT, name)
    if name and os.path.isfile(source) and not os.path.islink(source):
      os.makedirs(clone / os.path.dirname(name), exist_ok=True)
      shutil.copyfile(source, clone / name)
  (clone / ".venv").symlink_to(os.path.realpath(sys.prefix))
  rte = tmp_path / "shared" / "data" / "glue" / "RTE"
  rte.mkdir(parents=True)
  for split, rows in (("train", 41), ("dev", 25)):
    with open(os.path.join(SHARED, "glue", "RTE", f"{split}.tsv")) as f:
      lines = f.read().splitlines()[:rows]
    (rte / f"{split}.tsv").write_text("\n".join(lines) + "\n")
  return clone


def in_clone(clone, command):
  """`command` run in the clone as a user's shell runs it (no PYTHONPATH,
  nor the variables of a `make test` around the tests)."""
  env = {k: v for k, v in os.environ.items() if k not in (
      "PYTHONPATH", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
  return subprocess.run(command, shell=True, cwd=clone, capture_output=True,
                        text=True, timeout=900, env=env)


def quickstart(clone):
  """`make quickstart` in the clone on a micro preset and a few documents
  (make's own variables; the install is taken as done); returns the
  output and its printed next commands."""
  done = in_clone(clone, "make -o .venv/.installed quickstart "
                  "QS_CONFIG=micro.json QS_BUILD_FLAGS='--max-docs 12 "
                  f"--max-seq-length {MICRO['max_seq_length']}'")
  assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
  lines = done.stdout[done.stdout.rindex("\nnext:\n"):].splitlines()[2:]
  return done.stdout, [(what.strip(" #"), command.strip())
                       for what, command in zip(lines[::2], lines[1::2])]


def test_the_quickstart_and_its_printed_commands_in_a_fresh_clone(tmp_path):
  """`make quickstart` in a fresh clone (a micro preset: seconds, not
  minutes), each `next:` command run as printed (fine-tuning RTE from
  ../shared/data/glue, scoring, export, a hotter run), then a second
  `make quickstart`, which resumes, and its printed export, which goes
  to a new folder (the first export is left as it is)."""
  clone = fresh_clone(tmp_path)
  micro_hparams(clone / "micro.json")
  out, commands = quickstart(clone)
  assert "== before training\n" in out
  plot = "runs/quickstart/models/electra_tiny/train_curves.png"
  assert f"  train curves: {plot}" in out.splitlines()
  assert (clone / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  py = ".venv/bin/python"
  run = "--data-dir runs/quickstart --model-name electra_tiny"
  export = f"{py} export_model.py {run} --format hf --output-dir "
  assert [c for _, c in commands] == [
      f"{py} run_finetuning.py {run} --task-names rte --raw-data-dir "
      "../shared/data/glue",
      f"printf 'the cat sat on the mat .\\n' | {py} run_scoring.py {run}",
      export + "runs/quickstart/export/electra_tiny",
      f"{py} run_pretraining.py --data-dir runs/quickstart --model-name "
      "electra_tiny_t2 --hparams micro.json --temperature 2.0 --do-eval"]
  for what, command in commands:
    done = in_clone(clone, command)
    assert done.returncode == 0, (what, command, done.stderr[-3000:])
    if "run_finetuning" in command:
      assert re.search(r"rte +accuracy .* vs no-text baseline", done.stdout)
      assert "trial 1/1" in done.stdout and "kept trial 1's" in done.stdout
      out_dir = clone / "runs/quickstart/models/electra_tiny/finetuning"
      assert (out_dir / "rte_dev_predictions_trial1.tsv").exists()
    if "run_scoring" in command:
      assert "the cat sat on the mat ." in done.stdout
  first = clone / "runs/quickstart/export/electra_tiny"
  files = [p for p in first.rglob("*") if p.is_file()]
  assert any(p.name == "model.safetensors" for p in files)
  # Every file, safetensors too, readable as umask allows.
  assert {oct(p.stat().st_mode & 0o777) for p in files} == {
      oct(0o666 & ~umask())}
  kept = script_checks.snapshot(first)

  out, again = quickstart(clone)
  assert "== before training: skipped" in out
  assert [c for _, c in again][:2] == [c for _, c in commands][:2]
  assert again[2][1] == export + "runs/quickstart/export/electra_tiny-2"
  done = in_clone(clone, again[2][1])
  assert done.returncode == 0, done.stderr[-3000:]
  assert list((clone / "runs/quickstart/export/electra_tiny-2").rglob(
      "model.safetensors"))
  assert script_checks.snapshot(first) == kept


def test_without_glue_the_finetuning_command_says_what_it_needs(tmp_path):
  config = summary.SummaryConfig(data_dir=str(tmp_path), model_name="m")
  what, command = summary.next_commands(config)[0]
  assert what.startswith("fine-tune: first download GLUE (RTE/ with "
                         "train.tsv and dev.tsv), then put its folder for "
                         "GLUE_DIR")
  assert command.endswith("--task-names rte --raw-data-dir GLUE_DIR")
  # GLUE put in DATA_DIR/finetuning_data: the command needs no flag.
  rte = tmp_path / "finetuning_data" / "rte"
  rte.mkdir(parents=True)
  for split in ("train", "dev"):
    (rte / f"{split}.tsv").write_text("")
  what, command = summary.next_commands(config)[0]
  assert command.endswith("--task-names rte") and "first" not in what


def test_a_run_finds_the_datasets_vocab_copy(tmp_path, capsys):
  """A dataset without DATA_DIR/vocab.txt: the run uses (and records,
  via config.vocab_file) the copy build_pretraining_dataset.py wrote."""
  folder = tmp_path / "pretrain_tfrecords"
  folder.mkdir()
  (folder / "vocab.txt").write_text("[PAD]\n")
  config = PretrainingConfig(data_dir=str(tmp_path), model_name="m")
  preflight.find_vocab(config, {"vocab_file": "vocab.txt"}, str(folder))
  assert config.vocab_file == str(folder / "vocab.txt")
  assert capsys.readouterr().out == (
      f"note: no {tmp_path}/vocab.txt; using the dataset's copy "
      f"{folder}/vocab.txt (recorded in the run's pretrain_config.json)\n")


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
