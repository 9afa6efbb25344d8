"""transformers' fast BERT tokenizer from a local vocab.txt (no network),
for the benchmarks that time transformers beside us.

transformers 5 renamed the constructor's `vocab_file` to `vocab` and
silently ignores an unknown `vocab_file`: `BertTokenizerFast(vocab_file=p)`
there is a 5-entry tokenizer that maps every word to [UNK] (and so looks
fast). This passes the path under the name the installed version takes and
checks that the whole vocabulary was read.
"""

import inspect


def bert_tokenizer_fast(vocab_file, do_lower_case=True):
  from transformers import BertTokenizerFast
  params = inspect.signature(BertTokenizerFast.__init__).parameters
  key = "vocab" if "vocab" in params else "vocab_file"
  tok = BertTokenizerFast(**{key: vocab_file}, do_lower_case=do_lower_case)
  with open(vocab_file, encoding="utf-8") as f:
    entries = sum(1 for line in f if line.strip())
  if tok.vocab_size != entries:
    raise RuntimeError(f"BertTokenizerFast read {tok.vocab_size} of the "
                       f"{entries} entries of {vocab_file}")
  return tok
