"""Multiple choice: RACE (read from hand-written files in its exact layout,
tests/data/race/: RACE itself is not on this machine), SWAG / COPA-style
CSV and JSON Lines, features, the head and loss, the scorer against
scikit-learn, and a short fine-tuning run of a tiny model."""

import csv
import json
import pathlib
import shutil

import numpy as np
import pytest
from sklearn import metrics as sk

from configure_finetuning import FinetuningConfig
from finetune.multiple_choice.choice_tasks import COPA
from finetune.multiple_choice.choice_tasks import RACE
from finetune.multiple_choice.choice_tasks import SWAG
from finetune.multiple_choice.choice_tasks import truncate_context_first
from util.errors import UserError
from tests.script_checks import expect_error
from tests.tiny_runs import QUICK
from tests.tiny_runs import VOCAB_8K
from tests.tiny_runs import tiny_run

ROOT = pathlib.Path(__file__).resolve().parents[1]
RACE_DATA = ROOT / "tests" / "data" / "race"


@pytest.fixture(scope="module")
def tokenizer():
  from util.tokenization import load_tokenizer
  return load_tokenizer(str(VOCAB_8K))


def make_task(cls, tokenizer, raw, **kw):
  config = FinetuningConfig(raw_data_dir=str(raw), output_dir="", **kw)
  return cls(config, tokenizer)


# ---------------------------------------------------------------- RACE
def test_race_reads_its_layout(tokenizer):
  task = make_task(RACE, tokenizer, RACE_DATA.parent)
  train = task.get_examples("train")
  dev = task.get_examples("dev")
  assert len(train) == 14 and len(dev) == 4
  records = sorted(RACE_DATA.glob("dev/*/*.txt"))  # high/ before middle/
  first = json.loads(records[0].read_text())
  assert [e.guid for e in dev] == ["high1.txt-0", "high1.txt-1",
                                   "middle1.txt-0", "middle1.txt-1"]
  assert dev[0].context == first["article"]
  assert dev[0].question == first["questions"][0]
  assert dev[0].options == first["options"][0]
  assert [e.label for e in dev] == [0, 2, 1, 3]  # A, C, B, D
  assert [e.group for e in dev] == ["high", "high", "middle", "middle"]
  assert {e.group for e in train} == {"high", "middle"}
  assert all(len(e.options) == 4 for e in train + dev)


def test_race_also_reads_the_unpacked_release_folder(tokenizer, tmp_path):
  shutil.copytree(RACE_DATA, tmp_path / "race" / "RACE")
  task = make_task(RACE, tokenizer, tmp_path)
  assert len(task.get_examples("dev")) == 4


def test_blank_questions_take_the_option():
  task = make_task(RACE, None, "")
  assert task.option_text("Tom goes to school _ .", "by bus") == (
      "Tom goes to school by bus .")
  assert task.option_text("The library was built ____.", "long ago") == (
      "The library was built long ago.")
  assert task.option_text("Where does Tom walk his dog?", "In the park") == (
      "Where does Tom walk his dog? In the park")
  assert make_task(SWAG, None, "").option_text("A man _", "runs") == (
      "A man _ runs")  # only RACE has blanks


def test_truncate_context_first():
  assert truncate_context_first([1, 2, 3, 4], [5, 6], 5) == (
      [1, 2, 3], [5, 6])
  assert truncate_context_first([1, 2], [5, 6], 5) == ([1, 2], [5, 6])
  assert truncate_context_first([1, 2], [5, 6, 7, 8, 9, 10], 5) == (
      [], [6, 7, 8, 9, 10])
  assert truncate_context_first([1], [5, 6, 7, 8, 9], 5) == (
      [], [5, 6, 7, 8, 9])


def pieces(tokenizer, ids):
  return [tokenizer.vocab[i] for i in ids]


def test_race_features_per_option(tokenizer):
  task = make_task(RACE, tokenizer, RACE_DATA.parent, max_seq_length=40)
  examples = task.get_examples("dev")
  features = task.featurize(examples, is_training=False)
  assert features["input_ids"].shape == (4, 4, 40)
  np.testing.assert_array_equal(features["label_ids"], [0, 2, 1, 3])
  np.testing.assert_array_equal(features["example_index"], np.arange(4))
  special = tokenizer.special_ids
  example = examples[1]  # a blank question
  for choice, option in enumerate(example.options):
    ids = features["input_ids"][1, choice]
    n = int(features["input_mask"][1, choice].sum())
    segments = features["segment_ids"][1, choice]
    seps = list(np.flatnonzero(ids[:n] == special["sep"]))
    assert ids[0] == special["cls"] and seps[-1] == n - 1 and len(seps) == 2
    assert n == 40  # the article is longer than the row: it was cut
    second = task.option_text(example.question, option)
    assert "_" not in second and option in second
    want = tokenizer.tokenize_batch([second])[0]
    assert list(ids[seps[0] + 1:n - 1]) == want  # question+option whole
    article = tokenizer.tokenize_batch([example.context])[0]
    assert list(ids[1:seps[0]]) == article[:seps[0] - 1]  # its head
    assert not segments[:seps[0] + 1].any() and segments[seps[0] + 1:n].all()
    assert not segments[n:].any() and (ids[n:] == special["pad"]).all()


def write_race(root, split, name, record):
  path = root / "race" / split / "high" / name
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(record if isinstance(record, str) else json.dumps(record))
  return path


def test_bad_race_files_are_one_clear_error(tokenizer, tmp_path):
  good = {"article": "A text.", "questions": ["Q1?", "Q2 _ ."],
          "options": [["a", "b", "c", "d"], ["e", "f", "g", "h"]],
          "answers": ["A", "D"], "id": "high9.txt"}
  task = make_task(RACE, tokenizer, tmp_path)
  cases = [
      ("{not json", "is not valid JSON"),
      ("[1, 2]", "a RACE file holds one JSON object, not a list"),
      (dict(good, article=None), "'article' is null, expected a string"),
      ({k: v for k, v in good.items() if k != "options"},
       "no 'options' field"),
      (dict(good, answers=["A"]), "2 questions, 2 options, 1 answers"),
      (dict(good, answers=["A", "E"]),
       "question 2: answer \"E\" is not one of A, B, C, D"),
      (dict(good, answers=["A", 3]), "question 2: answer 3 is not one of"),
      (dict(good, options=[["a", "b", "c", "d"], "efgh"]),
       "question 2: options must be a list of at least two strings"),
      (dict(good, options=[["a", "b", "c", "d"], ["e", "f", "g"]],
            answers=["A", "C"]), "question 2: 3 options, but"),
      (dict(good, options=[["a", "b", "c", "d"], ["e", "f", "g"]]),
       "question 2: answer \"D\" is not one of A, B, C"),
      (dict(good, questions=["Q1?", 7]),
       "question 2: the question is a number, expected a string"),
  ]
  for record, message in cases:
    path = write_race(tmp_path, "dev", "1.txt", record)
    with pytest.raises(UserError) as info:
      task.get_examples("dev")
    assert str(info.value).startswith(str(path)), str(info.value)
    assert message in str(info.value), (message, str(info.value))
  with pytest.raises(UserError, match=r"race: .*train not found"):
    task.get_examples("train")
  (tmp_path / "race" / "train").mkdir()
  with pytest.raises(UserError, match="holds no files"):
    task.get_examples("train")
  with pytest.raises(UserError, match="unknown split 'eval'"):
    task.get_examples("eval")
  # Test files may come without answers.
  write_race(tmp_path, "test", "1.txt",
             {k: v for k, v in good.items() if k != "answers"})
  assert [e.label for e in task.get_examples("test")] == [None, None]


# ------------------------------------------------------- SWAG and COPA
SWAG_HEADER = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2",
               "gold-source", "ending0", "ending1", "ending2", "ending3",
               "label"]


def write_csv(path, rows):
  path.parent.mkdir(parents=True, exist_ok=True)
  with open(path, "w", newline="") as f:
    csv.writer(f).writerows(rows)


def test_swag_csv_copa_and_generic_jsonl(tokenizer, tmp_path):
  write_csv(tmp_path / "swag" / "train.csv", [SWAG_HEADER, [
      "0", "v1", "3", "Students lower their eyes. The teacher", "Students "
      "lower their eyes, nervously.", "The teacher", "gold",
      "walks in, \"smiling\".", "eats a car.", "flies away.", "sings.", "0"],
      ["1", "v2", "4", "x", "She opens the door.", "She", "gold", "closes "
       "it.", "is a door.", "runs up the wall.", "melts.", "2"]])
  write_csv(tmp_path / "swag" / "val.csv", [SWAG_HEADER[:-1], [
      "0", "v3", "5", "x", "A dog barks.", "The dog", "gold", "wags.",
      "sleeps.", "reads.", "swims."]])
  swag = make_task(SWAG, tokenizer, tmp_path)
  train = swag.get_examples("train")
  assert [(e.context, e.question, e.label) for e in train] == [
      ("Students lower their eyes, nervously.", "The teacher", 0),
      ("She opens the door.", "She", 2)]
  assert train[0].options[0] == "walks in, \"smiling\"."
  assert swag.option_text(train[0].question, train[0].options[0]) == (
      "The teacher walks in, \"smiling\".")
  with pytest.raises(UserError, match=r"val.csv line 2: no label"):
    swag.get_examples("dev")  # val.csv is the dev split
  copa = tmp_path / "copa"
  copa.mkdir()
  (copa / "train.jsonl").write_text(
      json.dumps({"premise": "My body cast a shadow over the grass.",
                  "choice1": "The sun was rising.",
                  "choice2": "The grass was cut.", "question": "cause",
                  "label": 0, "idx": 0}) + "\n\n" +
      json.dumps({"context": "He was hungry.", "question": "So he",
                  "endings": ["ate.", "slept."], "label": "1"}) + "\n")
  examples = make_task(COPA, tokenizer, tmp_path).get_examples("train")
  assert [(e.context, e.question, e.options, e.label) for e in examples] == [
      ("My body cast a shadow over the grass.", "because",
       ["The sun was rising.", "The grass was cut."], 0),
      ("He was hungry.", "So he", ["ate.", "slept."], 1)]


def test_bad_choice_records_are_one_clear_error(tokenizer, tmp_path):
  swag = make_task(SWAG, tokenizer, tmp_path)
  path = tmp_path / "swag" / "dev.jsonl"
  path.parent.mkdir()
  good = {"context": "c", "endings": ["a", "b", "c"], "label": 1}
  cases = [
      ([good, "{oops"], "line 2 is not valid JSON"),
      ([good, [1]], "line 2: expected a JSON object, got a list"),
      ([good, dict(good, label=3)], "line 2: label 3 is not an option "
       "index 0-2"),
      ([good, dict(good, label=1.5)], "line 2: label 1.5 is not"),
      ([good, dict(good, label=True)], "line 2: label true is not"),
      ([good, {"text": "x"}], "line 2: no 'sent1' (SWAG), 'premise' (COPA) "
       "or 'context' field (has: text)"),
      ([good, dict(good, endings=["a", "b"])],
       "line 2: 2 options, but"),
      ([good, dict(good, endings=["a"])], "line 2: 1 ending(s), expected "
       "at least 2"),
      ([good, {"premise": "p", "choice1": "a", "choice2": "b",
               "question": "why", "label": 0}],
       "line 2: COPA 'question' must be \"cause\" or \"effect\""),
      ([dict(good, context=5)], "line 1: 'context' is a number"),
  ]
  for records, message in cases:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r)
                              for r in records) + "\n")
    with pytest.raises(UserError) as info:
      swag.get_examples("dev")
    assert str(info.value).startswith(str(path)), str(info.value)
    assert message in str(info.value), (message, str(info.value))
  path.unlink()
  write_csv(tmp_path / "swag" / "dev.csv", [
      ["sent1", "sent2", "ending0", "ending1", "label"],
      ["a", "b", "c", "d", "1"], ["a", "b", "c", "1"]])
  with pytest.raises(UserError, match=r"dev.csv line 3: 4 fields, the "
                     "header has 5"):
    swag.get_examples("dev")
  with pytest.raises(UserError, match=r"swag: .*train.jsonl not found \(swag "
                     r"files go in the data folder's swag/: <split>.jsonl "
                     r"or .csv"):
    swag.get_examples("train")


# ------------------------------------------------------- head, scorer
def test_head_loss_and_scorer(tokenizer):
  from keras import ops
  from model.config import get_model_config
  task = make_task(RACE, tokenizer, RACE_DATA.parent, max_seq_length=32)
  examples = task.get_examples("dev")
  features = task.featurize(examples, is_training=False)
  config = get_model_config("tiny", tokenizer.vocab_size, {
      "hidden_size": 16, "intermediate_size": 32, "embedding_size": 16})
  head = task.build_head(config)
  rng = np.random.default_rng(0)
  hidden = rng.normal(size=(4, 4, 32, 16)).astype(np.float32)
  loss, outputs = task.loss_and_outputs(head, hidden, features, False)
  kernel, bias = (ops.convert_to_numpy(w) for w in head.weights)
  assert kernel.shape == (16, 1)
  logits = hidden[:, :, 0] @ kernel[:, 0] + bias[0]  # from [CLS] only
  log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  np.testing.assert_allclose(
      ops.convert_to_numpy(loss),
      -log_probs[np.arange(4), features["label_ids"]], rtol=1e-5)
  np.testing.assert_array_equal(outputs["predictions"], logits.argmax(-1))
  # Scorer: accuracy overall and per level, as scikit-learn counts it.
  predictions = np.array([0, 1, 1, 0])
  scorer = task.get_scorer(examples, features)
  scorer.update({"predictions": predictions[:3]})
  scorer.update({"predictions": predictions[3:]})
  results = scorer.get_results()
  gold = [e.label for e in examples]
  assert results["accuracy"] == pytest.approx(
      100 * sk.accuracy_score(gold, predictions))
  assert results["accuracy_high"] == pytest.approx(
      100 * sk.accuracy_score(gold[:2], predictions[:2]))
  assert results["accuracy_middle"] == pytest.approx(
      100 * sk.accuracy_score(gold[2:], predictions[2:]))
  assert (results["accuracy"], results["accuracy_high"],
          results["accuracy_middle"]) == (50.0, 50.0, 50.0)


def test_each_option_is_encoded_alone():
  """Rows [B, C, T] through FinetuningModel: other options change no
  option's score, so the odds of options 0 and 1 stay as they were."""
  from keras import ops
  from finetune.model import FinetuningModel
  from model.config import get_model_config
  config = get_model_config("tiny", 50, {
      "hidden_size": 16, "intermediate_size": 32, "embedding_size": 16,
      "num_attention_heads": 2})
  model = FinetuningModel(config, [RACE(FinetuningConfig(), None)])
  rng = np.random.default_rng(0)
  mask = np.arange(12) < rng.integers(4, 13, (3, 4, 1))
  data = {"input_ids": (rng.integers(5, 50, (3, 4, 12)) * mask).astype(
              np.int32),
          "input_mask": mask.astype(np.int32),
          "segment_ids": ((np.arange(12) >= 6) * mask).astype(np.int32),
          "label_ids": np.array([0, 3, 1], np.int32)}
  other = dict(data, input_ids=np.where(mask, 7, 0).astype(np.int32))
  other["input_ids"][:, :2] = data["input_ids"][:, :2]
  probabilities = [ops.convert_to_numpy(model(
      d, task_name="race", training=False)[1]["probabilities"])
                   for d in (data, other)]
  assert probabilities[0].shape == (3, 4)
  odds = [np.log(p[:, 0] / p[:, 1]) for p in probabilities]
  np.testing.assert_allclose(odds[0], odds[1], rtol=1e-4, atol=1e-5)
  assert not np.allclose(probabilities[0], probabilities[1])


# --------------------------------------------------------- fine-tuning
@pytest.fixture(scope="module")
def race_run(tmp_path_factory):
  data_dir = tiny_run(tmp_path_factory.mktemp("race"))
  shutil.copytree(RACE_DATA, pathlib.Path(data_dir, "finetuning_data",
                                          "race"))
  return data_dir


def test_race_fine_tunes_end_to_end(race_run, capsys):
  import run_finetuning
  summary = run_finetuning.main([
      "--data-dir", race_run, "--model-name", "tiny", "--task-names", "race",
      "--hparams", json.dumps(dict(QUICK, num_train_epochs=2.0,
                                   train_batch_size=4, max_seq_length=64))])
  out = capsys.readouterr().out
  assert "race: 14 train examples, 14 rows, 7 steps" in out
  assert "fine-tuning race for 7 steps" in out
  results = {k: v["median"] for k, v in summary["race"].items()}
  assert {"accuracy", "accuracy_high", "accuracy_middle", "loss"} <= set(
      results)
  assert np.isfinite(results["loss"])
  path = pathlib.Path(race_run, "models", "tiny", "finetuning",
                      "race_dev_predictions_trial1.tsv")
  lines = path.read_text().splitlines()
  assert lines[0] == "index\tprediction"
  rows = [line.split("\t") for line in lines[1:]]
  assert [r[0] for r in rows] == ["high1.txt-0", "high1.txt-1",
                                  "middle1.txt-0", "middle1.txt-1"]
  assert all(r[1] in "ABCD" for r in rows)
  assert results["accuracy"] == pytest.approx(100 * sk.accuracy_score(
      ["A", "C", "B", "D"], [r[1] for r in rows]))


def test_race_bad_input_through_the_script(race_run, capsys, tmp_path):
  raw = tmp_path / "raw"
  shutil.copytree(RACE_DATA, raw / "race")
  bad = raw / "race" / "dev" / "middle" / "1.txt"
  record = json.loads(bad.read_text())
  record["answers"][1] = "F"
  bad.write_text(json.dumps(record))
  expect_error(capsys, [
      "--data-dir", race_run, "--model-name", "tiny", "--task-names", "race",
      "--raw-data-dir", str(raw), "--output-dir", str(tmp_path / "out")],
      f"error: {bad} question 2: answer \"F\" is not one of A, B, C, D")
