"""KerasHub presets both ways, checked against `keras-hub` itself
(installed by the test extra; nothing is downloaded): our export loads
with keras_hub.models.ElectraBackbone.from_preset and gives our sequence
output on real sentences, tokenized by KerasHub's ElectraTokenizer from the
exported vocabulary exactly as we tokenize them; the preset round-trips as
--init-checkpoint; a preset KerasHub made itself fine-tunes here.
"""

import json
import os
import re
import shutil

import keras_hub
import numpy as np
import pytest

import build_pretraining_dataset
import export_model
import run_finetuning
import run_pretraining
from configure_finetuning import FinetuningConfig
from configure_pretraining import PretrainingConfig
from dataset import corpus
from dataset.sentences import split_sentences
from finetune.model import FinetuningModel
from finetune.model import model_config_for
from finetune.model import pretrained_encoder_weights
from finetune.model import set_encoder_weights
from loading import runs
from loading.sources import find_pretrained
from loading.sources import open_source
from pretrain.objectives import build_model
from tests.shared_data import SHARED
from tests.tiny_runs import write_run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = os.path.join(ROOT, "sample_data", "vocab_8k.txt")
SEQ = 32
MICRO = dict(hidden_size=32, intermediate_size=48, num_attention_heads=2,
             embedding_size=16, num_hidden_layers=2)
TOL = dict(rtol=1e-4, atol=1e-4)
PAD, UNK, CLS, SEP, MASK = range(5)  # vocab_8k.txt's first lines


def real_sentences(n=60):
  """Sentences of the embedded Wikipedia sample, plus accents, digits and
  punctuation that normalization must treat alike."""
  path = os.path.join(ROOT, "sample_data", "corpus", "wiki_sample.txt")
  sentences = []
  for doc in corpus.read_documents(path):
    for paragraph in doc:
      sentences += split_sentences(paragraph)
    if len(sentences) >= n:
      break
  return sentences[:n] + ["Café Müller's naïve résumé cost 3.5% (approx.)!",
                          "Zürich—São Paulo: 1,024 “quoted” words."]


def save_run(data_dir, name, **overrides):
  """A random tiny ELECTRA over the 8k sample vocabulary, saved as a
  pretraining run (its weights O(1), so every part of the network counts)."""
  h = PretrainingConfig(
      model_size="tiny", vocab_size=sum(1 for _ in open(VOCAB)),
      max_seq_length=SEQ, data_dir=data_dir, model_name=name,
      vocab_file=os.path.join(data_dir, "vocab.txt"),
      model_hparam_overrides=dict(MICRO, **overrides))
  h.validate()
  return write_run(h, build_model(h, special_ids=(PAD, UNK, CLS, SEP, MASK)))


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  """Two runs (KerasHub's tanh GELU, and our default exact GELU), each
  exported as a KerasHub preset; returns {name: (hparams, model, preset,
  export log)}."""
  data_dir = str(tmp_path_factory.mktemp("keras_hub"))
  shutil.copy(VOCAB, os.path.join(data_dir, "vocab.txt"))
  made = {}
  for name, act in (("approx", "gelu_approx"), ("exact", "gelu")):
    h, model = save_run(data_dir, name, hidden_act=act)
    out = os.path.join(data_dir, f"preset_{name}")
    log = _capture(export_model.main, [
        "--data-dir", data_dir, "--model-name", name, "--format",
        "keras_hub", "--output-dir", out])
    made[name] = (h, model, out, log)
  return data_dir, made


def _capture(fn, argv):
  import contextlib
  import io
  buffer = io.StringIO()
  with contextlib.redirect_stdout(buffer):
    fn(argv)
  return buffer.getvalue()


def packed(rows, width=SEQ):
  """[CLS] ids [SEP], padded: ids, mask, segments."""
  rows = [[CLS] + r[:width - 2] + [SEP] for r in rows]
  ids = np.zeros((len(rows), width), np.int32)
  for i, r in enumerate(rows):
    ids[i, :len(r)] = r
  return ids, (ids > 0).astype(np.int32), np.zeros_like(ids)


def test_keras_hub_loads_our_preset_with_our_tokens_and_outputs(exported):
  data_dir, made = exported
  h, model, out, log = made["approx"]
  assert {"config.json", "model.weights.h5", "tokenizer.json",
          "metadata.json", "assets"} <= set(os.listdir(out))
  sentences = real_sentences()
  ours = runs.load_tokenizer_for(h, data_dir=data_dir)
  theirs = keras_hub.models.ElectraTokenizer.from_preset(out)
  want = ours.tokenize_batch(sentences)
  tokens = theirs(sentences)
  tokens = tokens.to_list() if hasattr(tokens, "to_list") else tokens
  got = [list(map(int, t)) for t in tokens]
  # KerasHub splits words on ASCII whitespace only (RE2's \s), where BERT
  # and we also split on Unicode spaces: such sentences differ, and agree
  # once those spaces are plain ones (docs/export_model.md says so).
  unicode_space = [i for i, t in enumerate(sentences)
                   if re.search(r"[^\S\t\n\r\f\v ]", t)]
  assert unicode_space  # the sample has non-breaking spaces
  # KerasHub case-folds (final ς -> σ, ß -> ss) where the original release,
  # and so we, lower-case as Python does (docs/mirroring.md).
  folded = [i for i, t in enumerate(sentences)
            if t.casefold() != t.lower() and i not in unicode_space]
  assert folded  # the sample has Greek words ending in ς
  for i, (a, b) in enumerate(zip(got, want)):
    if i not in folded:
      assert (a == b) == (i not in unicode_space), sentences[i]
  plain = [re.sub(r"\s", " ", sentences[i]) for i in unicode_space]
  fixed = theirs(plain)
  fixed = fixed.to_list() if hasattr(fixed, "to_list") else fixed
  assert [list(map(int, t)) for t in fixed] == ours.tokenize_batch(plain)
  for i in unicode_space + folded:
    got[i] = want[i]
  assert sum(map(len, want)) > 1000

  ids, mask, segs = packed(got)
  backbone = keras_hub.models.ElectraBackbone.from_preset(out)
  hub = backbone({"token_ids": ids, "padding_mask": mask,
                  "segment_ids": segs})["sequence_output"]
  mine = model.pair.discriminator(ids, mask, segs, training=False)
  real = mask > 0
  np.testing.assert_allclose(np.asarray(hub)[real], np.asarray(mine)[real],
                             **TOL)
  assert float(np.std(np.asarray(mine)[real])) > 0.1  # not a trivial output
  assert re.search(r"sequence output is within \S+ of ours", log)
  assert re.search(r"^export 2/2 steps \(100%\) \| wrote keras_hub export ",
                   log, re.M), log


def test_an_exact_gelu_model_exports_with_the_difference_said(exported):
  """The check is float32 rounding once both compute the tanh GELU (the
  old single figure, ~1e-3, mixed a misplaced weight with the GELU's
  form); the GELU's own difference is said apart."""
  _, made = exported
  log = made["exact"][3]
  mapped = float(re.search(
      r"within (\S+) of ours computed with its tanh GELU", log).group(1))
  # Float32 rounding: KerasHub's LayerNorm and ours (model.encoder.LayerNorm)
  # order their float32 operations differently (up to ~1.4e-5 here); the
  # misplaced weight this once caught showed as ~1e-3.
  assert mapped < 5e-5
  activation = float(re.search(
      r"computes the tanh GELU; this model was trained with the exact one, "
      r"which differs by up to (\S+) in the sequence output", log).group(1))
  assert 1e-6 < activation < 1e-2
  approx = made["approx"][3]
  assert float(re.search(r"within (\S+) of ours$", approx, re.M).group(1)
               ) < 5e-5
  assert "tanh GELU" not in approx


def eval_metrics(out):
  return dict(re.findall(r"^  (\w+) +(\S+)$", out, re.M))


def test_preset_round_trips_as_init_checkpoint(exported, capsys):
  """Eval after --init-checkpoint of the preset = after the run itself
  (heads, generator and the exact GELU come back from beside the
  backbone); scoring reads it too."""
  data_dir, made = exported
  build_pretraining_dataset.main([
      "--corpus-dir", os.path.join(ROOT, "sample_data", "corpus"),
      "--vocab-file", os.path.join(data_dir, "vocab.txt"), "--output-dir",
      os.path.join(data_dir, "pretrain_tfrecords"), "--max-seq-length",
      str(SEQ), "--max-docs", "4", "--num-out-files", "1"])
  h, _, out, _ = made["exact"]
  assert open_source(out).kind == "keras_hub"
  arch = dict(model_size="tiny", max_seq_length=SEQ,
              model_hparam_overrides=h.model_hparam_overrides,
              eval_batch_size=8, num_eval_steps=2)
  base = ["--data-dir", data_dir, "--no-do-train", "--do-eval", "--hparams",
          json.dumps(arch)]
  metrics = {}
  for name, init in (("fresh", []),
                     ("from_run", [os.path.join(data_dir, "models",
                                                "exact")]),
                     ("from_preset", [out])):
    capsys.readouterr()
    flags = ["--init-checkpoint", init[0]] if init else []
    run_pretraining.main(base + ["--model-name", name] + flags)
    log = capsys.readouterr().out
    metrics[name] = eval_metrics(log)
  assert "(keras_hub: discriminator, generator)" in log
  assert metrics["from_preset"] == metrics["from_run"] != metrics["fresh"]


def test_a_preset_keras_hub_made_fine_tunes(tmp_path, capsys):
  """KerasHub's own preset (an encoder, no heads): fine-tuning starts from
  exactly its encoder, and run_finetuning trains from it."""
  backbone = keras_hub.models.ElectraBackbone(
      vocab_size=sum(1 for _ in open(VOCAB)), num_layers=2, num_heads=2,
      hidden_dim=32, embedding_dim=16, intermediate_dim=48,
      max_sequence_length=64, dtype="float32")
  preset = str(tmp_path / "hub_preset")
  backbone.save_to_preset(preset)
  keras_hub.models.ElectraTokenizer(
      vocabulary=VOCAB, lowercase=True).save_to_preset(preset)

  raw = tmp_path / "finetuning_data"
  raw.mkdir()
  os.symlink(os.path.join(SHARED, "glue", "RTE"), raw / "rte")
  config = FinetuningConfig(init_checkpoint=preset, raw_data_dir=str(raw),
                            output_dir=str(tmp_path / "out"),
                            task_names="rte", hidden_dropout_prob=0.0)
  pretrained = find_pretrained(preset)
  model_config = model_config_for(pretrained, config)
  assert model_config.hidden_act == "gelu_approx"
  model = FinetuningModel(model_config, [], name="ft")
  ids, mask, segs = packed(runs.load_tokenizer_for(
      pretrained.config).tokenize_batch(real_sentences(4)))
  model.encoder(ids, mask, segs)
  set_encoder_weights(model.encoder,
                      pretrained_encoder_weights(pretrained, config))
  want = backbone({"token_ids": ids, "padding_mask": mask,
                   "segment_ids": segs})["sequence_output"]
  real = mask > 0
  np.testing.assert_allclose(
      np.asarray(model.encoder(ids, mask, segs, training=False))[real],
      np.asarray(want)[real], **TOL)

  summary = run_finetuning.main([
      "--init-checkpoint", preset, "--raw-data-dir", str(raw),
      "--output-dir", str(tmp_path / "out"), "--task-names", "rte",
      "--hparams", json.dumps({"train_examples_limit": 16,
                               "eval_examples_limit": 16,
                               "num_train_epochs": 1.0,
                               "train_batch_size": 8, "eval_batch_size": 8,
                               "max_seq_length": 64})])
  assert np.isfinite(summary["rte"]["accuracy"]["median"])
