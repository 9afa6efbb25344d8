"""Issue 37 item 4: task inputs as the original release builds them, from
fixtures its own code wrote (tests/reference/, see README.md there):
chunking's segment ids, SQuAD's answer mask, per-task max_seq_length."""

import copy
import json
import pathlib
import shutil
import sys

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from configure_finetuning import FinetuningConfig  # noqa: E402
from finetune.qa.qa_tasks import SQuADv1  # noqa: E402
from finetune.tagging.tagging_tasks import Chunking  # noqa: E402
from tests.shared_data import BERT_VOCAB  # noqa: E402
from tests.shared_data import SHARED  # noqa: E402

REFERENCE = REPO / "tests" / "reference"


def _reference(name):
  with open(REFERENCE / name, encoding="utf-8") as f:
    return json.load(f)


@pytest.fixture(scope="module")
def tokenizer():
  from util.tokenization import load_tokenizer
  return load_tokenizer(BERT_VOCAB)


def test_default_max_seq_length_per_task():
  """512 for one task with "squad"/"qa" in its name, 256 for chunking,
  else 128 (and for any multi-task run), read from the original's config."""
  ref = _reference("task_defaults.json")
  for name, values in ref["single_task"].items():
    config = FinetuningConfig(task_names=name)
    config.resolve()
    assert config.max_seq_length == values["max_seq_length"], name
    assert config.max_seq_length_is_default
  multi = FinetuningConfig(task_names="chunk,squad")
  multi.resolve()
  assert multi.max_seq_length == ref["multi_task_chunk_squad"][
      "max_seq_length"]
  # Epochs of the tasks we have, as the original's per-task defaults.
  for name in ("rte", "sts", "squad", "squadv1", "chunk", "cola", "mrpc"):
    assert FinetuningConfig(task_names=name).epochs_for(name) == (
        ref["single_task"][name]["num_train_epochs"]), name
  # A given length wins; a default one is cut to a model with fewer
  # positions (the original's all have 512), a given one is not.
  given = FinetuningConfig(task_names="squad", max_seq_length=384)
  given.resolve()
  given.fit_max_seq_length(128)
  assert given.max_seq_length == 384
  default = FinetuningConfig(task_names="squad")
  default.resolve()
  default.fit_max_seq_length(128)
  assert default.max_seq_length == 128


def test_chunking_features_match_original(tokenizer, tmp_path):
  ref = _reference("chunk_features.json")
  raw = tmp_path / "raw"
  (raw / "chunk").mkdir(parents=True)
  data = pathlib.Path(SHARED) / "chunk"
  shutil.copy(data / "train.txt", raw / "chunk" / "train.txt")
  shutil.copy(data / "test.txt", raw / "chunk" / "dev.txt")
  config = FinetuningConfig(task_names="chunk", raw_data_dir=str(raw),
                            output_dir=str(tmp_path / "out"))
  task = Chunking(config, tokenizer)
  examples = task.get_examples("dev")[:len(ref["examples"])]
  features = task.featurize(examples, is_training=False)
  assert features["input_ids"].shape[1] == ref["max_seq_length"] == 256
  inverse = {i: tag for tag, i in ref["label_mapping"].items()}
  for row, (example, want) in enumerate(zip(examples, ref["examples"])):
    assert list(example.words) == want["words"]
    n = want["input_mask_length"]
    assert int(features["input_mask"][row].sum()) == n
    assert features["input_ids"][row, :n].tolist() == want["input_ids"]
    # The original: segment 1 at every real token ([CLS], [SEP] too).
    assert features["segment_ids"][row].tolist() == (
        want["segment_ids"] + [0] * (256 - n))
    assert want["segment_ids"] == [1] * n
    tagged = np.flatnonzero(features["label_weights"][row])
    assert tagged.tolist() == want["labeled_positions"]
    assert [task.label_list[i] for i in features["label_ids"][row][tagged]
            ] == [inverse[i] for i in want["labels"]]


def _squad_questions(indices):
  """SQuAD 1.1 dev questions by their index in file order, each as a
  one-paragraph article with only that question."""
  with open(pathlib.Path(SHARED) / "squad" / "dev-v1.1.json",
            encoding="utf-8") as f:
    articles = json.load(f)["data"]
  flat = [(a, p, qa) for a in articles for p in a["paragraphs"]
          for qa in p["qas"]]
  out = []
  for i in indices:
    article, paragraph, qa = flat[i]
    article = dict(copy.deepcopy(article), paragraphs=[
        dict(context=paragraph["context"], qas=[qa])])
    out.append(article)
  return out


@pytest.mark.parametrize("max_seq_length", [512, 128])
def test_squad_answer_mask_matches_original(tokenizer, tmp_path,
                                            max_seq_length):
  """Rows and the positions an answer may take: [CLS] plus segment 1, the
  final [SEP] included (input_mask * segment_ids + one_hot(0))."""
  ref = _reference("squad_answer_mask.json")
  want = [f for f in ref["features"] if f["max_seq_length"] == max_seq_length]
  (tmp_path / "squadv1").mkdir()
  (tmp_path / "squadv1" / "dev.json").write_text(json.dumps(
      {"version": "1.1", "data": _squad_questions((0, 100, 1000, 5000))}))
  values = dict(task_names="squadv1", raw_data_dir=str(tmp_path),
                max_query_length=64, doc_stride=128)
  if max_seq_length != 512:
    values["max_seq_length"] = max_seq_length
  task = SQuADv1(FinetuningConfig(**values), tokenizer)
  assert task.config.max_seq_length == max_seq_length  # 512: the default
  examples = task.get_examples("dev")
  assert [e.question for e in examples] == list(dict.fromkeys(
      f["question"] for f in want))
  f = task.featurize(examples, is_training=False)
  assert len(f["input_ids"]) == len(want)
  for row, w in enumerate(want):
    n = w["input_mask_length"]
    assert int(f["input_mask"][row].sum()) == n
    assert f["input_ids"][row, :n].tolist() == w["input_ids"]
    assert f["segment_ids"][row, :n].tolist() == w["segment_ids"]
    allowed = np.flatnonzero(f["answer_mask"][row]).tolist()
    assert allowed == w["allowed_answer_positions"]
    assert n - 1 in allowed  # the final [SEP]
