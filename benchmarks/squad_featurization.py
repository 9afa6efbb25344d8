"""SQuAD featurization speed: our sliding-window featurization beside
transformers' fast tokenizer on the same dev file, in one process.

  python benchmarks/squad_featurization.py [--squad-file dev-v1.1.json]
      [--vocab-file vocab.txt] [--limit 0] [--max-seq-length 384]
      [--doc-stride 128] [--max-query-length 64] [--hf-stride 128]
      [--repeats 2] [--json out.json]

  quick check:  --limit 500 --repeats 1

Figures, in examples (questions) per second, on the same questions and
contexts (the official SQuAD 1.1 dev file from ../shared/data by default,
the BERT uncased vocabulary):
  ours featurize        the product path: finetune/qa/qa_tasks.py
                        QATask.featurize (batched WordPiece of every
                        distinct context word, questions and answers;
                        windows; answer positions; max-context flags;
                        token -> word / character maps for the scorer),
                        on the examples QATask.get_examples read
  ours read + featurize the same plus reading the JSON into examples
  hf tokenizer          BertTokenizerFast on the same vocab.txt (built by
                        benchmarks/hf_tokenizer.py: transformers 5 takes
                        `vocab=`, not `vocab_file=`) called as
                        transformers' run_qa.py calls it: (question,
                        context) pairs, truncation="only_second",
                        max_length, stride=--hf-stride,
                        return_overflowing_tokens=True,
                        return_offsets_mapping=True, padding="max_length"
  hf tokenizer + run_qa the tokenizer call plus run_qa.py's Python
                        post-processing: answer start/end token positions
                        from the offsets (prepare_train_features) and
                        the example ids / context-only offsets its
                        post-processing needs (prepare_validation_features)
                        - what our featurize's one pass also produces
Note the stride conventions differ: ours (BERT's doc_stride) is the step
between window starts, transformers' `stride` the overlap between windows;
each side's rows are printed. Each figure is warm (one untimed run first:
TensorFlow graph building, the tokenizer's vocabulary) and the best of
--repeats. The summary prints ours / transformers with the CPU kind.
"""

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run as a script: make the repo importable
  sys.path.insert(0, ROOT)

from benchmarks import write_json  # noqa: E402
from util.machine import cpu_kind  # noqa: E402
from util.tf_quiet import import_tensorflow  # noqa: E402

tf = import_tensorflow(with_text=True)

SHARED = os.path.join(os.path.dirname(ROOT), "shared", "data")


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--squad-file",
                 default=os.path.join(SHARED, "squad", "dev-v1.1.json"))
  p.add_argument("--vocab-file", default=os.path.join(
      SHARED, "vocab", "bert-base-uncased-vocab.txt"))
  p.add_argument("--limit", type=int, default=0,
                 help="questions (0 = the whole file)")
  p.add_argument("--max-seq-length", type=int, default=384)
  p.add_argument("--doc-stride", type=int, default=128)
  p.add_argument("--max-query-length", type=int, default=64)
  p.add_argument("--hf-stride", type=int, default=128,
                 help="transformers' stride (the windows' overlap; "
                      "run_qa.py's --doc_stride default)")
  p.add_argument("--repeats", type=int, default=2)
  p.add_argument("--json", default="")
  return p.parse_args(argv)


def best_of(fn, repeats):
  """(best seconds, last result) of `repeats` warm calls (one untimed)."""
  result = fn()
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    result = fn()
    times.append(time.perf_counter() - start)
  return min(times), result


# ------------------------------------------------------------------ ours
def our_task(args, work_dir):
  """Our SQuAD 1.1 task, configured as run_finetuning.py configures it."""
  from finetune.config import FinetuningConfig
  from finetune.qa.qa_tasks import SQuADv1
  from util.tokenization import load_tokenizer
  raw = os.path.join(work_dir, "raw")
  os.makedirs(os.path.join(raw, "squadv1"))
  os.symlink(os.path.abspath(args.squad_file),
             os.path.join(raw, "squadv1", "dev.json"))
  config = FinetuningConfig(
      raw_data_dir=raw, output_dir=os.path.join(work_dir, "out"),
      task_names="squadv1", max_seq_length=args.max_seq_length,
      doc_stride=args.doc_stride, max_query_length=args.max_query_length,
      eval_examples_limit=args.limit)
  config.resolve("small")
  return SQuADv1(config, load_tokenizer(args.vocab_file, True))


def time_ours(args, work_dir):
  task = our_task(args, work_dir)

  def read():
    task._examples.clear()  # noqa: SLF001 (read the file anew)
    return task.get_examples("dev")

  examples = read()
  featurize_s, rows = best_of(
      lambda: task.featurize(examples, is_training=False), args.repeats)
  read_s, _ = best_of(lambda: task.featurize(read(), is_training=False),
                      args.repeats)
  return examples, dict(
      featurize_s=featurize_s, read_featurize_s=read_s,
      rows=len(rows["input_ids"]), input_ids=rows["input_ids"],
      example_index=rows["example_index"],
      answers_in_a_window=int(sum(
          1 for i in range(len(examples)) if (rows["start_positions"][
              rows["example_index"] == i] > 0).any())))


# ------------------------------------------------------------------- hf
def hf_tokenizer(args):
  from benchmarks.hf_tokenizer import bert_tokenizer_fast
  return bert_tokenizer_fast(args.vocab_file, do_lower_case=True)


def hf_encode(tok, questions, contexts, args):
  return tok([q.lstrip() for q in questions], contexts,
             truncation="only_second", max_length=args.max_seq_length,
             stride=args.hf_stride, return_overflowing_tokens=True,
             return_offsets_mapping=True, padding="max_length")


def run_qa_features(tok, questions, contexts, answers, args):
  """transformers' examples/pytorch/question-answering/run_qa.py:
  prepare_train_features's start/end positions and
  prepare_validation_features's example ids and context-only offsets,
  in one pass over the tokenizer's rows."""
  enc = hf_encode(tok, questions, contexts, args)
  sample_mapping = enc.pop("overflow_to_sample_mapping")
  offset_mapping = enc.pop("offset_mapping")
  starts, ends, example_ids, context_offsets = [], [], [], []
  for i, offsets in enumerate(offset_mapping):
    input_ids = enc["input_ids"][i]
    cls_index = input_ids.index(tok.cls_token_id)
    sequence_ids = enc.sequence_ids(i)
    sample = sample_mapping[i]
    example_ids.append(sample)
    context_offsets.append([o if sequence_ids[k] == 1 else None
                            for k, o in enumerate(offsets)])
    answer = answers[sample]
    if answer is None:
      starts.append(cls_index)
      ends.append(cls_index)
      continue
    start_char, end_char = answer[0], answer[0] + len(answer[1])
    token_start = 0
    while sequence_ids[token_start] != 1:
      token_start += 1
    token_end = len(input_ids) - 1
    while sequence_ids[token_end] != 1:
      token_end -= 1
    if not (offsets[token_start][0] <= start_char and
            offsets[token_end][1] >= end_char):
      starts.append(cls_index)
      ends.append(cls_index)
    else:
      while (token_start < len(offsets) and
             offsets[token_start][0] <= start_char):
        token_start += 1
      starts.append(token_start - 1)
      while offsets[token_end][1] >= end_char:
        token_end -= 1
      ends.append(token_end + 1)
  enc["start_positions"], enc["end_positions"] = starts, ends
  enc["example_id"], enc["offset_mapping"] = example_ids, context_offsets
  return enc


def time_hf(examples, args):
  tok = hf_tokenizer(args)
  questions = [ex.question for ex in examples]
  contexts = [ex.context for ex in examples]
  answers = [None if ex.start_word < 0 else (
      ex.word_spans[ex.start_word][0], ex.answer_text) for ex in examples]
  call_s, enc = best_of(lambda: hf_encode(tok, questions, contexts, args),
                        args.repeats)
  full_s, full = best_of(lambda: run_qa_features(
      tok, questions, contexts, answers, args), args.repeats)
  # answer_start of the file's first answer, as run_qa reads it; ours
  # found the same characters (start_word) for these examples.
  return dict(tokenize_s=call_s, run_qa_s=full_s,
              rows=len(enc["input_ids"]), input_ids=enc["input_ids"],
              example_index=enc["overflow_to_sample_mapping"],
              answers_in_a_window=len({e for e, s in zip(
                  full["example_id"], full["start_positions"]) if s > 0}))


def read_json_examples(path, limit):
  """transformers' side of reading: json.load and flatten the questions
  (as the `datasets` SQuAD script does), for the read + featurize line."""
  with open(path, encoding="utf-8") as f:
    data = json.load(f)["data"]
  out = []
  for article in data:
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:
        out.append((qa["question"], paragraph["context"], qa["answers"]))
        if limit and len(out) >= limit:
          return out
  return out


def time_hf_read(args):
  tok = hf_tokenizer(args)

  def run():
    rows = read_json_examples(args.squad_file, args.limit)
    answers = [(a[0]["answer_start"], a[0]["text"]) if a else None
               for _, _, a in rows]
    return run_qa_features(tok, [r[0] for r in rows], [r[1] for r in rows],
                           answers, args)
  return best_of(run, args.repeats)[0]


def same_single_windows(ours, hf, n):
  """(identical, compared): rows of the questions that are one window on
  both sides, ours against transformers' ids."""
  import numpy as np
  ours_rows = np.bincount(ours["example_index"], minlength=n)
  hf_rows = np.bincount(np.asarray(hf["example_index"]), minlength=n)
  ours_at = {int(e): i for i, e in enumerate(ours["example_index"])}
  hf_at = {int(e): i for i, e in enumerate(hf["example_index"])}
  single = [e for e in range(n) if ours_rows[e] == 1 and hf_rows[e] == 1]
  same = sum(1 for e in single if list(ours["input_ids"][ours_at[e]]) ==
             list(hf["input_ids"][hf_at[e]]))
  return same, len(single)


# ------------------------------------------------------------------ main
def main(argv=None):
  args = parse_args(argv)
  import tokenizers
  import transformers
  machine = cpu_kind()
  print(f"{machine}; TensorFlow {tf.__version__}, transformers "
        f"{transformers.__version__}, tokenizers {tokenizers.__version__}, "
        f"Python {platform.python_version()}", flush=True)
  work_dir = tempfile.mkdtemp(prefix="squad_featurization_")
  try:
    examples, ours = time_ours(args, work_dir)
    n = len(examples)
    print(f"{args.squad_file}: {n} questions; max_seq_length "
          f"{args.max_seq_length}, ours doc_stride {args.doc_stride} (step),"
          f" transformers stride {args.hf_stride} (overlap), "
          f"max_query_length {args.max_query_length}", flush=True)
    hf = time_hf(examples, args)
    hf["read_run_qa_s"] = time_hf_read(args)
    lines = [
        ("ours featurize", ours["featurize_s"], ours["rows"]),
        ("ours read + featurize", ours["read_featurize_s"], ours["rows"]),
        ("hf tokenizer call", hf["tokenize_s"], hf["rows"]),
        ("hf tokenizer + run_qa", hf["run_qa_s"], hf["rows"]),
        ("hf read + tokenizer + run_qa", hf["read_run_qa_s"], hf["rows"]),
    ]
    print(f"\n{'path':<30} {'seconds':>8} {'examples/s':>11} {'rows':>7}"
          f"   [{machine}]")
    for name, seconds, rows in lines:
      print(f"{name:<30} {seconds:8.2f} {n / seconds:11,.0f} {rows:7,}")
    same, single = same_single_windows(ours, hf, n)
    print(f"same ids (sanity): {same:,} of the {single:,} questions that "
          "are one window on both sides have identical rows")
    print(f"answers inside a window: ours {ours['answers_in_a_window']:,}, "
          f"transformers {hf['answers_in_a_window']:,} of {n:,}")
    ratios = {
        "featurize_vs_tokenizer_call": hf["tokenize_s"] / ours["featurize_s"],
        "featurize_vs_tokenizer_run_qa": hf["run_qa_s"] / ours["featurize_s"],
        "read_featurize_vs_read_run_qa": (hf["read_run_qa_s"] /
                                          ours["read_featurize_s"]),
    }
    print(f"\nsummary: ours / transformers, examples/s; CPU: {machine}")
    for (what, key) in (
        ("ours featurize / hf tokenizer call", "featurize_vs_tokenizer_call"),
        ("ours featurize / hf tokenizer + run_qa",
         "featurize_vs_tokenizer_run_qa"),
        ("ours read + featurize / hf read + tokenizer + run_qa",
         "read_featurize_vs_read_run_qa")):
      print(f"  {what:<52} {ratios[key]:5.2f}x  [{machine}]")
    for side in (ours, hf):
      del side["input_ids"], side["example_index"]
    result = dict(
        machine=machine, questions=n, same_single_windows=[same, single],
        ours=dict(ours, examples_per_s=n / ours["featurize_s"]),
        hf=dict(hf, examples_per_s=n / hf["tokenize_s"]),
        ratios=ratios, settings=vars(args))
    write_json(args.json, result)
    return result
  finally:
    shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
  main()
