"""Hugging Face interop, checked against `transformers` itself (PyTorch
CPU, installed by the test extra): our export loads as
ElectraForPreTraining / ElectraForMaskedLM with the same logits, a
transformers-made ELECTRA imports into our model with the same outputs,
and fine-tuning, scoring and continued pretraining accept the directory.
"""

import json
import os
import re

import numpy as np
import pytest
import torch
import transformers

import build_pretraining_dataset
import export_model
import run_pretraining
from interop import hf
from loading import runs
from loading.sources import find_pretrained
from loading.sources import open_source
from scoring.pll import Scorer
from tests.tiny_runs import SENTENCES
from tests.tiny_runs import save_run

TOL = dict(rtol=1e-4, atol=1e-4)
torch.set_num_threads(1)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  """A tiny random ELECTRA run and an MLM run, exported to transformers."""
  data_dir = str(tmp_path_factory.mktemp("hf"))
  made = {}
  for name, objective in (("electra", "electra"), ("mlm", "mlm")):
    h, model = save_run(data_dir, objective, name=name)
    out = os.path.join(data_dir, f"hf_{name}")
    export_model.main(["--data-dir", data_dir, "--model-name", name,
                       "--format", "hf", "--output-dir", out])
    made[name] = (h, model, out)
  return data_dir, made


def batch(tokenizer, sentences=SENTENCES):
  """Padded [CLS] ... [SEP] ids with one all-padding-free row per text."""
  rows = [[2] + t[:12] + [3] for t in tokenizer.tokenize_batch(sentences)]
  width = max(map(len, rows))
  ids = np.array([r + [0] * (width - len(r)) for r in rows], np.int32)
  return ids, (ids > 0).astype(np.int32), np.zeros_like(ids)


def ours(model, role, ids, mask, segs):
  if role == "discriminator":
    hidden = model.pair.discriminator(ids, mask, segs)
    return np.asarray(model.discriminator_predictions(hidden))
  encoder, head = ((model.pair.generator.encoder,
                    model.pair.generator.predictions)
                   if hasattr(model, "pair") else
                   (model.encoder, model.mlm_predictions))
  return np.asarray(head(encoder(ids, mask, segs),
                         encoder.embeddings.token_table))


def theirs(directory, ids, mask, segs):
  config = transformers.AutoConfig.from_pretrained(directory)
  cls = getattr(transformers, config.architectures[0])
  model = cls.from_pretrained(directory).eval()
  with torch.no_grad():
    out = model(input_ids=torch.tensor(ids, dtype=torch.long),
                attention_mask=torch.tensor(mask, dtype=torch.long),
                token_type_ids=torch.tensor(segs, dtype=torch.long))
  return out.logits.numpy()


@pytest.mark.parametrize("name,role", [("electra", "discriminator"),
                                       ("electra", "generator"),
                                       ("mlm", "generator")])
def test_transformers_loads_our_export_with_the_same_logits(exported, name,
                                                            role):
  data_dir, made = exported
  h, model, out = made[name]
  directory = os.path.join(out, role)
  assert sorted(os.listdir(directory)) == [
      "config.json", "model.safetensors", "tokenizer_config.json",
      "vocab.txt"]
  tokenizer = runs.load_tokenizer_for(h)
  ids, mask, segs = batch(tokenizer)
  want = ours(model, role, ids, mask, segs)
  got = theirs(directory, ids, mask, segs)
  real = mask > 0  # padding positions are not compared
  np.testing.assert_allclose(got[real], want[real], **TOL)
  # transformers' own tokenizer reads the exported vocab the same way.
  hf_tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
  for text, row in zip(SENTENCES, tokenizer.tokenize_batch(SENTENCES)):
    assert hf_tokenizer(text, add_special_tokens=False)["input_ids"] == row


def test_a_generator_without_a_transformers_class_is_said(tmp_path, capsys):
  """Electric's two-tower generator has no transformers class: the
  discriminator is written, and the log says the generator was not."""
  save_run(str(tmp_path), "electric", name="electric")
  out = str(tmp_path / "hf_electric")
  export_model.main(["--data-dir", str(tmp_path), "--model-name", "electric",
                     "--format", "hf", "--output-dir", out])
  log = capsys.readouterr().out
  assert sorted(os.listdir(out)) == ["discriminator"]
  assert "generator (two-tower or fixed) has no transformers class" in log


def test_round_trip_ours_to_hf_to_ours_keeps_every_weight(exported):
  data_dir, made = exported
  _, model, out = made["electra"]
  back = runs.restore_model(find_pretrained(out))
  assert open_source(out).kind == "hf"
  mine = {v.path: np.asarray(v) for v in model.trainable_variables}
  for v in back.trainable_variables:
    np.testing.assert_array_equal(np.asarray(v), mine[v.path], err_msg=v.path)


def test_a_transformers_made_electra_imports_with_the_same_outputs(
    exported, tmp_path):
  data_dir, made = exported
  h, _, _ = made["electra"]
  config = transformers.ElectraConfig(
      vocab_size=h.vocab_size, embedding_size=12, hidden_size=16,
      num_hidden_layers=2, num_attention_heads=2, intermediate_size=24,
      max_position_embeddings=32)
  torch.manual_seed(0)
  disc = transformers.ElectraForPreTraining(config)
  for p in disc.parameters():  # O(1) weights so every part matters
    torch.nn.init.normal_(p, std=0.5)
  disc.save_pretrained(str(tmp_path / "discriminator"))
  gen_config = transformers.ElectraConfig(**dict(
      config.to_dict(), hidden_size=8, num_attention_heads=1,
      intermediate_size=12))
  gen = transformers.ElectraForMaskedLM(gen_config)
  for p in gen.parameters():
    torch.nn.init.normal_(p, std=0.5)
  # ELECTRA shares its embeddings between the two networks.
  gen.electra.embeddings.load_state_dict(disc.electra.embeddings.state_dict())
  gen.save_pretrained(str(tmp_path / "generator"))
  tokenizer = runs.load_tokenizer_for(h)
  ids, mask, segs = batch(tokenizer)

  pretrained = find_pretrained(str(tmp_path))
  p = pretrained.config
  assert (p.objective, p.weight_sharing, p.generator_hidden_size) == (
      "electra", "embeddings", 0.5)
  model = runs.restore_model(pretrained)
  real = mask > 0
  for role in ("discriminator", "generator"):
    np.testing.assert_allclose(
        ours(model, role, ids, mask, segs)[real],
        theirs(str(tmp_path / role), ids, mask, segs)[real], **TOL)


def test_scoring_accepts_the_hf_directory(exported):
  data_dir, made = exported
  direct = Scorer.from_run(os.path.join(data_dir, "models", "mlm"),
                           batch_size=8)
  converted = Scorer.from_run(made["mlm"][2], batch_size=8)
  for a, b in zip(direct.score(SENTENCES[:3]), converted.score(SENTENCES[:3])):
    np.testing.assert_allclose(a.token_plls, b.token_plls, **TOL)


def eval_metrics(out):
  return dict(re.findall(r"^  (\w+) +(\S+)$", out, re.M))


def test_pretraining_continues_from_the_hf_directory(exported, capsys):
  """Eval of a run initialised from the export = eval of the run itself;
  hparams that build another architecture are one error listing shapes."""
  data_dir, made = exported
  corpus = os.path.join(data_dir, "corpus")
  os.makedirs(corpus, exist_ok=True)
  with open(os.path.join(corpus, "a.txt"), "w") as f:
    f.write("\n\n".join(SENTENCES * 20) + "\n")
  build_pretraining_dataset.main([
      "--corpus-dir", corpus, "--vocab-file",
      os.path.join(data_dir, "vocab.txt"), "--output-dir",
      os.path.join(data_dir, "pretrain_tfrecords"), "--max-seq-length",
      "16", "--num-processes", "1"])
  h, _, out = made["electra"]
  arch = dict(model_size="tiny", max_seq_length=16, max_predictions_per_seq=3,
              model_hparam_overrides=h.model_hparam_overrides,
              eval_batch_size=4, num_eval_steps=2)
  base = ["--data-dir", data_dir, "--no-do-train", "--do-eval"]
  metrics = {}
  for name, init in (("fresh", []),
                     ("from_run", ["--init-checkpoint", os.path.join(
                         data_dir, "models", "electra")]),
                     ("from_hf", ["--init-checkpoint", out])):
    capsys.readouterr()
    run_pretraining.main(base + ["--model-name", name, "--hparams",
                                 json.dumps(arch)] + init)
    log = capsys.readouterr().out
    assert ("initialised weights from" in log) == bool(init)
    metrics[name] = eval_metrics(log)
  assert "(hf: discriminator, generator)" in log
  assert metrics["from_hf"] == metrics["from_run"] != metrics["fresh"]

  with pytest.raises(SystemExit) as info:
    run_pretraining.main(base + [
        "--model-name", "mismatch", "--init-checkpoint", out, "--hparams",
        json.dumps(dict(arch, generator_hidden_size=0.5))])
  assert info.value.code == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and "generator shape (source vs model)" in err[0], err


def test_hf_directory_errors_are_one_line(tmp_path):
  (tmp_path / "config.json").write_text('{"model_type": "bert"}')
  with pytest.raises(Exception, match=re.escape("model_type is 'bert'")):
    open_source(str(tmp_path))
  (tmp_path / "config.json").write_text(
      '{"model_type": "electra", "architectures": ["ElectraForPreTraining"]}')
  with pytest.raises(Exception, match="has no model.safetensors"):
    hf.load(str(tmp_path))


def test_export_cli_errors_are_one_line_and_keep_what_exists(exported, capsys,
                                                             tmp_path):
  data_dir, _ = exported
  base = ["--data-dir", data_dir, "--model-name"]
  keras_out = tmp_path / "keras"
  export_model.main(base + ["electra", "--format", "keras", "--output-dir",
                            str(keras_out)])
  assert os.listdir(keras_out) == ["discriminator.keras"]
  mine = tmp_path / "mine"
  mine.mkdir()
  (mine / "notes.txt").write_text("keep me")
  for argv, match in (
      (["electra", "--format", "onnx"], r"format must be one of"),
      (["electra", "--output-dir", str(mine)], r"already exists and is not "
                                               r"empty"),
      (["mlm", "--format", "keras", "--output-dir", str(tmp_path / "new")],
       r"discriminators only"),
      (["missing", "--output-dir", str(tmp_path / "x")],
       r"no checkpoint found")):
    if "--output-dir" not in argv:
      argv += ["--output-dir", str(tmp_path / "y")]
    with pytest.raises(SystemExit) as info:
      export_model.main(base + argv)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search(match, err[0]), err
  assert (mine / "notes.txt").read_text() == "keep me"
  assert not (tmp_path / "new").exists()  # a failed export leaves nothing
