"""Scores text with a pretrained model's pseudo-log-likelihood (PLL).

  python run_scoring.py --data-dir DATA_DIR --model-name NAME \
      [--input-file sentences.txt] [--per-token]        # or stdin
  python run_scoring.py --data-dir DATA_DIR --model-name NAME \
      --mode blimp --blimp-dir BLIMP_DIR [--blimp-limit 100]
  python run_scoring.py --data-dir DATA_DIR --model-name NAME \
      --mode nbest --nbest-dev dev.am.json --nbest-test test.am.json

Loads the pretraining run DATA_DIR/models/NAME/ (run_pretraining.py's
pretrain_config.json and latest checkpoint) and scores with its objective's
estimator: Electric and SCRIPT in one pass, a masked LM with one pass per
token, ELECTRA by appendix G (--method and --top-k; see scoring/pll.py).
Sentences mode prints `PLL<TAB>tokens<TAB>sentence` per line (JSON lines
with --per-token); blimp and nbest print tables (--results-file: JSON).
"""

import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from scoring.config import load_config  # noqa: E402
from util.errors import UserError  # noqa: E402
from util.errors import main_guard  # noqa: E402


def read_lines(path):
  """One sentence a line, from a file or stdin ("" or "-")."""
  try:
    if path in ("", "-"):
      text = sys.stdin.read()
    else:
      from util import storage
      text = storage.read_text(path)
  except UnicodeDecodeError:
    raise UserError(f"{path or 'stdin'}: not UTF-8 text") from None
  lines = text.splitlines()
  if not lines:
    raise UserError(f"no sentences in {path or 'stdin'}")
  return lines


def load_inputs(config):
  """Reads and checks the inputs before any model is loaded."""
  if config.mode == "sentences":
    return read_lines(config.input_file)
  if config.mode == "blimp":
    from scoring import blimp
    return blimp.load_pairs(config.blimp_dir, config.blimp_limit)
  from scoring import nbest
  return [nbest.load_nbest(path, config.nbest_limit) if path else None
          for path in (config.nbest_dev, config.nbest_test)]


def timed_scorer(scorer, log):
  """pll_fn for blimp/nbest that reports progress and sentences/s."""
  def progress(done, total):
    if total > done:
      print(f"  scored {done}/{total} sentences", file=sys.stderr,
            flush=True)

  def pll_fn(sentences):
    plls = scorer.sentence_plls(sentences, progress)
    report_speed(scorer, log)
    return plls
  return pll_fn


def report_speed(scorer, log):
  s = scorer.last_stats
  rate = s["sentences"] / max(s["seconds"], 1e-9)
  print(f"scored {s['sentences']} sentences ({s['tokens']} tokens, "
        f"{s['rows']} model rows) in {s['seconds']:.2f}s: {rate:.1f} "
        f"sentences/s ({scorer.method})", file=log, flush=True)
  if s["truncated"]:
    print(f"note: {s['truncated']} sentences were truncated to "
          f"max_seq_length {scorer.max_seq_length}", file=log, flush=True)


def write_sentences(scorer, results, config):
  out = (open(config.output_file, "w", encoding="utf-8")
         if config.output_file else sys.stdout)
  try:
    for r in results:
      if config.per_token:
        out.write(json.dumps({
            "sentence": r.text, "pll": r.pll, "tokens": len(r.token_ids),
            "truncated": r.truncated,
            "token_strings": scorer.token_strings(r.token_ids),
            "token_plls": [float(x) for x in r.token_plls]}) + "\n")
      else:
        out.write(f"{r.pll:.4f}\t{len(r.token_ids)}\t{r.text}\n")
  finally:
    if out is not sys.stdout:
      out.close()


@main_guard
def main(argv=None):
  config = load_config(argv)
  inputs = load_inputs(config)
  from util.tf_quiet import import_tensorflow
  import_tensorflow(with_text=True)
  from scoring.pll import Scorer  # TF import after the checks above
  start = time.perf_counter()
  scorer = Scorer.from_run(
      config.model_path, config.vocab_file, config.data_dir,
      method=config.method, batch_size=config.batch_size,
      max_seq_length=config.max_seq_length, top_k=config.top_k)
  log = sys.stderr if config.mode == "sentences" else sys.stdout
  print(f"loaded {scorer.hparams.objective} model from {config.model_path} "
        f"in {time.perf_counter() - start:.1f}s; method {scorer.method}"
        + (f", top_k {scorer.top_k}" if scorer.method == "electra" else ""),
        file=log, flush=True)
  if config.mode == "sentences":
    results = scorer.score(inputs)
    report_speed(scorer, log)
    write_sentences(scorer, results, config)
    return results
  if config.mode == "blimp":
    from scoring import blimp
    results = blimp.evaluate(inputs, timed_scorer(scorer, log))
    print(blimp.format_results(results), flush=True)
  else:
    from scoring import nbest
    results = nbest.evaluate(inputs[0], inputs[1],
                             timed_scorer(scorer, log), config.lambda_grid)
    print(nbest.format_results(results), flush=True)
  if config.results_file:
    from util import storage
    storage.write_text_atomic(config.results_file,
                              json.dumps(results, indent=2))
  return results


if __name__ == "__main__":
  main()
