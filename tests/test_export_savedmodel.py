"""SavedModel and .keras exports, each loaded in a fresh Python process.

The SavedModels are loaded where none of our code is importable (only
tensorflow and tensorflow_text); the .keras archive where our repo is on
the path (its class is ours). Their outputs must equal the pretraining
model's in this process. The three processes run side by side: each spends
seconds importing TensorFlow.
"""

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from configure_pretraining import PretrainingConfig
from interop.keras_archive import export_keras
from interop.savedmodel import export_savedmodel
from pretrain.objectives import build_model
from loading.runs import load_tokenizer_for
from tests.dataset_builds import train_sentencepiece
from tests.script_checks import WITHOUT_OUR_CODE
from tests.script_checks import _python
from tests.script_checks import _wait
from tests.tiny_runs import MICRO
from tests.tiny_runs import PAD
from tests.tiny_runs import save_run
from util.errors import UserError

REPO = pathlib.Path(__file__).resolve().parents[1]
# Upper case (the vocab is lower-cased), an unknown word, a line longer than
# max_seq_length (16), an empty line.
SENTENCES = ["the cat sat on the mat", "The Quick Brown FOX jumps over",
             "a big dog ran zebra", "",
             "the quick brown fox jumps over the lazy dog and the cat saw "
             "it and they ran on"]
TOL = dict(rtol=1e-4, atol=1e-4)

LOAD_SAVEDMODELS = WITHOUT_OUR_CODE + """
names, sentences = json.loads(sys.stdin.readline())
ids = dict(np.load("ids.npz"))
out = {}
for name in names:
  loaded = tf.saved_model.load(name)
  text = loaded.signatures["serve_text"](text=tf.constant(sentences))
  by_ids = loaded.signatures["serving_default"](
      **{k: tf.constant(v) for k, v in ids.items()})
  for sig, result in (("text", text), ("ids", by_ids)):
    out.update({f"{name}/{sig}/{k}": v.numpy() for k, v in result.items()})
np.savez("outputs.npz", **out)
"""

# As a downstream Keras user would: import the class, then load_model.
LOAD_KERAS = """
import sys
import keras
import numpy as np
from model.standalone import Discriminator
from interop.keras_archive import load_keras
disc = keras.saving.load_model(sys.argv[1])
assert isinstance(disc, Discriminator)
assert isinstance(load_keras(sys.argv[1]), Discriminator)
out = disc(dict(np.load(sys.argv[2])))
np.savez(sys.argv[3], **{k: np.asarray(v) for k, v in out.items()})
"""


def _sentencepiece_run(tmp_path):
  """A tiny ELECTRA with a cased SentencePiece vocabulary (no checkpoint:
  the export reads the model in memory)."""
  from util.tokenization import load_tokenizer
  vocab_file = train_sentencepiece(tmp_path, vocab_size=300)
  tokenizer = load_tokenizer(vocab_file, do_lower_case=False)
  h = PretrainingConfig(
      model_size="tiny", vocab_size=tokenizer.vocab_size, max_seq_length=16,
      max_predictions_per_seq=3, data_dir=str(tmp_path), model_name="sp",
      vocab_file=vocab_file, do_lower_case=False,
      model_hparam_overrides=dict(MICRO))
  model = build_model(h)
  model.build_variables()
  return h, model, tokenizer


def _features(ids):
  ids = np.asarray(ids, np.int32)
  return {"input_ids": ids, "input_mask": (ids != PAD).astype(np.int32),
          "segment_ids": np.zeros_like(ids)}


def _expected_text_ids(tokenizer, max_len):
  s = tokenizer.special_ids
  rows = [[s["cls"]] + t[:max_len - 2] + [s["sep"]]
          for t in tokenizer.tokenize_batch(SENTENCES)]
  width = max(len(r) for r in rows)
  return np.array([r + [s["pad"]] * (width - len(r)) for r in rows])


def _reference(model, f):
  """Our model's outputs for the ids signature, written per objective."""
  mask = f["input_mask"].astype(np.float32)
  if hasattr(model, "pair"):
    hidden = model.pair.discriminator(f["input_ids"], f["input_mask"],
                                      f["segment_ids"])
    logits = np.asarray(model.discriminator_predictions(hidden))
    if model.config.objective == "electric":  # E(x)_t; PLL = -E
      scores = np.asarray(model.pseudo_log_likelihood(f))
    else:  # log p(original) = log sigmoid(-logit)
      scores = -np.logaddexp(0.0, logits)
    out = {}
  else:  # SCRIPT
    hidden = model.encoder(f["input_ids"], f["input_mask"], f["segment_ids"])
    logits = np.asarray(model.critic_logits(f["input_ids"], f))
    scores = np.asarray(model.pseudo_log_likelihood(f))
    out = {"mlm_logits": np.asarray(model.vocab_logits(f["input_ids"], f))}
  out.update(hidden_states=np.asarray(hidden), logits=logits,
             token_scores=scores * mask)
  return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  """Exports three tiny runs and a SentencePiece one as SavedModels, and a
  GDES ELECTRA as .keras, and loads them all in fresh processes."""
  root = tmp_path_factory.mktemp("export")
  # A second segment and padding, which serve_text never produces.
  ids = _features([[2, 5, 7, 3, 8, 10, 3], [2, 6, 3, 0, 0, 0, 0]])
  ids["segment_ids"][0, 4:] = 1
  np.savez(root / "ids.npz", **ids)
  site = [p for p in sys.path if p.endswith("site-packages")]
  savedmodels = _python(LOAD_SAVEDMODELS, json.dumps(site), cwd=root,
                        isolated=True)
  started = [savedmodels]
  try:
    return _export_all(root, ids, savedmodels, started)
  finally:
    for process in started:  # only those a failure left running
      if process.poll() is None:
        process.kill()


def _export_all(root, ids, savedmodels, started):
  h, model = save_run(str(root), "electra", weight_sharing="gdes")
  runs = {"electra": (h, model, load_tokenizer_for(h))}
  export_savedmodel(model, h, runs["electra"][2], h.vocab_file,
                    str(root / "electra"))
  export_keras(model, h, str(root / "disc.keras"))

  # Started early, to import TensorFlow while the rest is exported.
  cli = subprocess.Popen(
      [str(pathlib.Path(sys.executable).parent / "saved_model_cli"), "show",
       "--dir", str(root / "electra"), "--all"],
      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
  keras_load = _python(LOAD_KERAS, str(root / "disc.keras"),
                       str(root / "ids.npz"), str(root / "keras_out.npz"),
                       cwd=REPO)
  started += [cli, keras_load]
  for objective in ("electric", "script"):
    h, model = save_run(str(root), objective)
    runs[objective] = (h, model, load_tokenizer_for(h))
  runs["sentencepiece"] = _sentencepiece_run(root)
  for name, (h, model, tokenizer) in runs.items():
    if name != "electra":
      export_savedmodel(model, h, tokenizer, h.vocab_file, str(root / name))

  _wait(savedmodels, json.dumps([list(runs), SENTENCES]) + "\n")
  _wait(keras_load)
  cli_output = _wait(cli)
  return dict(runs=runs, ids=ids, cli=cli_output, root=root,
              outputs=dict(np.load(root / "outputs.npz")),
              keras=dict(np.load(root / "keras_out.npz")))


@pytest.mark.parametrize("name", ["electra", "electric", "script"])
def test_savedmodel_equals_our_model(exported, name):
  h, model, tokenizer = exported["runs"][name]
  out = exported["outputs"]
  expected = _reference(model, exported["ids"])
  got = {k.split("/")[-1]: v for k, v in out.items()
         if k.startswith(f"{name}/ids/")}
  assert sorted(got) == sorted(expected)
  for key, value in expected.items():
    np.testing.assert_allclose(got[key], value, err_msg=key, **TOL)

  # serve_text: our tokenizer's ids, the same outputs, the sentence PLL.
  text = {k.split("/")[-1]: v for k, v in out.items()
          if k.startswith(f"{name}/text/")}
  ids = _expected_text_ids(tokenizer, h.max_seq_length)
  assert ids.shape[1] == h.max_seq_length  # the long line was cut
  np.testing.assert_array_equal(text["input_ids"], ids)
  f = _features(ids)
  np.testing.assert_array_equal(text["input_mask"], f["input_mask"])
  expected = _reference(model, f)
  for key, value in expected.items():
    np.testing.assert_allclose(text[key], value, err_msg=key, **TOL)
  lengths = f["input_mask"].sum(1)
  sentence = [expected["token_scores"][i, 1:n - 1].sum()
              for i, n in enumerate(lengths)]
  np.testing.assert_allclose(text["sentence_score"], sentence, **TOL)
  assert text["sentence_score"][SENTENCES.index("")] == 0.0


def test_savedmodel_sentencepiece_tokenizes_as_ours(exported):
  h, model, tokenizer = exported["runs"]["sentencepiece"]
  text = {k.split("/")[-1]: v for k, v in exported["outputs"].items()
          if k.startswith("sentencepiece/text/")}
  ids = _expected_text_ids(tokenizer, h.max_seq_length)
  np.testing.assert_array_equal(text["input_ids"], ids)
  np.testing.assert_allclose(text["logits"],
                             _reference(model, _features(ids))["logits"],
                             **TOL)


def test_saved_model_cli_lists_both_signatures(exported):
  assert "signature_def['serving_default']" in exported["cli"]
  assert "signature_def['serve_text']" in exported["cli"]


def test_keras_archive_round_trip(exported):
  model = exported["runs"]["electra"][1]  # GDES: effective tables exported
  expected = _reference(model, exported["ids"])
  for key in ("logits", "hidden_states"):
    np.testing.assert_allclose(exported["keras"][key], expected[key],
                               rtol=1e-5, atol=1e-5, err_msg=key)


def test_keras_archive_needs_a_discriminator(exported, tmp_path):
  h, model, _ = exported["runs"]["script"]
  with pytest.raises(UserError, match="discriminators only"):
    export_keras(model, h, str(tmp_path / "script.keras"))


def test_savedmodel_and_keras_archive_load_back_as_pretrained_models(
    exported):
  """--init-checkpoint / fine-tuning read both back: the discriminator's
  weights (GDES tables as exported, shared + delta) come back exactly."""
  from interop.weights import export_weights
  from loading import runs
  from loading.sources import find_pretrained
  model = exported["runs"]["electra"][1]
  want = export_weights(model, "discriminator")
  for path, kind in ((exported["root"] / "electra", "savedmodel"),
                     (exported["root"] / "disc.keras", "keras")):
    pretrained = find_pretrained(str(path))
    assert pretrained.source.kind == kind
    back = runs.restore_model(pretrained, need=("discriminator",))
    got = export_weights(back, "discriminator")
    assert sorted(got) == sorted(want)
    for name, value in want.items():
      np.testing.assert_allclose(got[name], value, atol=1e-6, err_msg=name)
