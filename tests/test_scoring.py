"""PLL scoring, BLiMP, n-best rescoring and run_scoring.py.

The batched Scorer is checked against slow reference loops written here
from the papers (one sentence, one position, one candidate at a time, no
padding, float64 NumPy), on tiny randomly initialised models saved and
reloaded as pretraining runs. BLiMP and n-best use stub scorers and
hand-counted answers.
"""

import json
import os
import re

import numpy as np
import pytest
from scipy.special import logsumexp

from loading.presence import run_config_at

import run_scoring
from scoring import blimp
from scoring import nbest
from scoring.pll import Scorer
from scoring.pll import appendix_g_log_p
from tests.script_checks import error_line
from tests.tiny_runs import CLS
from tests.tiny_runs import EXCLUDED
from tests.tiny_runs import MASK
from tests.tiny_runs import SENTENCES
from tests.tiny_runs import SEP
from tests.tiny_runs import UNK
from tests.tiny_runs import VOCAB

ROOM = len(VOCAB) - len(EXCLUDED)  # most candidates appendix G can take
TOL = dict(rtol=1e-4, atol=1e-4)


def tokens_of(scorer, text):
  return scorer.tokenizer.tokenize_batch([text])[0][:scorer.max_seq_length
                                                     - 2]


# ----------------------------------------------------- reference loops
def one_row(ids, masked=None):
  ids = np.array([ids], np.int32)
  return {"input_ids": ids, "input_mask": np.ones_like(ids),
          "segment_ids": np.zeros_like(ids),
          "masked_input_ids": ids if masked is None else
                              np.array([masked], np.int32)}


def log_softmax(logits):
  logits = np.asarray(logits, np.float64)
  return logits - logsumexp(logits)


def reference_electric(model, tokens):
  """Electric section 3.2: PLL_t = -E(x)_t on the clean text."""
  f = one_row([CLS] + tokens + [SEP])
  hidden = model.pair.discriminator(f["input_ids"], f["input_mask"],
                               f["segment_ids"])
  energy = np.asarray(model.discriminator_predictions(hidden), np.float64)
  return [-energy[0, t] for t in range(1, len(tokens) + 1)]


def reference_script(model, tokens):
  """SCRIPT Eq. 7: log p(real_t) = log S / (S + 1), S = sum_v exp s_tv."""
  f = one_row([CLS] + tokens + [SEP])
  logits = np.asarray(model.vocab_logits(f["input_ids"], f), np.float64)
  out = []
  for t in range(1, len(tokens) + 1):
    log_s = logsumexp(logits[0, t])
    out.append(log_s - np.logaddexp(0.0, log_s))
  return out


def reference_mlm(model, tokens):
  """Salazar et al.: mask x_t, log softmax at t of x_t, one copy at a time."""
  out = []
  for t in range(1, len(tokens) + 1):
    ids = [CLS] + tokens + [SEP]
    original, ids[t] = ids[t], MASK
    f = one_row(ids)
    hidden = model.encoder(f["input_ids"], f["input_mask"], f["segment_ids"])
    logits = model.mlm_predictions(hidden, model.encoder.embeddings.token_table)
    out.append(log_softmax(np.asarray(logits)[0, t])[original])
  return out


def reference_electra(model, tokens, k, p_mask, added):
  """ELECTRA appendix G: p_data(x|c) ~ D p_G / (a (1 - D) + p_G) over the
  generator's top k (+ the original), normalised over those candidates.
  `added` records, per position, whether the original was not in the top k.
  """
  a = (1 - p_mask) / p_mask
  out = []
  for t in range(1, len(tokens) + 1):
    ids = [CLS] + tokens + [SEP]
    original = ids[t]
    masked = list(ids)
    masked[t] = MASK
    logits, _ = model.pair.generator(one_row(ids, masked), np.array([[t]]))
    log_pg = log_softmax(np.asarray(logits)[0, 0])
    ranked = [v for v in np.argsort(-log_pg, kind="stable")
              if v not in EXCLUDED]
    candidates = list(ranked[:k])
    added.append(original not in candidates)
    if added[-1]:
      candidates.append(original)
    s = {}
    for v in candidates:
      x = list(ids)
      x[t] = v
      f = one_row(x)
      hidden = model.pair.discriminator(f["input_ids"], f["input_mask"],
                                   f["segment_ids"])
      logit = float(np.asarray(model.discriminator_predictions(hidden))[0, t])
      d = 1.0 / (1.0 + np.exp(logit))  # p(original)
      p_g = np.exp(log_pg[v])
      s[v] = d * p_g / (a * (1 - d) + p_g)
    out.append(np.log(s[original] / sum(s.values())))
  return out


# --------------------------------------------------- Scorer vs reference
def check(scorer, reference, sentences=SENTENCES):
  results = scorer.score(sentences)
  assert [r.text for r in results] == sentences
  for r in results:
    tokens = tokens_of(scorer, r.text)
    assert r.token_ids == tokens
    want = reference(tokens)
    np.testing.assert_allclose(r.token_plls, want, **TOL)
    np.testing.assert_allclose(r.pll, np.sum(want), **TOL)
  return results


@pytest.mark.parametrize("name,reference", [
    ("electric", reference_electric), ("script", reference_script),
    ("mlm", reference_mlm)])
def test_pll_equals_the_slow_reference(runs, name, reference):
  data_dir, made = runs
  _, model = made[name]
  scorer = Scorer.from_run(os.path.join(data_dir, "models", name),
                           batch_size=3)
  results = check(scorer, lambda tokens: reference(model, tokens))
  assert results[2].token_ids == [] and results[2].pll == 0.0
  assert UNK in results[5].token_ids  # "zebra" is not in the vocabulary
  rows = sum(len(r.token_ids) for r in results)
  assert scorer.last_stats["rows"] == (rows if name == "mlm" else 6)


@pytest.mark.parametrize("name,k,sentences", [
    ("electra", 3, SENTENCES[:3] + SENTENCES[4:6]),
    ("electra", ROOM - 2, ["a big dog ran", "cats"]),
    ("electra_tt", 5, SENTENCES[1:3] + SENTENCES[4:6])])
def test_electra_appendix_g_equals_the_slow_reference(runs, name, k,
                                                      sentences):
  data_dir, made = runs
  h, model = made[name]
  scorer = Scorer.from_run(os.path.join(data_dir, "models", name),
                           batch_size=7, top_k=k)
  added = []
  check(scorer, lambda tokens: reference_electra(model, tokens, k,
                                                 h.mask_prob, added),
        sentences)
  # Both branches: the original added to the top k, and among them.
  if k == 3:
    assert any(added)
  if k == ROOM - 2:
    assert not all(added)


def test_generator_as_masked_lm_and_truncation(runs):
  data_dir, made = runs
  _, model = made["electra"]
  scorer = Scorer.from_run(os.path.join(data_dir, "models", "electra"),
                           method="mlm", max_seq_length=6, batch_size=4)

  def reference(tokens):
    out = []
    for t in range(1, len(tokens) + 1):
      ids = [CLS] + tokens + [SEP]
      masked = list(ids)
      masked[t] = MASK
      logits, _ = model.pair.generator(one_row(ids, masked), np.array([[t]]))
      out.append(log_softmax(np.asarray(logits)[0, 0])[ids[t]])
    return out

  results = check(scorer, reference, SENTENCES[:4])
  assert [r.truncated for r in results] == [True, False, False, True]
  assert len(results[0].token_ids) == 4


def test_appendix_g_formula_by_hand():
  """D = 1 - sigmoid(z); s = D p_G / (a (1 - D) + p_G), normalised over
  the valid candidates; a = 0 (ELECTRA 15%) leaves s = D."""
  p_g, z = np.array([0.5, 0.3, 0.2]), np.array([0.0, 1.0, -1.0])
  d = 1 / (1 + np.exp(z))
  for a in (2.0, 0.0):
    s = d * p_g / (a * (1 - d) + p_g)
    want = np.log(s[1] / (s[0] + s[1]))  # the third candidate is invalid
    got = appendix_g_log_p(np.log(p_g)[None], z[None],
                           np.array([[1, 1, 0]]), np.array([1]),
                           np.log(a) if a else -np.inf)
    np.testing.assert_allclose(got, [want], rtol=1e-12)
  np.testing.assert_allclose(np.exp(want), d[1] / (d[0] + d[1]))


def test_a_method_the_model_cannot_run_is_a_user_error(runs):
  from util.errors import UserError
  data_dir, _ = runs
  with pytest.raises(UserError, match="method electric cannot score"):
    Scorer.from_run(os.path.join(data_dir, "models", "mlm"),
                    method="electric")
  with pytest.raises(UserError, match=rf"top_k must be in \[1, {ROOM}\]"):
    Scorer.from_run(os.path.join(data_dir, "models", "electra"),
                    top_k=ROOM + 1)


# ---------------------------------------------------------------- BLiMP
# (good PLL, bad PLL) by paradigm; a tie is wrong. Right: p_one 1/3,
# p_two 2/2, p_three 1/2; phenomena: agreement 3/5, islands 1/2; 4/7.
BLIMP = {
    "p_one": ("agreement", [(-1, -2), (-3, -1), (-1, -1)]),
    "p_two": ("agreement", [(-2, -4), (-1, -1.5)]),
    "p_three": ("islands", [(-5, -4), (-2, -3)]),
}


def write_blimp(directory, table=None):
  os.makedirs(directory, exist_ok=True)
  for uid, (term, pairs) in BLIMP.items():
    lines = []
    for i, (good, bad) in enumerate(pairs):
      row = {"sentence_good": f"good {good} {uid} {i}",
             "sentence_bad": f"bad {bad} {uid} {i}",
             "linguistics_term": term, "field": "syntax"}
      if uid != "p_three":  # no UID: the file name is the paradigm
        row["UID"] = uid
      lines.append(json.dumps(row))
      if table is not None:
        table[row["sentence_good"]], table[row["sentence_bad"]] = good, bad
    with open(os.path.join(directory, f"{uid}.jsonl"), "w") as f:
      f.write("\n".join(lines[:1] + [""] + lines[1:]) + "\n")
  with open(os.path.join(directory, "README.md"), "w") as f:
    f.write("not data\n")
  return directory


def test_blimp_accuracy_by_paradigm_phenomenon_and_overall(tmp_path):
  table, calls = {}, []
  pairs = blimp.load_pairs(write_blimp(str(tmp_path), table))
  assert len(pairs) == 7

  def stub(sentences):
    calls.append(list(sentences))
    return [table[s] for s in sentences]

  r = blimp.evaluate(pairs, stub)
  assert len(calls) == 1 and sorted(calls[0]) == sorted(table)
  assert r["pairs"] == 7 and r["overall"] == pytest.approx(4 / 7)
  right = lambda group: {k: (round(v["accuracy"] * v["pairs"]), v["pairs"])
                         for k, v in r[group].items()}  # noqa: E731
  assert right("by_paradigm") == {"p_one": (1, 3), "p_two": (2, 2),
                                  "p_three": (1, 2)}
  assert right("by_phenomenon") == {"agreement": (3, 5), "islands": (1, 2)}
  assert "overall accuracy 57.14 (7 pairs)" in blimp.format_results(r)
  limited = blimp.load_pairs(str(tmp_path), limit=1)
  assert [p.paradigm for p in limited] == ["p_one", "p_three", "p_two"]


def test_blimp_bad_files_are_user_errors(tmp_path):
  from util.errors import UserError
  with pytest.raises(UserError, match="no \\*.jsonl files"):
    blimp.load_pairs(str(tmp_path))
  (tmp_path / "x.jsonl").write_text('{"sentence_good": "a"}\n')
  with pytest.raises(UserError, match=r"x.jsonl:1: no string field "
                                      "'sentence_bad'"):
    blimp.load_pairs(str(tmp_path))
  (tmp_path / "x.jsonl").write_text("{oops\n")
  with pytest.raises(UserError, match=r"x.jsonl:1: not valid JSON"):
    blimp.load_pairs(str(tmp_path))


# --------------------------------------------------------------- n-best
# dev: 8 reference words. Acoustic first-best: "the cat sad", "dog ran",
# "hello word" = 3 errors; the oracle 0; the system's score_with_lm picks
# hyp_1 each time = 1 error. With the PLLs below, acoustic + lambda * PLL
# fixes u3 for lambda > 0.125, u1 for > 0.25 and u2 for > 0.5.
DEV = {
    "u1": ("the cat sat", [("the cat sat", -2, -1), ("the cat sad", -1, -5),
                           ("a cat sat on", -3, -10)]),
    "u2": ("a dog ran", [("a dog ran", -5, -2), ("dog ran", -4, -4)]),
    "u3": ("hello world", [("hello word", -1, -6),
                           ("hello world", -1.5, -2)]),
}
# test: 4 words; at lambda 0.6 u5 is fixed, u4 is not.
TEST = {
    "u4": ("red bird", [("red bird", -3, -1), ("red bud", -1, -3)]),
    "u5": ("big cat", [("big hat", -1, -5), ("big cat", -1.2, -1)]),
}
PLLS = {t: p for table in (DEV, TEST) for _, hyps in table.values()
        for t, _, p in hyps}


def write_nbest(path, table, with_lm):
  out = {}
  for utt, (ref, hyps) in table.items():
    entry = {"ref": ref}
    for n in reversed(range(len(hyps))):  # key order must not matter
      text, score, _ = hyps[n]
      entry[f"hyp_{n + 1}"] = {"score": score, "text": text}
      if with_lm:
        entry[f"hyp_{n + 1}"]["score_with_lm"] = -n
    out[utt] = entry
  path.write_text(json.dumps(out))
  return str(path)


def test_nbest_wer_oracle_first_best_and_lambda_sweep(tmp_path):
  dev = nbest.load_nbest(write_nbest(tmp_path / "dev.json", DEV, True))
  test = nbest.load_nbest(write_nbest(tmp_path / "test.json", TEST, False))
  assert dev.hyps[0] == ["the cat sat", "the cat sad", "a cat sat on"]
  np.testing.assert_array_equal(dev.errors[:, :2], [[0, 1], [0, 1], [1, 0]])
  assert dev.errors[0, 2] == 2 and dev.ref_words == 8
  lambdas = [1.0, 0, 0.1, 0.2, 0.3, 0.6]
  r = nbest.evaluate(dev, test, lambda texts: [PLLS[t] for t in texts],
                     lambdas)
  assert r["sweep"] == [(0.0, 3 / 8), (0.1, 3 / 8), (0.2, 2 / 8),
                        (0.3, 1 / 8), (0.6, 0.0), (1.0, 0.0)]
  assert r["lambda"] == 0.6  # the smallest of the best
  assert r["dev"] == dict(first_best=3 / 8, rescored=0.0, oracle=0.0,
                          system_lm=1 / 8, utterances=3, file=dev.name)
  assert r["test"] == dict(first_best=2 / 4, rescored=1 / 4, oracle=0.0,
                           utterances=2, file=test.name)
  # The error-count WER the sweep uses is jiwer's corpus WER.
  for choice in ([0, 0, 0], [1, 1, 1], [2, 0, 1]):
    assert dev.wer(np.array(choice)) == pytest.approx(
        nbest.corpus_wer(dev.refs, dev.texts(choice)))
  table = nbest.format_results(r)
  assert "best lambda 0.6" in table and "system_lm" in table


def test_nbest_bad_files_are_user_errors(tmp_path):
  from util.errors import UserError
  bad = tmp_path / "bad.json"
  bad.write_text("[1, 2")
  with pytest.raises(UserError, match="bad.json: not valid JSON"):
    nbest.load_nbest(str(bad))
  bad.write_text(json.dumps({"u": {"ref": "a", "hyp_1": {"text": "a"}}}))
  with pytest.raises(UserError, match="utterance u, hyp_1: needs a string "
                                      "'text' and a numeric 'score'"):
    nbest.load_nbest(str(bad))
  bad.write_text(json.dumps({"u": {"ref": "a"}}))
  with pytest.raises(UserError, match="utterance u has no hypotheses"):
    nbest.load_nbest(str(bad))


# ------------------------------------------------------------------ CLI
def cli(runs, *argv, model="electric"):
  data_dir, _ = runs
  return run_scoring.main(["--data-dir", data_dir, "--model-name", model,
                           *argv])


def test_cli_scores_sentences_and_blimp(runs, tmp_path, capsys,
                                              monkeypatch):
  data_dir, made = runs
  _, model = made["electric"]
  monkeypatch.setattr("sys.stdin", __import__("io").StringIO(
      "the cat sat on the mat\n\na big dog ran\n"))
  results = cli(runs, "--batch-size", "2")
  out, err = capsys.readouterr()
  assert out.splitlines()[0] == "pll\ttokens\tsentence"
  assert [line.split("\t")[2] for line in out.splitlines()[1:]] == [
      "the cat sat on the mat", "", "a big dog ran"]
  assert re.search(r"scored 3 sentences .* sentences/s \(electric\)", err)
  tokens = vocab_tokenizer(data_dir).tokenize_batch(["a big dog ran"])[0]
  assert out.splitlines()[3].split("\t")[1] == str(len(tokens))
  assert float(out.splitlines()[3].split("\t")[0]) == pytest.approx(
      sum(reference_electric(model, tokens)), abs=1e-3)

  source = tmp_path / "in.txt"
  source.write_text("they saw it\n")
  cli(runs, "--input-file", str(source), "--per-token", "--output-file",
      str(tmp_path / "out.jsonl"), model="script")
  row = json.loads((tmp_path / "out.jsonl").read_text())
  assert row["token_strings"] == ["they", "saw", "it"]
  assert row["pll"] == pytest.approx(sum(row["token_plls"]))

  results = cli(runs, "--mode", "blimp", "--blimp-dir",
                write_blimp(str(tmp_path / "blimp")), "--results-file",
                str(tmp_path / "blimp.json"))
  assert results["pairs"] == 7
  assert json.loads((tmp_path / "blimp.json").read_text())["pairs"] == 7
  assert "sentences/s" in capsys.readouterr().out


def test_cli_jsonl_is_a_labelled_row_per_line_in_nats(runs, capsys,
                                                      monkeypatch):
  """--format jsonl: one object per input line, blank lines kept; the PLL
  is the sum of natural-log token probabilities (the masked LM's log
  softmax here)."""
  data_dir, made = runs
  _, model = made["mlm"]
  monkeypatch.setattr("sys.stdin", __import__("io").StringIO(
      "a big dog ran\n\nthe cat sat on the mat\n"))
  cli(runs, "--format", "jsonl", model="mlm")
  rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
  assert [set(r) for r in rows] == [
      {"sentence", "pll", "tokens", "truncated"}] * 3
  assert [r["sentence"] for r in rows] == [
      "a big dog ran", "", "the cat sat on the mat"]
  tokens = vocab_tokenizer(data_dir).tokenize_batch(["a big dog ran"])[0]
  assert rows[0]["tokens"] == len(tokens) and rows[1]["tokens"] == 0
  assert rows[0]["pll"] == pytest.approx(sum(reference_mlm(model, tokens)),
                                         abs=1e-3)
  assert rows[0]["pll"] < 0 and rows[1]["pll"] == 0


def test_cli_nbest(runs, tmp_path, capsys):
  results = cli(runs, "--mode", "nbest", "--nbest-dev",
                write_nbest(tmp_path / "dev.json", DEV, True),
                "--nbest-test", write_nbest(tmp_path / "t.json", TEST, False),
                "--lambdas", "0:1:0.5")
  assert [lam for lam, _ in results["sweep"]] == [0.0, 0.5, 1.0]
  assert results["dev"]["oracle"] == 0.0
  assert "first_best" in capsys.readouterr().out


def vocab_tokenizer(data_dir):
  from util.tokenization import load_tokenizer
  return load_tokenizer(os.path.join(data_dir, "vocab.txt"))


def expect_error(capsys, argv, match):
  line = error_line(run_scoring.main, argv, capsys)
  assert re.search(match, line), line


def test_cli_errors_are_one_line(runs, tmp_path, capsys):
  data_dir, _ = runs
  base = ["--data-dir", data_dir, "--model-name", "electric"]
  empty = tmp_path / "empty.txt"
  empty.write_text("")
  broken = tmp_path / "broken"
  broken.mkdir()
  (broken / "a.jsonl").write_text("{oops\n")
  for argv, match in [
      ([], r"no model: pass --data-dir and --model-name"),
      (["--data-dir", data_dir, "--model-name", "missing", "--input-file",
        str(empty)], r"no sentences in"),
      (["--data-dir", data_dir, "--model-name", "missing"] +
       ["--input-file", str(tmp_path / "no.txt")], r"input_file not found"),
      (base + ["--mode", "poems"], r"mode must be one of sentences"),
      (base + ["--mode", "blimp"], r"needs --blimp-dir"),
      (base + ["--mode", "blimp", "--blimp-dir", str(broken)],
       r"a.jsonl:1: not valid JSON"),
      (base + ["--mode", "nbest", "--nbest-dev", "nope.json"],
       r"nbest_dev not found: nope.json"),
      (base + ["--mode", "nbest", "--nbest-dev", str(empty),
               "--lambdas", "1:0:0.1"], r"lambdas must be 'start:stop:step'"),
      (base + ["--top-k", "0"], r"'top_k' must be > 0"),
      (base + ["--batch-size", "x"], r"'batch_size' expects int"),
      (base + ["--hparams", '{"topk": 3}'], r"unknown hparam 'topk'"),
      (base + ["--method", "bert"], r"method must be one of"),
      (base + ["--format", "csv"], r"format must be one of tsv, jsonl"),
      (base + ["--mode", "blimp", "--format", "jsonl"],
       r"--format applies to --mode sentences, not blimp"),
      (base + ["--output-file", str(tmp_path / "no" / "out.tsv")],
       r"output_file: folder .*/no does not exist"),
  ]:
    expect_error(capsys, argv, match)
  source = tmp_path / "in.txt"
  source.write_text("a cat\n")
  size = run_config_at(os.path.join(data_dir, "models", "electric")).vocab_size
  plain_vocab = tmp_path / "plain_vocab.txt"
  plain_vocab.write_text("".join(f"tok{i}\n" for i in range(size)))
  model_errors = [
      (["--model-name", "missing"], r"no checkpoint found"),
      (["--model-name", "mlm", "--method", "electric"],
       r"method electric cannot score a model pretrained with objective "
       r"mlm \(its own: mlm\)"),
      (["--model-name", "electric", "--max-seq-length", "1024"],
       r"max_seq_length 1024 exceeds the model's 512 positions"),
      # As many entries as the model's vocab (the early size check passes),
      # none of them special.
      (["--model-name", "electric", "--vocab-file", str(plain_vocab)],
       r"lacks special token"),
      (["--model-name", "electric", "--vocab-file", str(source)],
       r"has 1 entries but the pretrained model has \d+"),
  ]
  for argv, match in model_errors:
    expect_error(capsys, ["--data-dir", data_dir, "--input-file",
                          str(source), *argv], match)
