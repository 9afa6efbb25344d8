"""GLUE readers on each task's official file layout, and the features."""

import os

import numpy as np
import pytest

from configure_finetuning import FinetuningConfig
from finetune.classification import classification_tasks as glue
from finetune.featurization import truncate_pair
from model.config import TransformerConfig
from tests.shared_data import BERT_VOCAB
from tests.shared_data import SHARED
from util.errors import UserError
from util.tokenization import load_tokenizer

VOCAB = BERT_VOCAB

# Header and one row per task, as the GLUE distribution writes them.
LAYOUTS = {
    "qqp": ("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
            "7\t1\t2\tHow are you?\tHow do you do?\t1",
            "id\tquestion1\tquestion2", "0\tWho?\tWhy?"),
    "mnli": ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\t"
             "sentence2_binary_parse\tsentence1_parse\tsentence2_parse\t"
             "sentence1\tsentence2\tlabel1\tgold_label",
             "0\t1\t2\tgov\t(a)\t(b)\t(a)\t(b)\tA man eats.\tHe eats.\t"
             "entailment\tentailment",
             "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\t"
             "sentence2_binary_parse\tsentence1_parse\tsentence2_parse\t"
             "sentence1\tsentence2",
             "0\t1\t2\tgov\t(a)\t(b)\t(a)\t(b)\tA man eats.\tHe eats."),
    "qnli": ("index\tquestion\tsentence\tlabel",
             "0\tWhat is it?\tIt is a test.\tentailment",
             "index\tquestion\tsentence", "0\tWhat?\tThat."),
}


@pytest.fixture(scope="module")
def tokenizer():
  return load_tokenizer(VOCAB)


def make_task(cls, raw, tokenizer, **kw):
  config = FinetuningConfig(raw_data_dir=str(raw), output_dir=str(raw),
                            max_seq_length=16, **kw)
  return cls(config, tokenizer)


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_tasks_without_shared_train_files_read_their_layout(
    tmp_path, tokenizer, name):
  header, row, test_header, test_row = LAYOUTS[name]
  cls = next(t for t in glue.GLUE_TASKS if t.name == name)
  folder = tmp_path / name
  folder.mkdir()
  for split in ("train",) + cls.dev_splits:
    (folder / f"{split}.tsv").write_text(f"{header}\n{row}\n")
  for split in cls.test_splits:
    (folder / f"{split}.tsv").write_text(f"{test_header}\n{test_row}\n")
  task = make_task(cls, tmp_path, tokenizer)
  train = task.get_examples("train")
  assert len(train) == 1 and train[0].text_b and train[0].label in cls.labels
  assert len(task.get_examples("dev")) == len(cls.dev_splits)
  test = task.get_examples("test")
  assert [e.label for e in test] == [None] * len(cls.test_splits)
  features = task.featurize(train, is_training=True)
  assert features["input_ids"].shape == (1, 16)
  assert features["label_ids"][0] == cls.labels.index(train[0].label)


def test_mnli_reports_matched_and_mismatched(tmp_path, tokenizer):
  task = make_task(glue.MNLI, tmp_path, tokenizer)
  examples = [glue.SentenceExample(guid=f"{split}-{i}", text_a="a",
                                   text_b="b", label=label)
              for split, labels in (("dev_matched", ["entailment"] * 4),
                                    ("dev_mismatched", ["neutral"] * 2))
              for i, label in enumerate(labels)]
  scorer = task.get_scorer(examples, None)
  scorer.update({"predictions": np.array([1, 1, 1, 0, 2, 0])})
  results = scorer.get_results()
  assert results == {"accuracy": 75.0, "accuracy_mm": 50.0}


def test_shared_files_and_unordered_doubling(tokenizer):
  raw = os.path.join(SHARED, "glue")  # GLUE's own folder names work
  mrpc = make_task(glue.MRPC, raw, tokenizer, train_examples_limit=0)
  train = mrpc.get_examples("train")[:5]
  doubled = mrpc.featurize(train, is_training=True)
  once = mrpc.featurize(train, is_training=False)
  assert len(doubled["input_ids"]) == 10 and len(once["input_ids"]) == 5
  np.testing.assert_array_equal(doubled["label_ids"][:5],
                                doubled["label_ids"][5:])
  sts = make_task(glue.STS, raw, tokenizer)
  scores = [e.label for e in sts.get_examples("dev")]
  assert all(0.0 <= s <= 5.0 for s in scores)
  cola = make_task(glue.CoLA, raw, tokenizer)
  assert {e.label for e in cola.get_examples("train")} == {"0", "1"}
  assert cola.get_examples("test")[0].test_id == "0"


def test_pairs_truncate_the_longer_side_first():
  a, b = truncate_pair(range(10), range(4), 8)
  assert (len(a), len(b)) == (4, 4)
  a, b = truncate_pair(range(3), range(9), 8)
  assert (len(a), len(b)) == (3, 5)


def test_bad_labels_and_missing_columns_are_clear(tmp_path, tokenizer):
  (tmp_path / "rte").mkdir()
  (tmp_path / "rte" / "train.tsv").write_text(
      "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tmaybe\n")
  task = make_task(glue.RTE, tmp_path, tokenizer)
  # Line 2: the header is line 1.
  with pytest.raises(UserError, match="train.tsv line 2: unknown label "
                                      "'maybe'"):
    task.get_examples("train")
  (tmp_path / "rte" / "train.tsv").write_text("index\ttext\tlabel\n")
  with pytest.raises(UserError, match="no 'sentence1' column"):
    task.get_examples("train")


def test_sts_trains_on_score_over_5_and_reports_the_0_to_5_scale(tokenizer):
  """The original release's RegressionTask trains on (score - 0) / 5;
  predictions come back on the score's scale (and --no-normalize-...
  keeps the raw score)."""
  raw = os.path.join(SHARED, "glue")
  sts = make_task(glue.STS, raw, tokenizer)
  dev = sts.get_examples("dev")[:50]
  scores = np.array([e.label for e in dev], np.float32)
  features = sts.featurize(dev, is_training=False)
  np.testing.assert_allclose(features["labels"], scores / 5, rtol=1e-6)
  head = sts.build_head(_tiny_model_config())
  head.build(None)
  bias = 0.6  # what the head says for zero states
  head.dense.bias.assign([bias])
  hidden = np.zeros((2, 16, 8), np.float32)
  batch = {"labels": features["labels"][:2]}
  loss, out = sts.loss_and_outputs(head, hidden, batch, training=False)
  np.testing.assert_allclose(np.asarray(out["predictions"]), [5 * bias] * 2,
                             atol=1e-6)
  np.testing.assert_allclose(np.asarray(loss),
                             (bias - features["labels"][:2]) ** 2, rtol=1e-5)
  raw_scale = make_task(glue.STS, raw, tokenizer,
                        normalize_regression_labels=False)
  np.testing.assert_allclose(
      raw_scale.featurize(dev, is_training=False)["labels"], scores)


def _tiny_model_config():
  return TransformerConfig(vocab_size=16, hidden_size=8, num_hidden_layers=1,
                     num_attention_heads=2, intermediate_size=16)
