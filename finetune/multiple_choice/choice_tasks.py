"""Multiple choice: a score per option from a linear layer on its [CLS],
a softmax across the options, cross-entropy; scored by accuracy.

An example with C options becomes C sequences `[CLS] context [SEP]
question+option [SEP]` (segments 0 and 1), fed as one row [C, T] (the
model encodes the B x C sequences of a batch together; train_batch_size
counts examples). The context is truncated first (from its end); a
question+option longer than the whole budget keeps its last tokens.

RACE (`race`): RAW_DATA_DIR/race/{train,dev,test}/ as the RACE release
unpacks (its RACE/ folder works too, in race/ or in race/'s place): high/
and middle/ folders of files, each one JSON object
  {"article": str, "questions": [str], "options": [[str x 4]],
   "answers": ["A", ...], "id": "high1.txt"}
one example per question. A question with a blank ("_") gets the option
in the blank, otherwise the option follows the question. Reported: the
accuracy, and of RACE-M and RACE-H (`accuracy_middle`, `accuracy_high`)
when both are there.

SWAG / COPA style (`swag`, `copa`; COPA/ works too): RAW_DATA_DIR/<task>/
<split>.csv (with a header) or .jsonl (an object per line); dev may be
named val. Each record is one example, in any of these layouts:
  SWAG    sent1, sent2, ending0 ... endingN-1, label
  COPA    premise, choice1, choice2, question ("cause"/"effect"), label
  generic context, endings (a list; or ending0 ...), question (optional),
          label
label: the right option's index (0-based); test files may lack it.
"""

import csv
import dataclasses
import io
import json
import os
import re
from typing import Optional

import numpy as np
from keras import ops

from finetune import data_layout
from finetune import featurization
from finetune import metrics
from finetune.heads import LinearHead
from finetune.task import Example
from finetune.task import Scorer
from finetune.task import Task
from util import storage
from util import text_files
from util.errors import UserError

SPLITS = ("train", "dev", "test")
LETTERS = "ABCDEFGHIJ"


@dataclasses.dataclass
class ChoiceExample(Example):
  context: str = ""  # the first segment (RACE: the article)
  question: str = ""  # before each option ("" when none)
  options: list = dataclasses.field(default_factory=list)
  label: Optional[int] = None  # the right option; None when unknown (test)
  group: str = ""  # RACE: "middle" or "high"


class MultipleChoiceTask(Task):
  """Features, head, loss and scorer of every multiple-choice task;
  subclasses read their files (`get_examples`)."""

  metric = "accuracy"
  predictions_ext = ".tsv"
  letters = False  # predictions written as A, B, ... (RACE) or 0, 1, ...

  def option_text(self, question, option):
    """The second segment of one option."""
    return f"{question} {option}".strip()

  @staticmethod
  def check_examples(examples, places):
    """Every example has as many options as the first (rows are [C, T]);
    places[i] names where example i is, for the message."""
    for example, place in zip(examples, places):
      if len(example.options) != len(examples[0].options):
        raise UserError(f"{place}: {len(example.options)} options, but "
                        f"{places[0]} has {len(examples[0].options)} (every "
                        "question of a split needs the same number)")

  # ------------------------------------------------------------ features
  def featurize(self, examples, is_training):
    del is_training  # the same rows either way
    seq_len = self.config.max_seq_length
    budget = seq_len - 3
    if budget < 2:
      raise UserError(f"{self.name}: max_seq_length {seq_len} is too short "
                      "for [CLS] context [SEP] question+option [SEP]")
    contexts = sorted({e.context for e in examples})
    seconds = [self.option_text(e.question, o) for e in examples
               for o in e.options]
    tokens = self.tokenizer.tokenize_batch(contexts + seconds)
    context_tokens = dict(zip(contexts, tokens[:len(contexts)]))
    second_tokens = iter(tokens[len(contexts):])
    choices = len(examples[0].options) if examples else 0
    shape = (len(examples), choices, seq_len)
    features = {k: np.zeros(shape, np.int32)
                for k in ("input_ids", "input_mask", "segment_ids")}
    for row, example in enumerate(examples):
      for choice in range(choices):
        a, b = truncate_context_first(context_tokens[example.context],
                                      next(second_tokens), budget)
        packed = featurization.pack(self.tokenizer, a, b, seq_len)
        for key, values in zip(("input_ids", "input_mask", "segment_ids"),
                               packed):
          features[key][row, choice] = values
    features["example_index"] = np.arange(len(examples), dtype=np.int32)
    features["label_ids"] = np.array(
        [e.label if e.label is not None else 0 for e in examples], np.int32)
    return features

  # ---------------------------------------------------------- head, loss
  head_kind = "multiple_choice"
  first_token_only = True  # each option's [CLS] state

  def build_head(self, model_config):
    return LinearHead(model_config, 1, name=f"{self.name}_head")

  def loss_and_outputs(self, head, hidden, features, training):
    """hidden [B, C, T, H]: a score per option from its [CLS] state."""
    logits = ops.cast(head(hidden[:, :, 0], training=training),
                      "float32")[..., 0]  # [B, C]
    log_probs = ops.log_softmax(logits, axis=-1)
    labels = ops.cast(features["label_ids"], "int32")
    loss = -ops.take_along_axis(log_probs, labels[:, None], axis=-1)[:, 0]
    return loss, {"predictions": ops.argmax(logits, axis=-1),
                  "probabilities": ops.exp(log_probs)}

  def get_scorer(self, examples, features):
    return ChoiceScorer(self, examples)


def truncate_context_first(context, second, budget):
  """Token lists that fit `budget` together: the context is cut first (from
  its end); a second segment over the whole budget keeps its last tokens."""
  second = list(second)[max(len(second) - budget, 0):]
  return list(context)[:budget - len(second)], second


class ChoiceScorer(Scorer):
  """Accuracy over the examples; per RACE level when there are two."""

  def __init__(self, task, examples):
    super().__init__()
    self.task, self.examples = task, list(examples)

  def _predictions(self):
    predictions = self.collected()["predictions"]
    if len(predictions) != len(self.examples):
      raise ValueError(f"{len(predictions)} predictions for "
                       f"{len(self.examples)} examples")
    return predictions

  def get_results(self):
    predictions = self._predictions()
    gold = np.array([e.label for e in self.examples])
    results = {"accuracy": metrics.accuracy(gold, predictions)}
    groups = sorted({e.group for e in self.examples})
    if len(groups) > 1 and "" not in groups:
      for group in groups:
        rows = [i for i, e in enumerate(self.examples) if e.group == group]
        results[f"accuracy_{group}"] = metrics.accuracy(gold[rows],
                                                        predictions[rows])
    return results

  def write_predictions(self, path):
    """`index<TAB>prediction` (the example's id; RACE: a letter)."""
    values = [LETTERS[int(p)] if self.task.letters else int(p)
              for p in self._predictions()]
    metrics.write_glue_tsv(path, [e.guid for e in self.examples], values)


# -------------------------------------------------------------------- RACE
class RACE(MultipleChoiceTask):
  """RACE reading comprehension (Lai et al., 2017): 4 options a question."""

  name = "race"
  letters = True

  def option_text(self, question, option):
    if "_" in question:  # a cloze question: the option fills the blank
      return re.sub(r"_+", lambda _: option, question).strip()
    return super().option_text(question, option)

  def split_dir(self, split):
    """race/<split>/ (or RACE/ as the release unpacks; data_layout.py)."""
    return data_layout.require(self.config.raw_data_dir, self.name, split)

  def get_examples(self, split):
    if split not in SPLITS:
      raise UserError(f"race: unknown split '{split}' (choose from "
                      f"{', '.join(SPLITS)})")
    top = self.split_dir(split)
    files = _files_under(top)
    if not files:
      raise UserError(f"race: {top} holds no files")
    examples, places = [], []
    for path in files:
      relative = os.path.relpath(path, top)
      group = relative.split(os.sep)[0] if os.sep in relative else ""
      for number, example in enumerate(
          read_race_file(path, f"{split}-{relative}", group,
                         need_answers=split != "test"), 1):
        examples.append(example)
        places.append(f"{path} question {number}")
    self.check_examples(examples, places)
    return examples

  def read_file(self, path):
    """One RACE file, or a folder of them (as a split's)."""
    if storage.isdir(path):
      files = _files_under(path)
      if not files:
        raise UserError(f"race: {path} holds no files")
    else:
      files = [path]
    examples, places = [], []
    for file in files:
      relative = os.path.relpath(file, path) if file != path else (
          os.path.basename(file))
      group = relative.split(os.sep)[0] if os.sep in relative else ""
      for number, example in enumerate(read_race_file(
          file, f"predict-{relative}", group, need_answers=False), 1):
        examples.append(example)
        places.append(f"{file} question {number}")
    self.check_examples(examples, places)
    return examples, all(e.label is not None for e in examples)


def _files_under(top, seen=None):
  """Every file below `top`, sorted, hidden ones left out; each folder
  entered once (a symlink loop ends)."""
  seen = set() if seen is None else seen
  real = top if "://" in top else os.path.realpath(top)
  if real in seen:
    return []
  seen.add(real)
  found = []
  for name in sorted(storage.listdir(top)):
    name = name.rstrip("/")
    if name.startswith("."):
      continue
    path = os.path.join(top, name)
    found += _files_under(path, seen) if storage.isdir(path) else [path]
  return found


def read_race_file(path, default_id, group, need_answers=True):
  """The examples of one RACE file (one article, several questions)."""
  record = text_files.read_json(path)
  if not isinstance(record, dict):
    raise UserError(f"{path}: a RACE file holds one JSON object, not "
                    f"{_kind(record)}")
  fields = {"article": str, "questions": list, "options": list}
  if need_answers or "answers" in record:
    fields["answers"] = list
  for key, kind in fields.items():
    if key not in record:
      raise UserError(f"{path}: no '{key}' field (a RACE file has article, "
                      "questions, options, answers)")
    if not isinstance(record[key], kind):
      raise UserError(f"{path}: '{key}' is {_kind(record[key])}, expected "
                      f"{'a string' if kind is str else 'a list'}")
  questions, options = record["questions"], record["options"]
  answers = record.get("answers")
  counts = [("questions", len(questions)), ("options", len(options))] + (
      [("answers", len(answers))] if answers is not None else [])
  if len({n for _, n in counts}) > 1:
    raise UserError(f"{path}: " + ", ".join(f"{n} {k}" for k, n in counts) +
                    " (one entry per question in each)")
  record_id = record.get("id")
  record_id = record_id if isinstance(record_id, str) and record_id else (
      default_id)
  examples = []
  for i, question in enumerate(questions):
    where = f"{path} question {i + 1}"
    choices = options[i]
    if not isinstance(question, str):
      raise UserError(f"{where}: the question is {_kind(question)}, "
                      "expected a string")
    if (not isinstance(choices, list) or len(choices) < 2 or
        not all(isinstance(c, str) for c in choices)):
      raise UserError(f"{where}: options must be a list of at least two "
                      f"strings, got {json.dumps(choices)[:60]}")
    if len(choices) > len(LETTERS):
      raise UserError(f"{where}: {len(choices)} options (at most "
                      f"{len(LETTERS)})")
    label = None
    if answers is not None:
      valid = LETTERS[:len(choices)]
      answer = answers[i]
      if not isinstance(answer, str) or answer.strip() not in valid:
        raise UserError(f"{where}: answer {json.dumps(answer)[:20]} is not "
                        f"one of {', '.join(valid)}")
      label = valid.index(answer.strip())
    examples.append(ChoiceExample(
        guid=f"{record_id}-{i}", context=record["article"],
        question=question, options=choices, label=label, group=group))
  return examples


def _kind(value):
  return {dict: "an object", list: "a list", str: "a string",
          type(None): "null", bool: "a boolean", int: "a number",
          float: "a number"}.get(
              type(value), f"a {type(value).__name__}")


# ------------------------------------------------------ SWAG / COPA style
class ChoiceRecords(MultipleChoiceTask):
  """Context + N endings + label per record, CSV or JSON Lines."""

  def path(self, split):
    """<task>/<split>.jsonl or .csv, dev also as val (data_layout.py)."""
    return data_layout.require(self.config.raw_data_dir, self.name, split)

  def get_examples(self, split):
    if split not in SPLITS:
      raise UserError(f"{self.name}: unknown split '{split}' (choose from "
                      f"{', '.join(SPLITS)})")
    path = self.path(split)
    examples, places = [], []
    for number, record in read_records(path):
      places.append(f"{path} line {number}")
      examples.append(record_example(record, places[-1],
                                     f"{split}-{len(examples)}",
                                     need_label=split != "test"))
    if not examples:
      raise UserError(f"{path} has no examples")
    self.check_examples(examples, places)
    return examples

  def read_file(self, path):
    """Any file of the task's records (.csv or .jsonl); labels optional."""
    examples, places = [], []
    for number, record in read_records(path):
      places.append(f"{path} line {number}")
      examples.append(record_example(record, places[-1],
                                     f"predict-{len(examples)}",
                                     need_label=False))
    if not examples:
      raise UserError(f"{path} has no examples")
    self.check_examples(examples, places)
    return examples, all(e.label is not None for e in examples)


def read_records(path):
  """(line number, dict) per record of a .csv (header line) or .jsonl."""
  text = text_files.read_text(path)
  if path.endswith(".csv"):
    reader = csv.reader(io.StringIO(text))
    header = None
    while True:
      number = reader.line_num + 1  # the record's first line
      try:
        row = next(reader)
      except StopIteration:
        break
      except csv.Error as e:
        raise UserError(f"{path} line {reader.line_num}: not CSV ({e})") \
            from None
      if not any(cell.strip() for cell in row):
        continue
      if header is None:
        header = [h.strip() for h in row]
        continue
      if len(row) != len(header):
        raise UserError(f"{path} line {number}: {len(row)} fields, the "
                        f"header has {len(header)}")
      yield number, dict(zip(header, row))
    return
  for number, line in enumerate(text_files.split_lines(text), 1):
    if not line.strip():
      continue
    record = text_files.parse_json(line, f"{path} line {number}")
    if not isinstance(record, dict):
      raise UserError(f"{path} line {number}: expected a JSON object, got "
                      f"{_kind(record)}")
    yield number, record


def record_example(record, where, guid, need_label=True):
  """A ChoiceExample from a SWAG, COPA or generic record."""
  def text(key):
    value = record.get(key)
    if not isinstance(value, str):
      raise UserError(f"{where}: '{key}' is "
                      f"{'missing' if value is None else _kind(value)}, "
                      "expected a string")
    return value

  numbered = sorted((int(k[len("ending"):]), k) for k in record
                    if re.fullmatch(r"ending\d+", k))
  if "premise" in record:  # COPA
    if record.get("question") not in ("cause", "effect"):
      raise UserError(f"{where}: COPA 'question' must be \"cause\" or "
                      f"\"effect\", got {json.dumps(record.get('question'))}")
    context = text("premise")
    question = "because" if record["question"] == "cause" else "so"
    options = [text("choice1"), text("choice2")]
  elif "sent1" in record:  # SWAG
    context, question = text("sent1"), text("sent2")
    options = [text(k) for _, k in numbered]
  elif "context" in record:
    context = text("context")
    question = text("question") if "question" in record else ""
    if "endings" in record:
      options = record["endings"]
      if not isinstance(options, list) or not all(
          isinstance(o, str) for o in options):
        raise UserError(f"{where}: 'endings' must be a list of strings")
    else:
      options = [text(k) for _, k in numbered]
  else:
    raise UserError(f"{where}: no 'sent1' (SWAG), 'premise' (COPA) or "
                    f"'context' field (has: {', '.join(list(record)[:8])})")
  if [n for n, _ in numbered] != list(range(len(numbered))):
    raise UserError(f"{where}: endings numbered "
                    f"{', '.join(k for _, k in numbered)} (expected "
                    "ending0, ending1, ...)")
  if len(options) < 2:
    raise UserError(f"{where}: {len(options)} ending(s), expected at least 2")
  label = record.get("label")
  if label is None or label == "":
    if need_label:
      raise UserError(f"{where}: no label (train and dev need one)")
    label = None
  else:
    try:
      if isinstance(label, bool) or (isinstance(label, float) and
                                     not label.is_integer()):
        raise ValueError(label)
      label = int(label)
    except (TypeError, ValueError):
      label = None
    if label is None or not 0 <= label < len(options):
      raise UserError(f"{where}: label {json.dumps(record['label'])[:20]} "
                      f"is not an option index 0-{len(options) - 1}")
  return ChoiceExample(guid=guid, context=context, question=question,
                       options=options, label=label)


class SWAG(ChoiceRecords):
  name = "swag"


class COPA(ChoiceRecords):
  name = "copa"
