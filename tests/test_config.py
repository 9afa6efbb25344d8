"""Config: presets, precedence, and clear errors for bad hparams."""

import dataclasses
import glob
import json
import os

import pytest

import configure_pretraining
from util.errors import UserError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(*argv):
  return configure_pretraining.load_config(
      ["--data-dir", "/data", "--model-name", "m", *argv])


def test_defaults_follow_the_data_dir_convention():
  c = load()
  assert c.pretrain_tfrecords == "/data/pretrain_tfrecords/pretrain_data.tfrecord*"
  assert c.vocab_file == "/data/vocab.txt"
  assert c.model_dir == "/data/models/m"
  # ELECTRA-Small defaults (ELECTRA paper Table 6).
  assert (c.model_size, c.learning_rate, c.train_batch_size, c.disc_weight,
          c.mask_prob) == ("small", 5e-4, 128, 50.0, 0.15)
  assert c.max_predictions_per_seq == int((0.15 + 0.005) * 128)


def test_later_hparams_override_earlier_and_flags_win(tmp_path):
  path = tmp_path / "h.json"
  path.write_text(json.dumps({"learning_rate": 1e-3, "num_train_steps": 5}))
  c = load("--hparams", str(path), "--hparams", '{"num_train_steps": 7}',
           "--learning-rate", "3e-4")
  assert c.num_train_steps == 7 and c.learning_rate == 3e-4


def test_max_predictions_follows_overridden_mask_prob():
  c = load("--hparams", '{"mask_prob": 0.25, "max_seq_length": 512}')
  assert c.max_predictions_per_seq == int((0.25 + 0.005) * 512)
  assert load("--max-predictions-per-seq", "3").max_predictions_per_seq == 3


def test_unknown_hparam_names_the_key():
  with pytest.raises(UserError, match="unknown hparam 'lerning_rate'"):
    load("--hparams", '{"lerning_rate": 1}')


@pytest.mark.parametrize("hparams,match", [
    ('{"learning_rate": "fast"}', "learning_rate"),
    ('{"mask_prob": 1.5}', "mask_prob"),
    ('{"optimizer": "sgd"}', "optimizer"),
    ('{"num_train_steps": 0}', "num_train_steps"),
    ('{"max_predictions_per_seq": 500}', "max_predictions_per_seq"),
    ('{"do_train": false}', "nothing to do"),
    ('not json', "--hparams file not found"),
    ('{"a": ', "not valid JSON"),
])
def test_bad_hparams_are_one_line_errors(hparams, match):
  with pytest.raises(UserError, match=match) as info:
    load("--hparams", hparams)
  assert "\n" not in str(info.value)


def test_presets_exist_and_load():
  for objective in ("electra",):
    for size in ("tiny", "small", "base", "large"):
      path = os.path.join(ROOT, "configs", f"{objective}_{size}.json")
      c = load("--hparams", path)
      assert c.model_size == size
  large = load("--hparams", os.path.join(ROOT, "configs", "electra_large.json"))
  assert large.mask_prob == 0.25 and large.train_batch_size == 2048
  base = load("--hparams", os.path.join(ROOT, "configs", "electra_base.json"))
  assert abs(base.generator_hidden_size - 1 / 3) < 1e-6
  assert base.learning_rate == 2e-4 and base.train_batch_size == 256
  assert sorted(glob.glob(os.path.join(ROOT, "configs", "electra_*.json")))


def test_original_objective_switch_selects_bert_mlm():
  c = load("--hparams", '{"electra_objective": false}')
  assert (c.objective, c.mask_scheme) == ("mlm", "bert")
  assert load().mask_scheme == "electra"
  assert load("--mask-scheme", "bert").mask_scheme == "bert"


def test_original_spellings_map_once_at_the_boundary():
  """The original release's switches set the fields that say the same;
  they are not fields themselves, and untied_generator=false wins."""
  both = ('{"untied_generator": false, "untied_generator_embeddings": true, '
          '"generator_hidden_size": 1.0}')
  cases = [('{"electric_objective": true}', "objective", "electric"),
           ('{"untied_generator_embeddings": true}', "weight_sharing", "none"),
           (both, "weight_sharing", "all"),
           ('{"use_tpu": "true"}', "strategy", "tpu"),
           ('{"electra_objective": false, "objective": "script"}',
            "objective", "script")]  # a field given directly wins
  for hparams, field, value in cases:
    assert getattr(load("--hparams", hparams), field) == value, hparams
  assert load().weight_sharing == "embeddings"
  fields = {f.name for f in dataclasses.fields(
      configure_pretraining.PretrainingConfig)}
  assert not fields & {"electra_objective", "electric_objective", "use_tpu",
                       "untied_generator", "untied_generator_embeddings"}
  with pytest.raises(UserError, match="use_tpu"):
    load("--hparams", '{"use_tpu": "maybe"}')


# ------------------------------------------- flags: no prefixes, one line
SCRIPTS = ("run_pretraining", "run_finetuning", "run_scoring", "export_model",
           "build_pretraining_dataset", "run_comparison")


def one_line_error(capsys, script, argv):
  """`script`'s main(argv) must stop with exit 2 and one stderr line."""
  module = __import__(script)
  with pytest.raises(SystemExit) as info:
    module.main(argv)
  assert info.value.code == 2
  out, err = capsys.readouterr()
  lines = err.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: "), err
  assert "usage:" not in out + err
  return lines[0]


def test_a_mistyped_flag_is_one_line_naming_the_closest_flag(capsys):
  line = one_line_error(capsys, "run_pretraining", [
      "--data-dir", "/d", "--model-name", "m", "--num-train-step", "900"])
  assert line == ("error: unknown flag --num-train-step; did you mean "
                  "--num-train-steps?")
  line = one_line_error(capsys, "run_pretraining", [
      "--no-do-trian", "--data-dir", "/d"])
  assert line.endswith("did you mean --no-do-train?")
  line = one_line_error(capsys, "run_pretraining", ["--zzzz"])
  assert line == "error: unknown flag --zzzz; --help lists the flags"
  line = one_line_error(capsys, "run_pretraining", ["--num-train-steps"])
  assert line == "error: argument --num-train-steps: expected one argument"


@pytest.mark.parametrize("script,prefix,flag", [
    ("run_pretraining", "--num-train", "--num-train-steps"),
    ("run_finetuning", "--task-name", "--task-names"),
    ("run_scoring", "--top", "--top-k"),
    ("export_model", "--form", "--format"),
    ("build_pretraining_dataset", "--corpus", "--corpus-dir"),
    ("run_comparison", "--objective", "--objectives"),
])
def test_no_script_takes_an_abbreviated_flag(capsys, script, prefix, flag):
  # argparse would take each prefix for the one flag it begins.
  line = one_line_error(capsys, script, [prefix, "x"])
  assert line == f"error: unknown flag {prefix}; did you mean {flag}?"


def test_a_mistyped_hparam_names_the_closest_one():
  with pytest.raises(UserError) as info:
    load("--hparams", '{"temprature": 2.0}')
  assert str(info.value) == ("unknown hparam 'temprature' in --hparams JSON; "
                             "did you mean 'temperature'?")


# ------------------------------------ numbers: finite, in range, named once
def _config_classes():
  from comparison.config import ComparisonConfig
  from dataset.config import BuildConfig
  from finetune.config import FinetuningConfig
  from interop.config import ExportConfig
  from scoring.config import ScoringConfig
  return (configure_pretraining.PretrainingConfig, FinetuningConfig,
          ScoringConfig, BuildConfig, ComparisonConfig, ExportConfig)


@pytest.mark.parametrize("cls", _config_classes(), ids=lambda c: c.__name__)
def test_every_number_of_every_config_has_a_range(cls):
  """A numeric field added without a range (None: any value, e.g. a
  seed) fails here, and every range spec parses."""
  from util.config import in_range
  from util.config import numeric_fields
  assert sorted(cls.RANGES) == sorted(numeric_fields(cls))
  for spec in filter(None, cls.RANGES.values()):
    in_range(1.0, spec)


@pytest.mark.parametrize("argv,line", [
    (["--learning-rate", "nan"],
     "hparam 'learning_rate' must be a finite number, got nan"),
    (["--hparams", '{"learning_rate": Infinity}'],
     "hparam 'learning_rate' must be a finite number, got inf"),
    (["--hparams", '{"learning_rate": 1e999}'],
     "hparam 'learning_rate' must be a finite number, got inf"),
    (["--adam-beta1", "1.5"], "hparam 'adam_beta1' must be in [0, 1), got 1.5"),
    (["--clip-norm", "-1"], "hparam 'clip_norm' must be >= 0, got -1"),
    (["--max-seq-length", "0"], "hparam 'max_seq_length' must be >= 8, got 0"),
    # Issue 65, 6: what np.random.seed and keras' SeedGenerator accept.
    (["--seed=-5"], "hparam 'seed' must be in [0, 4294967296), got -5"),
    (["--seed", "99999999999999999999"],
     "hparam 'seed' must be in [0, 4294967296), got 99999999999999999999"),
    (["--max-seq-length", "1024"],
     "max_seq_length 1024 exceeds the model's 512 positions "
     "(model_hparam_overrides max_position_embeddings)"),
    (["--max-seq-length", "16", "--max-predictions-per-seq", "20"],
     "max_predictions_per_seq 20 exceeds max_seq_length 16"),
    (["--hparams", '{"learning_rate": 1e-3, "learning_rate": 2e-3}'],
     "--hparams names 'learning_rate' twice (0.001, then 0.002); keep one"),
    (["--model-hparam-overrides", '{"layer_norm_eps": -1}'],
     "model hparam 'layer_norm_eps' must be > 0, got -1"),
    (["--model-hparam-overrides", '{"hidden_dropout_prob": NaN}'],
     "model hparam 'hidden_dropout_prob' expects a finite number, got nan"),
    (["--model-hparam-overrides", '{"num_hidden_layers": 2.5}'],
     "model hparam 'num_hidden_layers' expects int, got 2.5"),
    (["--model-hparam-overrides", '{"hidden_size": 8, "hidden_size": 16}'],
     "hparam 'model_hparam_overrides' names 'hidden_size' twice (8, then "
     "16); keep one"),
])
def test_bad_numbers_and_duplicate_keys_name_their_cause(capsys, tmp_path,
                                                         argv, line):
  got = one_line_error(capsys, "run_pretraining", [
      "--data-dir", str(tmp_path), "--model-name", "m", *argv])
  assert got == "error: " + line


def test_duplicate_keys_in_an_hparams_file_and_nested(tmp_path):
  path = tmp_path / "h.json"
  path.write_text('{"model_hparam_overrides": {"a": 1, "a": 1}}')
  with pytest.raises(UserError, match=rf"--hparams file {path} names 'a' "
                     r"twice \(1, then 1\); keep one"):
    load("--hparams", str(path))


@pytest.mark.parametrize("script,argv,line", [
    ("run_finetuning", ["--hparams", '{"learning_rate": NaN}'],
     "hparam 'learning_rate' must be a finite number, got nan"),
    ("run_finetuning", ["--num-train-epochs", "-1"],
     "hparam 'num_train_epochs' must be > 0, got -1"),
    ("run_finetuning", ["--max-seq-length", "2"],
     "hparam 'max_seq_length' must be >= 5, got 2"),
    ("run_finetuning", ["--adam-beta2", "1"],
     "hparam 'adam_beta2' must be in [0, 1), got 1"),
    ("run_finetuning", ["--seed=-5"],
     "hparam 'seed' must be in [0, 4294967296), got -5"),
    ("run_finetuning", ["--seed", "99999999999999999999"],
     "hparam 'seed' must be in [0, 4294967296), got 99999999999999999999"),
    ("run_finetuning", ["--seed", "4294967295", "--num-trials", "2"],
     "hparam 'seed' 4294967295 with num_trials 2: the last trial's seed "
     "4294967296 is past 2**32 - 1, the most a seed can be"),
    ("run_scoring", ["--batch-size", "0"],
     "hparam 'batch_size' must be > 0, got 0"),
    ("build_pretraining_dataset", ["--corpus-dir", "c", "--vocab-file", "v",
                                   "--output-dir", "o", "--max-seq-length",
                                   "100000"],
     "hparam 'max_seq_length' must be in [8, 8192], got 100000"),
    ("run_comparison", ["--budget-flops", "inf"],
     "hparam 'budget_flops' must be a finite number, got inf"),
    ("run_comparison", ["--pretrain-hparams", '{"adam_beta1": -0.1}'],
     "--pretrain-hparams: hparam 'adam_beta1' must be in [0, 1), got -0.1"),
    ("run_comparison", ["--finetune-hparams", '{"learning_rate": 0}'],
     "--finetune-hparams: hparam 'learning_rate' must be > 0, got 0"),
])
def test_every_script_checks_its_numbers_up_front(capsys, tmp_path, script,
                                                  argv, line):
  base = {"run_finetuning": ["--raw-data-dir", str(tmp_path), "--output-dir",
                             str(tmp_path / "out"), "--task-names", "rte"],
          "run_scoring": ["--init-checkpoint", str(tmp_path)],
          "run_comparison": ["--output-dir", str(tmp_path / "out"),
                             "--tasks", ""]}.get(script, [])
  assert one_line_error(capsys, script, base + argv) == "error: " + line


@pytest.mark.parametrize("script", ["run_pretraining", "run_finetuning"])
def test_a_seed_out_of_range_under_jax_writes_nothing(tmp_path, script):
  """Issue 65, 6: refused at the flags, before JAX or any file."""
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  argv = {"run_pretraining": ["--data-dir", str(tmp_path), "--model-name",
                              "m"],
          "run_finetuning": ["--raw-data-dir", str(tmp_path), "--output-dir",
                             str(tmp_path / "out"), "--task-names", "rte"]}
  done = subprocess.run(
      [sys.executable, os.path.join(root, f"{script}.py"), *argv[script],
       "--seed", "99999999999999999999"], capture_output=True, text=True,
      timeout=120, cwd=root, env=dict(os.environ, KERAS_BACKEND="jax",
                                      JAX_PLATFORMS="cpu"))
  assert done.returncode == 2, done.stderr[-2000:]
  assert done.stderr.strip().splitlines() == [
      "error: hparam 'seed' must be in [0, 4294967296), got "
      "99999999999999999999"]
  assert not os.listdir(tmp_path)
