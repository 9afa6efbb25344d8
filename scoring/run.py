"""run_scoring.py's work: its inputs read and checked before the model
loads, then scored by mode, with the speed and the output it prints."""

import io
import json
import sys
import time

from scoring import blimp
from scoring import nbest
from scoring.config import sentences_said
from util import outputs
from util import text_files
from util.errors import UserError


def read_lines(path):
  """One sentence a line, from a file or stdin ("" or "-"); strict UTF-8
  (the bytes, not the locale's decoding of them)."""
  if path in ("", "-"):
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # a text stream put in its place (tests)
      stream = io.BytesIO(sys.stdin.read().encode("utf-8",
                                                  "surrogateescape"))
    lines = text_files.split_lines(text_files.read_stream(stream, "stdin"))
  else:
    lines = text_files.read_lines(path)
  where = path if path not in ("", "-") else "stdin"
  if not lines:
    raise UserError(f"no sentences in {where}")
  if not any(line.strip() for line in lines):
    raise UserError(f"no sentences in {where}: its {len(lines)} line(s) are "
                    "all blank")
  return lines


def load_inputs(config):
  """Reads and checks the inputs before any model is loaded."""
  if config.mode == "sentences":
    return read_lines(config.input_file)
  if config.mode == "blimp":
    return blimp.load_pairs(config.blimp_dir, config.blimp_limit)
  return [nbest.load_nbest(path, config.nbest_limit) if path else None
          for path in (config.nbest_dev, config.nbest_test)]


def texts_of(mode, inputs):
  """The distinct texts a mode scores (blimp and nbest score each once)."""
  if mode == "sentences":
    return inputs
  if mode == "blimp":
    return sorted({p.good for p in inputs} | {p.bad for p in inputs})
  return sorted({t for x in inputs if x is not None for h in x.hyps
                 for t in h})


def timed_scorer(scorer, log):
  """pll_fn for blimp/nbest that reports progress (rate, ETA on stderr)
  and sentences/s."""
  def pll_fn(sentences):
    plls = scorer.sentence_plls(sentences, log=sys.stderr)
    report_speed(scorer, log)
    return plls
  return pll_fn


def report_speed(scorer, log):
  s = scorer.last_stats
  rate = s["sentences"] / max(s["seconds"], 1e-9)
  print(f"scored {sentences_said(s['sentences'])} ({s['tokens']} tokens, "
        f"{s['rows']} model rows) in {s['seconds']:.2f}s: {rate:.1f} "
        f"sentences/s ({scorer.method})", file=log, flush=True)
  if s["truncated"]:
    print(f"note: {s['truncated']} sentences were truncated to "
          f"max_seq_length {scorer.max_seq_length}", file=log, flush=True)


TSV_HEADER = "pll\ttokens\tsentence"


def write_sentences(scorer, results, config):
  """To stdout, or to output_file whole (a temporary file, renamed)."""
  tsv = config.format == "tsv" and not config.per_token

  def write(out):
    if tsv:
      out.write(TSV_HEADER + "\n")
    for r in results:
      if tsv:
        out.write(f"{r.pll:.4f}\t{len(r.token_ids)}\t{r.text}\n")
        continue
      row = {"sentence": r.text, "pll": r.pll, "tokens": len(r.token_ids),
             "truncated": r.truncated}
      if config.per_token:
        row.update(token_strings=scorer.token_strings(r.token_ids),
                   token_plls=[float(x) for x in r.token_plls])
      out.write(json.dumps(row) + "\n")

  if config.output_file:
    outputs.write_atomic(config.output_file, write)
  else:
    write(sys.stdout)


def score(config, inputs):
  """Loads the model (TensorFlow) and scores `inputs` by config.mode;
  returns the results."""
  from scoring.pll import Scorer  # imports TensorFlow
  start = time.perf_counter()
  scorer = Scorer.from_run(
      config.model_path, config.vocab_file, config.data_dir,
      method=config.method, batch_size=config.batch_size,
      max_seq_length=config.max_seq_length, top_k=config.top_k,
      inference_engine=config.inference_engine,
      inference_precision=config.inference_precision)
  log = sys.stderr if config.mode == "sentences" else sys.stdout
  # The first line says what this will cost, and what is faster.
  print(
      f"loaded {scorer.pretrain_config.objective} model from "
      f"{config.model_path} "
      f"in {time.perf_counter() - start:.1f}s; " +
      scorer.cost(texts_of(config.mode, inputs)),
      file=log,
      flush=True)
  if config.mode == "sentences":
    results = scorer.score(inputs, log=sys.stderr)
    report_speed(scorer, log)
    empty = sum(len(r.token_ids) == 0 for r in results)
    if empty:  # kept, one output line per input line, but said
      print(f"note: {empty} line(s) have no tokens (blank); their PLL is 0",
            file=sys.stderr, flush=True)
    write_sentences(scorer, results, config)
    return results
  if config.mode == "blimp":
    results = blimp.evaluate(inputs, timed_scorer(scorer, log))
    print(blimp.format_results(results), flush=True)
  else:
    results = nbest.evaluate(inputs[0], inputs[1],
                             timed_scorer(scorer, log), config.lambda_grid)
    print(nbest.format_results(results), flush=True)
  if config.results_file:
    outputs.write_text(config.results_file, json.dumps(results, indent=2))
  return results
