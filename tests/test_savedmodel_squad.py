"""A fine-tuned SQuAD model as a SavedModel: serve_text(question, context)
gives the answers `run_finetuning.py --do-predict` writes for the same
file (windows, max-context tokens, beam, null score all done in the
graph), in a process where none of our code can be imported.

Random O(1) weights (tests/finetuned_models.py's random_finetuned),
so that spans differ; 24-token windows with a stride of 5 so that each
context has many overlapping windows; real SQuAD dev paragraphs plus one
written to hit the odd cases (accents, a character the vocabulary lacks,
tabs and U+202F between words)."""

import json
import os
import sys

import numpy as np
import pytest

import export_model
import run_finetuning
from loading import export
from interop.config import load_config
from tests.finetuned_models import random_finetuned
from tests.script_checks import WITHOUT_OUR_CODE
from tests.script_checks import _python
from tests.script_checks import _wait
from tests.shared_data import SHARED
from training.progress import Progress
from util.errors import UserError

SETTINGS = dict(max_query_length=8, doc_stride=5, max_answer_length=6,
                mixed_precision="float32")
ODD = ("Caf\u00e9  M\u00fcller\topened in 1975 \u2014 na\u00efve "
       "\U0001F600 fans\u202fcame; \u00c9cole-Normale \u00e0 Paris.")

LOAD = WITHOUT_OUR_CODE + """
out = {}
for name, questions, contexts in json.loads(sys.stdin.readline()):
  result = tf.saved_model.load(name).signatures["serve_text"](
      question=tf.constant(questions), context=tf.constant(contexts))
  out[name] = {k: [x.decode() if isinstance(x, bytes) else float(x)
                   for x in v.numpy().tolist()] for k, v in result.items()}
print("RESULT " + json.dumps(out))
"""


def squad_file(path, v2):
  """Two dev paragraphs (~20 questions) and ODD, in the SQuAD layout."""
  source = os.path.join(SHARED, "squad", "dev-v2.0.rebuilt.json" if v2
                        else "dev-v1.1.json")
  with open(source, encoding="utf-8") as f:
    data = json.load(f)
  paragraphs = data["data"][0]["paragraphs"][:2]
  paragraphs.append({"context": ODD, "qas": [
      {"id": "odd1", "question": "Who opened the caf\u00e9?",
       "answers": [{"text": "M\u00fcller", "answer_start": 6}],
       "is_impossible": False},
      {"id": "odd2", "question": "\u00c9cole where?", "answers": [],
       "is_impossible": True}]})
  for p in paragraphs:
    for qa in p["qas"]:
      if not v2:
        qa.pop("is_impossible", None)
  with open(path, "w", encoding="utf-8") as f:
    json.dump({"version": "test", "data": [{"title": "t",
                                            "paragraphs": paragraphs}]}, f)
  return [(qa["id"], qa["question"], p["context"])
          for p in paragraphs for qa in p["qas"]]


CASES = {  # name: (task, FinetuningConfig values)
    "v1": ("squadv1", {}),
    "v2": ("squad", {}),  # with the answerability classifier
    "v2_cls": ("squad", {"answerable_classifier": False}),
    "v2_linear": ("squad", {"answerable_classifier": False,
                            "qa_head": "linear"}),
}


def test_savedmodel_answers_as_fine_tuning_predicts(tmp_path):
  site = [p for p in sys.path if p.endswith("site-packages")]
  process = _python(LOAD, json.dumps(site), cwd=tmp_path, isolated=True)
  try:
    requests, ours = [], {}
    for name, (task, values) in CASES.items():
      path = random_finetuned(tmp_path / "models" / name, task,
                              **SETTINGS, **values)
      rows = squad_file(tmp_path / f"{name}.json", task == "squad")
      run_finetuning.main([
          "--init-checkpoint", path, "--task-names", task, "--do-predict",
          "--predict-file", str(tmp_path / f"{name}.json"),
          "--predict-output", str(tmp_path / f"{name}_pred.json"),
          # The SavedModel is our TensorFlow graph in float32: compared
          # with the TensorFlow path (its 1,000+ windows would otherwise go
          # to the bf16 engine, which test_inference_engine.py pins).
          "--inference-engine", "tensorflow"])
      ours[name] = rows, *(json.loads((tmp_path / f"{name}_pred{x}.json")
                                      .read_text()) for x in (
                                          "", "_nbest", "_null_odds"
                                          if task == "squad" else "_nbest"))
      export_model.main(["--init-checkpoint", path, "--format",
                         "savedmodel", "--output-dir", str(tmp_path / name)])
      requests.append([f"{name}/{task}", [r[1] for r in rows],
                       [r[2] for r in rows]])
    output = _wait(process, json.dumps(requests) + "\n")
  finally:
    if process.poll() is None:
      process.kill()
  got = json.loads(output.split("RESULT ", 1)[1])
  for name, (task, _) in CASES.items():
    rows, answers, nbest, null = ours[name]
    theirs = got[f"{name}/{task}"]
    ids = [r[0] for r in rows]
    assert theirs["answer"] == [answers[q] for q in ids], name
    assert theirs["best_span"] == [nbest[q][0]["text"] for q in ids], name
    np.testing.assert_allclose(theirs["span_score"],
                               [nbest[q][0]["score"] for q in ids],
                               rtol=1e-5, atol=1e-4)
    for q, start, (_, _, context) in zip(ids, theirs["answer_start"], rows):
      text = nbest[q][0]["text"]
      assert context[int(start):int(start) + len(text)] == text
    if task == "squad":
      np.testing.assert_allclose(theirs["null_score"], [null[q] for q in ids],
                                 rtol=1e-5, atol=1e-4)
  # The test means something: several spans, and both 2.0 outcomes.
  assert len(set(got["v1/squadv1"]["answer"])) > 2
  answers_v2 = got["v2/squad"]["answer"] + got["v2_cls/squad"]["answer"]
  assert "" in answers_v2 and set(answers_v2) - {""}


def test_savedmodel_squad_refuses_windows_with_no_room(tmp_path):
  path = random_finetuned(tmp_path / "model", "squadv1", **SETTINGS)
  with pytest.raises(UserError, match=r"max_seq_length 11 leaves no room "
                     r"for the context after max_query_length 8"):
    export.export_finetuned(
        load_config([
            "--init-checkpoint", path, "--format", "savedmodel",
            "--max-seq-length", "11", "--output-dir", str(tmp_path / "out")]),
        Progress("export", 2))
  assert not (tmp_path / "out").exists()
