"""build_pretraining_dataset.py's flags: where the corpus and vocabulary
are, where the shards go, and how examples are cut."""

import dataclasses

from util.errors import UserError


@dataclasses.dataclass
class BuildConfig:
  corpus_dir: str = ""  # a directory (searched recursively) or a glob
  vocab_file: str = ""  # vocab.txt (WordPiece) or a SentencePiece .model
  build_vocab: int = 0  # >0: learn a WordPiece vocab of about this size
  output_dir: str = ""
  max_seq_length: int = 128
  num_processes: int = 1
  num_out_files: int = 16  # total shards; each process writes its share
  lower_case: bool = True
  strip_accents: bool | None = None  # None: same as lower_case (like BERT)
  seed: int = 12345
  overwrite: bool = False  # replace this tool's files in a used output dir
  max_docs: int = 0  # 0 = all; split evenly among the processes
  # Share of documents (by a hash of their text) set aside in held-out
  # shards that training never reads; pretraining evaluates on them.
  heldout_fraction: float = 0.02

  # Every number's range (util/config.check_numbers, after validate).
  RANGES = {"build_vocab": ">= 0", "max_seq_length": "[8, 8192]",
            "num_processes": ">= 1", "num_out_files": ">= 1", "seed": None,
            "max_docs": ">= 0", "heldout_fraction": "[0, 0.5]"}

  def validate(self):
    if not self.corpus_dir:
      raise UserError("--corpus-dir is required")
    if not self.output_dir:
      raise UserError("--output-dir is required")
    if self.vocab_file and self.build_vocab:
      raise UserError("give either --vocab-file or --build-vocab, not both")
    if not self.vocab_file and not self.build_vocab:
      raise UserError("no vocabulary given: pass --vocab-file (vocab.txt or a "
                      "SentencePiece .model) or --build-vocab SIZE")
    if self.build_vocab < 0 or 0 < self.build_vocab < 100:
      raise UserError(f"--build-vocab must be 0 (off) or at least 100, got "
                      f"{self.build_vocab}")
    if self.max_seq_length < 8:
      raise UserError(f"--max-seq-length must be at least 8, got "
                      f"{self.max_seq_length}")
    if self.num_processes < 1:
      raise UserError(f"--num-processes must be at least 1, got "
                      f"{self.num_processes}")
    if self.num_out_files < self.num_processes:
      raise UserError(f"--num-out-files ({self.num_out_files}) must be at "
                      f"least --num-processes ({self.num_processes})")
    if self.max_docs < 0:
      raise UserError(f"--max-docs must be >= 0, got {self.max_docs}")

  @property
  def do_strip_accents(self):
    return self.lower_case if self.strip_accents is None else self.strip_accents
