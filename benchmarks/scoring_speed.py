"""PLL scoring speed: one-pass (Electric, SCRIPT) vs n-pass masked-LM
scoring (Salazar et al.) and ELECTRA's appendix G, on the same sentences,
beside transformers' ElectraForMaskedLM n-pass PLL in the same process.

  python benchmarks/scoring_speed.py [--sentences 200] [--model-size tiny]
      [--methods electric,script,mlm,script_mlm,electra,hf_mlm,hf_mlm_at_mask]
      [--top-k 10] [--threads 2] [--json out.json]

Sentences: the first --sentences of BLiMP (good and bad of the first pairs
of each paradigm, round robin), else lines of sample_data/corpus. Models:
randomly initialised (speed does not depend on the weights), BERT WordPiece
vocabulary (sample_data/vocab.txt). Each method is timed warm (after one
untimed pass, which traces its tf.functions), best of --repeats.
  script_mlm = the SCRIPT network scored n-pass through its masked LM: the
  same weights as `script`, so their ratio is the pure one-pass gain.
  hf_mlm = transformers' ElectraForMaskedLM (PyTorch CPU, fp32, --threads
  threads) of the same sizes as our `mlm` model (model/config.py preset,
  same vocabulary), scored as mlm-scoring does: BertTokenizerFast on the
  same vocab.txt, one copy of the sentence per token with that token
  masked, copies batched (--batch-size rows, sorted by length like ours,
  padded to the batch's longest), log softmax of the full logits at the
  masked position. hf_mlm_at_mask = the same, but the head (and its
  vocabulary projection) run at the masked position only, as ours does.
The summary prints each of ours / hf_mlm and / hf_mlm_at_mask with the
CPU kind (util.machine.cpu_kind), also in each --json entry ("machine").
"""

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run as a script: make the repo importable
  sys.path.insert(0, ROOT)

from benchmarks import OMP_WAIT_POLICIES  # noqa: E402
from benchmarks import set_omp_wait_policy  # noqa: E402
from benchmarks import write_json  # noqa: E402
from util.machine import cpu_kind  # noqa: E402

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
# transformers (PyTorch) peers: method name -> what it is
HF_METHODS = {
    "hf_mlm": "transformers MLM, n passes",
    "hf_mlm_at_mask": "transformers MLM, head at mask",
}


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--sentences", type=int, default=200)
  p.add_argument("--blimp-dir", default=os.path.join(
      ROOT, "..", "shared", "data", "blimp"))
  p.add_argument("--vocab-file",
                 default=os.path.join(ROOT, "sample_data", "vocab.txt"))
  p.add_argument("--model-size", default="tiny")
  p.add_argument("--methods", default=",".join(list(METHODS) +
                                                list(HF_METHODS)))
  p.add_argument("--batch-size", type=int, default=128)
  p.add_argument("--top-k", type=int, default=10)
  p.add_argument("--repeats", type=int, default=2)
  p.add_argument("--threads", type=int, default=2,
                 help="TF intra-op threads (0 = TF's default)")
  p.add_argument("--omp-wait-policy", default="passive",
                 choices=OMP_WAIT_POLICIES,
                 help="PyTorch's OpenMP wait policy (benchmarks/__init__.py)")
  p.add_argument("--hf-precisions", default="float32,bfloat16",
                 help="transformers' precisions (bfloat16: torch's CPU "
                      "autocast); the fastest counts")
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


def time_hf(name, args, sentences, precision="float32"):
  """transformers' ElectraForMaskedLM n-pass PLL (mlm-scoring's way) of
  the same sentences; the same stats as Scorer.last_stats. precision
  bfloat16: under torch's CPU autocast."""
  import contextlib
  import numpy as np
  import torch
  import transformers
  from model.config import get_model_config
  transformers.logging.set_verbosity_error()
  torch.set_num_threads(args.threads or os.cpu_count())
  torch.manual_seed(0)
  from benchmarks.hf_tokenizer import bert_tokenizer_fast
  tok = bert_tokenizer_fast(args.vocab_file, do_lower_case=True)
  from interop import hf
  c = get_model_config(args.model_size, tok.vocab_size)  # = our mlm's
  model = transformers.ElectraForMaskedLM(transformers.ElectraConfig(
      **hf.config_fields(c)))
  model.eval()
  at_mask = name == "hf_mlm_at_mask"

  def score():
    start = time.perf_counter()
    ids = tok(sentences, truncation=True, max_length=128)["input_ids"]
    rows = [(s, p) for s, row in enumerate(ids)
            for p in range(1, len(row) - 1)]
    rows.sort(key=lambda r: len(ids[r[0]]))  # length-sorted, as ours
    plls = [np.zeros(len(row) - 2) for row in ids]
    autocast = (torch.autocast("cpu", dtype=torch.bfloat16)
                if precision == "bfloat16" else contextlib.nullcontext())
    with torch.inference_mode(), autocast:
      for begin in range(0, len(rows), args.batch_size):
        batch = rows[begin:begin + args.batch_size]
        width = max(len(ids[s]) for s, _ in batch)
        x = torch.zeros((len(batch), width), dtype=torch.long)
        mask = torch.zeros_like(x)
        for i, (s, _) in enumerate(batch):
          x[i, :len(ids[s])] = torch.tensor(ids[s])
          mask[i, :len(ids[s])] = 1
        positions = torch.tensor([p for _, p in batch])
        arange = torch.arange(len(batch))
        targets = x[arange, positions].clone()
        x[arange, positions] = tok.mask_token_id
        if at_mask:
          hidden = model.electra(input_ids=x, attention_mask=mask)[0]
          logits = model.generator_lm_head(model.generator_predictions(
              hidden[arange, positions]))
        else:
          logits = model(input_ids=x, attention_mask=mask).logits[
              arange, positions]
        values = torch.log_softmax(logits.float(), -1)[arange, targets]
        for (s, p), v in zip(batch, values.tolist()):
          plls[s][p - 1] = v
    return dict(sentences=len(sentences), rows=len(rows),
                tokens=sum(len(r) - 2 for r in ids),
                seconds=time.perf_counter() - start)

  score()  # warm
  best = min((score() for _ in range(args.repeats)),
             key=lambda s: s["seconds"])
  return dict(best, method=name, what=HF_METHODS[name],
              sentences_per_s=best["sentences"] / best["seconds"],
              rows_per_sentence=best["rows"] / best["sentences"])


def format_table(entries):
  base = {e["method"]: e["sentences_per_s"] for e in entries}
  ref, hf = base.get("mlm"), base.get("hf_mlm")
  machine = cpu_kind()
  lines = [f"{'method':<14} {'estimator':<31} {'rows/sent':>9} "
           f"{'sent/s':>9} {'vs mlm':>7} {'vs hf_mlm':>9}   [{machine}]"]
  for e in entries:
    ratio = f"{e['sentences_per_s'] / ref:6.1f}x" if ref else "      -"
    vs_hf = f"{e['sentences_per_s'] / hf:8.1f}x" if hf else "        -"
    lines.append(f"{e['method']:<14} {e['what']:<31} "
                 f"{e['rows_per_sentence']:9.1f} "
                 f"{e['sentences_per_s']:9.1f} {ratio:>7} {vs_hf:>9}")
  if "script" in base and "script_mlm" in base:
    lines.append(f"SCRIPT one pass / SCRIPT n passes (same network): "
                 f"{base['script'] / base['script_mlm']:.1f}x")
  peers = [m for m in HF_METHODS if m in base]
  if peers:
    lines.append(f"summary: ours / transformers ElectraForMaskedLM n-pass "
                 f"PLL ({', '.join(peers)}), sentences/s; CPU: {machine}")
    for e in entries:
      if e["method"] not in HF_METHODS:
        ratios = ", ".join(f"/ {m} {e['sentences_per_s'] / base[m]:6.2f}x"
                           for m in peers)
        lines.append(f"  {e['method']:<11} {ratios}  [{machine}]")
  return "\n".join(lines)


def main(argv=None):
  args = parse_args(argv)
  print(f"PyTorch's OpenMP wait policy: "
        f"{set_omp_wait_policy(args.omp_wait_policy)}")
  if args.threads:
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
  from util.tokenization import load_tokenizer
  tokenizer = load_tokenizer(args.vocab_file)
  sentences, source = load_sentences(args)
  tokens = sum(len(t) for t in tokenizer.tokenize_batch(sentences))
  print(cpu_kind(), flush=True)
  print(f"{len(sentences)} {source} sentences, {tokens} tokens "
        f"({tokens / len(sentences):.1f}/sentence); {args.model_size} "
        f"models, vocab {tokenizer.vocab_size}, batch {args.batch_size}, "
        f"top_k {args.top_k}, {args.threads or 'default'} threads",
        flush=True)
  entries = []
  for name in [m.strip() for m in args.methods.split(",") if m.strip()]:
    if name in HF_METHODS:
      timed = [dict(time_hf(name, args, sentences, p), precision=p)
               for p in args.hf_precisions.split(",")]
      entries.append(min(timed, key=lambda e: e["seconds"]))
    elif name in METHODS:
      entries.append(time_method(name, args, tokenizer, sentences))
    else:
      sys.exit(f"error: unknown method {name} (known: "
               f"{', '.join(list(METHODS) + list(HF_METHODS))})")
    entry = entries[-1]
    precision = f" ({entry['precision']})" if "precision" in entry else ""
    print(f"  {name}: {entry['sentences_per_s']:.1f} sentences/s"
          f"{precision}  [{cpu_kind()}]", flush=True)
  print(format_table(entries), flush=True)
  for entry in entries:
    entry["machine"] = cpu_kind()
  write_json(args.json, entries)
  return entries


if __name__ == "__main__":
  main()
