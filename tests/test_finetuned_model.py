"""The fine-tuned model's life: run_finetuning.py keeps the best (or last)
trial's model, goes on after a SIGKILL from the first unfinished
trial, predicts any file of the task's layout with it (exactly what it
reported at train time), starts another fine-tuning from it (encoder, and
the heads of the tasks it has), and export_model.py writes it for
transformers (logits checked against transformers itself) and as a
SavedModel whose text signature gives the label in a process where none
of our code can be imported.

A tiny model (tests/tiny_runs.py's tiny_run) on slices of the real
SST-2 and RTE; the export checks use O(1) random weights, so that every
weight counts."""

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
import transformers

import export_model
import run_finetuning
from configure_finetuning import FinetuningConfig
from finetune.classification.classification_tasks import SentenceExample
from finetune.model import load_finetuned
from finetune.multiple_choice.choice_tasks import ChoiceExample
from finetune.tagging.tagging_tasks import TaggingExample
from finetune.trainer import FinetuningRunner
from loading import export
from interop.config import load_config
from interop.weights import encoder_slots
from loading import finetuned as finetuned_files
from tests.finetuned_models import QUICK
from tests.finetuned_models import finetune
from tests.finetuned_models import finetune_argv
from tests.finetuned_models import random_finetuned
from tests.pretraining_runs import ROOT
from tests.script_checks import WITHOUT_OUR_CODE
from tests.script_checks import _python
from tests.script_checks import _wait
from tests.shared_data import SHARED
from tests.tiny_runs import tiny_run
from training.progress import Progress
from util.errors import UserError

GLUE = pathlib.Path(SHARED) / "glue"
TOL = dict(rtol=1e-4, atol=1e-4)
torch.set_num_threads(1)


def glue_slice(folder, task, split, lines):
  """The first `lines` lines (header included) of a GLUE file."""
  source = GLUE / {"sst": "SST-2", "rte": "RTE"}[task] / f"{split}.tsv"
  rows = source.read_text(encoding="utf-8").splitlines()[:lines]
  path = folder / task / f"{split}.tsv"
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text("\n".join(rows) + "\n", encoding="utf-8")
  return path


@pytest.fixture(scope="module")
def world(tmp_path_factory):
  """A tiny pretrained run, SST-2 and RTE slices, and an SST-2 run of two
  trials that kept its best model."""
  root = tmp_path_factory.mktemp("finetuned")
  tiny_run(root)
  raw = root / "finetuning_data"
  for task in ("sst", "rte"):
    glue_slice(raw, task, "train", 33)
    glue_slice(raw, task, "dev", 25)
  glue_slice(raw, "sst", "test", 9)
  summary = finetune(root, "sst", num_trials=2)
  return root, summary


def outputs_dir(root):
  return root / "models" / "tiny" / "finetuning"


def test_keeps_the_best_trial_and_predicts_exactly_what_it_reported(
    world, capsys):
  root, summary = world
  out = outputs_dir(root)
  values = summary["sst"]["accuracy"]["values"]
  best = int(np.argmax(values)) + 1  # the first of equals; 1-based
  kept = out / "sst_model"
  assert sorted(os.listdir(kept)) == ["finetuned_model.json",
                                      "model.safetensors", "vocab.txt"]
  record = json.loads((kept / "finetuned_model.json").read_text())
  assert record["trial"] == best and record["kept"] == "best"
  assert record["tasks"] == {"sst": {"head": "classification",
                                     "labels": ["0", "1"],
                                     "text_pair": False}}
  assert record["results"]["sst"]["accuracy"] == values[best - 1]
  assert record["finetuning_config"]["max_seq_length"] == 32
  results = json.loads(next(out.glob("results_sst_*.json")).read_text())
  assert results["kept_model"]["trial"] == best

  capsys.readouterr()
  # Another eval batch size: predictions do not depend on batching.
  predicted = run_finetuning.main([
      "--data-dir", str(root), "--model-name", "tiny", "--task-names", "sst",
      "--do-predict", "--predict-file",
      str(root / "finetuning_data" / "sst" / "dev.tsv"),
      "--eval-batch-size", "7"])
  assert "step 1/" not in capsys.readouterr().out  # no training
  assert predicted["sst"]["accuracy"] == values[best - 1]
  assert ((out / "sst_dev_predictions.tsv").read_text() ==
          (out / f"sst_dev_predictions_trial{best}.tsv").read_text())

  # A file in the test layout (no labels): predictions, no metrics.
  test_file = root / "finetuning_data" / "sst" / "test.tsv"
  assert run_finetuning.main([
      "--init-checkpoint", str(kept), "--task-names", "sst", "--do-predict",
      "--predict-file", str(test_file), "--predict-output",
      str(root / "sst_test.tsv")]) == {}
  lines = (root / "sst_test.tsv").read_text().splitlines()
  assert lines[0] == "index\tprediction" and len(lines) == 9
  assert all(re.fullmatch(r"\d+\t[01]", line) for line in lines[1:])


def kill_after_first_trial(argv, record):
  """Runs run_finetuning.py in a process and SIGKILLs it once `record`
  (its <tasks>_trials.json) holds one finished trial; returns the record."""
  process = subprocess.Popen(
      [sys.executable, os.path.join(ROOT, "run_finetuning.py"), *argv],
      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT,
      env=dict(os.environ, PYTHONPATH=ROOT))
  deadline = time.time() + 300
  try:
    while True:
      assert process.poll() is None, "the run ended before it was killed"
      assert time.time() < deadline
      if record.exists():  # written whole (util/outputs.write_text)
        first = json.loads(record.read_text())
        if len(first["trials"]) == 1:
          process.send_signal(signal.SIGKILL)  # during the second trial
          break
      time.sleep(0.01)
  finally:
    if process.poll() is None:
      process.kill()
    process.wait()
  assert process.returncode == -signal.SIGKILL
  return first


def test_a_killed_run_goes_on_from_its_first_unfinished_trial(
    world, tmp_path, capsys):
  root, _ = world
  argv = ["--output-dir", tmp_path / "out", "--keep-model", "last"]
  first = kill_after_first_trial(
      finetune_argv(root, "sst", *argv, num_trials=2),
      tmp_path / "out" / "sst_trials.json")
  assert len(first["trials"]) == 1

  summary = finetune(root, "sst", *argv, num_trials=2)
  out = capsys.readouterr().out
  assert "1 of 2 trial(s) done earlier" in out
  assert "trial 1/2" not in out and "trial 2/2" in out
  values = summary["sst"]["accuracy"]["values"]
  assert len(values) == 2 and values[0] == first["trials"][0]["sst"][
      "accuracy"]
  kept = finetuned_files.load(str(tmp_path / "out" / "sst_model"))
  assert kept.info["trial"] == 2  # keep_model last; 1-based as logged

  # Done: the same command trains nothing and writes no new results file.
  assert finetune(root, "sst", *argv, num_trials=2) == summary
  assert "nothing left to train" in capsys.readouterr().out
  assert len(list((tmp_path / "out").glob("results_*.json"))) == 1
  # Other hparams: refused, with what differs.
  with pytest.raises(SystemExit):
    finetune(root, "sst", *argv, num_trials=2, learning_rate=2e-3)
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and re.search(
      r"sst_trials.json records a run of these tasks with other hparams: "
      r"learning_rate 0.001 -> 0.002", err[0]), err


def test_a_finetuned_model_starts_another_finetuning(world, tmp_path,
                                                    capsys):
  """MNLI -> RTE style: the encoder moves over; a task's head is reused
  when the model has one (evaluating it reproduces the kept trial's
  score), else a new head is trained."""
  root, summary = world
  kept = outputs_dir(root) / "sst_model"
  again = finetune(root, "sst", "--init-checkpoint", kept, "--output-dir",
                   tmp_path / "again", "--no-do-train")
  assert "heads reused: sst; new: none" in capsys.readouterr().out
  assert again["sst"]["accuracy"]["median"] == max(
      summary["sst"]["accuracy"]["values"])

  finetune(root, "rte", "--init-checkpoint", kept, "--output-dir",
           tmp_path / "rte")
  assert "heads reused: none; new: rte" in capsys.readouterr().out
  rte = finetuned_files.load(str(tmp_path / "rte" / "rte_model"))
  assert list(rte.tasks) == ["rte"]
  assert rte.pretrain_config.model_name == "tiny"  # the origin carried on
  config = FinetuningConfig(data_dir=str(root), model_name="tiny",
                            task_names="rte", init_checkpoint=str(kept),
                            output_dir=str(tmp_path / "x"), **QUICK)
  model = FinetuningRunner(config)._build(0)  # pylint: disable=protected-access
  saved = finetuned_files.load(str(kept)).encoder_weights()
  for slot in encoder_slots(model.encoder):
    np.testing.assert_array_equal(slot.value(), saved[slot.name])


# ------------------------------------------------------------ exports
SENTENCES = ["a gripping , funny and moving film", "it is not a good movie",
             "the plot goes nowhere , slowly and at great length , "
             "and the actors seem to know it too", "", "Zebra!"]


def ours(path, texts_b=None):
  """Our logits for SENTENCES (as fine-tuning featurizes them)."""
  finetuned, config, tokenizer, tasks, model = load_finetuned(path)
  task = tasks[0]
  if task.head_kind == "multiple_choice":
    examples = [ChoiceExample(guid=str(i), context=s, question="why ?",
                              options=SENTENCES[:3], label=0)
                for i, s in enumerate(SENTENCES)]
  elif task.head_kind == "tagging":
    examples = [TaggingExample(guid=str(i), words=s.split() or ["."],
                               tags=["O"] * len(s.split() or ["."]))
                for i, s in enumerate(SENTENCES)]
  else:
    examples = [SentenceExample(guid=str(i), text_a=s,
                                text_b=texts_b[i] if texts_b else None)
                for i, s in enumerate(SENTENCES)]
  f = task.featurize(examples, is_training=False)
  ids, mask, segs = (f[k] for k in ("input_ids", "input_mask",
                                    "segment_ids"))
  shape = ids.shape
  hidden = model.encoder(*(x.reshape(-1, shape[-1]) for x in (ids, mask,
                                                               segs)))
  head = model.heads[task.name]
  if task.head_kind == "multiple_choice":
    logits = np.asarray(head(hidden[:, 0])).reshape(shape[:2])
  else:
    logits = np.asarray(head(hidden))
  return (ids, mask, segs), logits, f


def theirs(directory, ids, mask, segs):
  config = transformers.AutoConfig.from_pretrained(directory)
  model = getattr(transformers, config.architectures[0]).from_pretrained(
      directory).eval()
  with torch.no_grad():
    out = model(input_ids=torch.tensor(ids, dtype=torch.long),
                attention_mask=torch.tensor(mask, dtype=torch.long),
                token_type_ids=torch.tensor(segs, dtype=torch.long))
  return model, out.logits.numpy()


@pytest.mark.parametrize("task,kind,cls,labels", [
    ("mnli", "classification", "ElectraForSequenceClassification", None),
    ("sts", "regression", "ElectraForSequenceClassification", None),
    ("chunk", "tagging", "ElectraForTokenClassification",
     ["B-NP", "E-NP", "I-NP", "O", "S-NP", "S-VP"]),
    ("copa", "multiple_choice", "ElectraForMultipleChoice", None)])
def test_transformers_gives_our_logits(tmp_path, capsys, task, kind, cls,
                                       labels):
  path = random_finetuned(tmp_path / "model", task, labels)
  export_model.main(["--init-checkpoint", path, "--format", "hf",
                     "--output-dir", str(tmp_path / "hf")])
  assert f"({cls})" in capsys.readouterr().out
  directory = str(tmp_path / "hf" / task)
  (ids, mask, segs), want, _ = ours(path, SENTENCES[::-1])
  model, got = theirs(directory, ids, mask, segs)
  assert type(model).__name__ == cls
  if kind == "tagging":
    real = mask > 0
    got, want = got[real], want[real]
  elif kind == "regression":
    got = got[:, 0]
    want = want[:, 0]
  assert np.abs(want).max() > 1.0  # O(1) logits: every weight counts
  np.testing.assert_allclose(got, want, **TOL)
  print(f"{kind}: max |ours - transformers| = {np.abs(got - want).max():.2e}",
        file=sys.stderr)
  if labels or kind == "classification":
    names = labels or ["contradiction", "entailment", "neutral"]
    assert [model.config.id2label[i] for i in range(len(names))] == names


def test_linear_squad_head_is_electra_for_question_answering(tmp_path,
                                                            capsys):
  path = random_finetuned(tmp_path / "model", "squadv1", qa_head="linear",
                          max_query_length=8)
  export_model.main(["--init-checkpoint", path, "--format", "hf",
                     "--output-dir", str(tmp_path / "hf")])
  assert "(ElectraForQuestionAnswering)" in capsys.readouterr().out
  _, _, _, _, model = load_finetuned(path)
  rng = np.random.default_rng(0)
  ids = rng.integers(5, 500, size=(3, 24)).astype(np.int32)
  mask = (np.arange(24)[None] < np.array([[24], [17], [9]])).astype(np.int32)
  segs = (np.arange(24)[None] >= 6).astype(np.int32) * mask
  hidden = model.encoder(ids, mask, segs)
  head = model.heads["squadv1"]
  want = [np.asarray(d(hidden))[..., 0] for d in (head.start_dense,
                                                  head.end_dense)]
  hf_model = transformers.ElectraForQuestionAnswering.from_pretrained(
      str(tmp_path / "hf" / "squadv1")).eval()
  with torch.no_grad():
    out = hf_model(input_ids=torch.tensor(ids, dtype=torch.long),
                   attention_mask=torch.tensor(mask, dtype=torch.long),
                   token_type_ids=torch.tensor(segs, dtype=torch.long))
  real = mask > 0
  for got, w in zip((out.start_logits, out.end_logits), want):
    assert np.abs(w[real]).max() > 1.0
    np.testing.assert_allclose(got.numpy()[real], w[real], **TOL)
    print(f"squad linear: max |ours - transformers| = "
          f"{np.abs(got.numpy()[real] - w[real]).max():.2e}", file=sys.stderr)


@pytest.mark.parametrize("task,values,match", [
    ("squad", {}, r"squad: our default SQuAD head is the ELECTRA release's "
                  r"\(qa_head electra.* fine-tune with qa_head linear"),
    ("squad", {"qa_head": "linear"}, r"squad: SQuAD 2.0's answerability "
                                     r"classifier has no place in"),
    ("chunk", {"tagging_crf": True}, r"chunk: a CRF tagging head .* has no "
                                     r"transformers ELECTRA class")])
def test_heads_transformers_cannot_express_are_refused(tmp_path, task,
                                                       values, match):
  path = random_finetuned(tmp_path / "model", task,
                          ["B-NP", "I-NP", "O"] if task == "chunk" else None,
                          **values)
  with pytest.raises(UserError, match=match):
    export.export_finetuned(
        load_config(["--init-checkpoint", path, "--output-dir",
                     str(tmp_path / "hf")]), Progress("export", 2))
  assert not (tmp_path / "hf").exists()


# Only TensorFlow and tensorflow_text: labels from raw strings.
LOAD_TEXT_SIGNATURE = WITHOUT_OUR_CODE + """
out = {}
for name, texts in json.loads(sys.stdin.readline()):
  loaded = tf.saved_model.load(name)
  result = loaded.signatures["serve_text"](
      **{k: tf.constant(v) for k, v in texts.items()})
  out.update({f"{name}/{k}": v.numpy().astype(bytes) if v.dtype == tf.string
              else v.numpy() for k, v in result.items()})
  out[f"{name}/finetuned"] = loaded.finetuned.numpy()
np.savez("outputs.npz", **out)
"""


def test_savedmodel_text_signature_gives_the_label(tmp_path):
  site = [p for p in sys.path if p.endswith("site-packages")]
  process = _python(LOAD_TEXT_SIGNATURE, json.dumps(site), cwd=tmp_path,
                    isolated=True)
  try:
    pair = SENTENCES[::-1]
    paths = {name: random_finetuned(tmp_path / "models" / name, name)
             for name in ("rte", "sts")}  # classification, regression
    for name, path in paths.items():
      export_model.main(["--init-checkpoint", path, "--format",
                         "savedmodel", "--output-dir", str(tmp_path / name)])
    _wait(process, json.dumps([
        [f"{name}/{name}", {"text": SENTENCES, "text_b": pair}]
        for name in paths]) + "\n")
  finally:
    if process.poll() is None:
      process.kill()
  out = dict(np.load(tmp_path / "outputs.npz"))
  for name, path in paths.items():
    (ids, mask, segs), logits, _ = ours(path, pair)
    got = {k.split("/")[-1]: v for k, v in out.items()
           if k.startswith(f"{name}/{name}/")}
    width = got["input_ids"].shape[1]
    assert width == 24  # the long pair was cut, longest first, as ours
    np.testing.assert_array_equal(got["input_ids"], ids[:, :width])
    np.testing.assert_array_equal(got["segment_ids"], segs[:, :width])
    if name == "sts":
      np.testing.assert_allclose(got["score"], logits[:, 0], **TOL)
      continue
    np.testing.assert_allclose(got["logits"], logits, **TOL)
    labels = ["entailment", "not_entailment"]
    assert [x.decode() for x in got["label"]] == [
        labels[i] for i in logits.argmax(-1)]
    assert json.loads(got["finetuned"].item())["labels"] == labels
