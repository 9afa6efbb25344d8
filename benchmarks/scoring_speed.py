"""PLL scoring speed: one-pass (Electric, SCRIPT) vs n-pass masked-LM
scoring (Salazar et al.) and ELECTRA's appendix G, on the same sentences.

  python benchmarks/scoring_speed.py [--sentences 200] [--model-size tiny]
      [--methods electric,script,mlm,script_mlm,electra] [--top-k 10]
      [--threads 2] [--json out.json]

Sentences: the first --sentences of BLiMP (good and bad of the first pairs
of each paradigm, round robin), else lines of sample_data/corpus. Models:
randomly initialised (speed does not depend on the weights), BERT WordPiece
vocabulary (sample_data/vocab.txt). Each method is timed warm (after one
untimed pass, which traces its tf.functions), best of --repeats.
  script_mlm = the SCRIPT network scored n-pass through its masked LM: the
  same weights as `script`, so their ratio is the pure one-pass gain.
"""

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run as a script: make the repo importable
  sys.path.insert(0, ROOT)

from benchmarks import write_json  # noqa: E402

from util.tf_quiet import import_tensorflow  # noqa: E402

tf = import_tensorflow(with_text=True)

# method name -> (objective, Scorer method, what it is)
METHODS = {
    "electric": ("electric", "electric", "Electric, one pass"),
    "script": ("script", "script", "SCRIPT, one pass"),
    "mlm": ("mlm", "mlm", "BERT MLM, n passes"),
    "script_mlm": ("script", "mlm", "SCRIPT as MLM, n passes"),
    "electra": ("electra", "electra", "ELECTRA app. G, n(k+1) passes"),
}


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--sentences", type=int, default=200)
  p.add_argument("--blimp-dir", default="/work/shared/data/blimp")
  p.add_argument("--vocab-file",
                 default=os.path.join(ROOT, "sample_data", "vocab.txt"))
  p.add_argument("--model-size", default="tiny")
  p.add_argument("--methods", default=",".join(METHODS))
  p.add_argument("--batch-size", type=int, default=128)
  p.add_argument("--top-k", type=int, default=10)
  p.add_argument("--repeats", type=int, default=2)
  p.add_argument("--threads", type=int, default=2,
                 help="TF intra-op threads (0 = TF's default)")
  p.add_argument("--json", default="")
  return p.parse_args(argv)


def load_sentences(args):
  """BLiMP good/bad sentences, one pair per paradigm per round."""
  if os.path.isdir(args.blimp_dir):
    from scoring.blimp import load_pairs
    by_paradigm = {}
    for pair in load_pairs(args.blimp_dir, limit=args.sentences):
      by_paradigm.setdefault(pair.paradigm, []).append(pair)
    out, rank = [], 0
    while len(out) < args.sentences and rank < args.sentences:
      for pairs in by_paradigm.values():
        if rank < len(pairs):
          out += [pairs[rank].good, pairs[rank].bad]
      rank += 1
    return out[:args.sentences], "BLiMP"
  path = os.path.join(ROOT, "sample_data", "corpus", "wiki_sample.txt")
  with open(path, encoding="utf-8") as f:
    lines = [line.strip() for line in f if len(line.split()) > 3]
  return lines[:args.sentences], "sample_data/corpus"


def build_scorer(name, args, tokenizer):
  from pretrain.config import PretrainingConfig
  from pretrain.objectives import build_model
  from scoring.pll import Scorer
  objective, method, _ = METHODS[name]
  h = PretrainingConfig(model_size=args.model_size, objective=objective,
                        vocab_size=tokenizer.vocab_size, data_dir="/unused",
                        model_name=name)
  h.validate()
  model = build_model(h, special_ids=tokenizer.special_ids.values())
  model.build_variables()
  return Scorer(model, h, tokenizer, method=method,
                batch_size=args.batch_size, top_k=args.top_k)


def time_method(name, args, tokenizer, sentences):
  scorer = build_scorer(name, args, tokenizer)
  scorer.score(sentences)  # traces the tf.functions
  best = None
  for _ in range(args.repeats):
    scorer.score(sentences)
    if best is None or scorer.last_stats["seconds"] < best["seconds"]:
      best = dict(scorer.last_stats)
  return dict(best, method=name, what=METHODS[name][2],
              sentences_per_s=best["sentences"] / best["seconds"],
              rows_per_sentence=best["rows"] / best["sentences"])


def format_table(entries):
  base = {e["method"]: e["sentences_per_s"] for e in entries}
  ref = base.get("mlm")
  lines = [f"{'method':<11} {'estimator':<30} {'rows/sent':>9} "
           f"{'sent/s':>9} {'vs mlm':>7}"]
  for e in entries:
    ratio = f"{e['sentences_per_s'] / ref:6.1f}x" if ref else "      -"
    lines.append(f"{e['method']:<11} {e['what']:<30} "
                 f"{e['rows_per_sentence']:9.1f} "
                 f"{e['sentences_per_s']:9.1f} {ratio:>7}")
  if "script" in base and "script_mlm" in base:
    lines.append(f"SCRIPT one pass / SCRIPT n passes (same network): "
                 f"{base['script'] / base['script_mlm']:.1f}x")
  return "\n".join(lines)


def main(argv=None):
  args = parse_args(argv)
  if args.threads:
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
  from util.tokenization import load_tokenizer
  tokenizer = load_tokenizer(args.vocab_file)
  sentences, source = load_sentences(args)
  tokens = sum(len(t) for t in tokenizer.tokenize_batch(sentences))
  print(f"{len(sentences)} {source} sentences, {tokens} tokens "
        f"({tokens / len(sentences):.1f}/sentence); {args.model_size} "
        f"models, vocab {tokenizer.vocab_size}, batch {args.batch_size}, "
        f"top_k {args.top_k}, {args.threads or 'default'} threads",
        flush=True)
  entries = []
  for name in [m.strip() for m in args.methods.split(",") if m.strip()]:
    if name not in METHODS:
      sys.exit(f"error: unknown method {name} (known: {', '.join(METHODS)})")
    entries.append(time_method(name, args, tokenizer, sentences))
    print(f"  {name}: {entries[-1]['sentences_per_s']:.1f} sentences/s",
          flush=True)
  print(format_table(entries), flush=True)
  write_json(args.json, entries)
  return entries


if __name__ == "__main__":
  main()
