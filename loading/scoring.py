"""A pretraining run -> (its config, the restored model, its tokenizer),
as scoring/ needs it: the run (or a model in another format) is found and
restored as fine-tuning does, the whole pretraining model, heads and
generator included.
"""

from loading import runs
from loading.sources import find_pretrained
from pretrain import data
from pretrain.objectives import objective_class
from util.errors import UserError


def _token_counts(pretrain_config, need_table):
  """A unigram generator's table is rebuilt from the dataset's counts (it
  is not a variable), when the scorer asks the generator."""
  if pretrain_config.unigram_generator and need_table:
    return data.load_token_counts(data.load_metadata(pretrain_config))
  return None


def load_run(path, vocab_file="", data_dir="", method=""):
  """(pretrain_config, model, tokenizer) of the pretraining run at `path` (a
  model_dir or a checkpoint prefix inside one, or a model in another
  format, which must hold the networks `method` asks)."""
  pretrained = find_pretrained(path)
  pretrain_config = pretrained.config
  if not pretrain_config.vocab_size:
    raise UserError(f"{pretrained.model_dir}: pretrain_config.json has no "
                    "vocab_size")
  tokenizer = runs.load_tokenizer_for(pretrain_config, vocab_file, data_dir)
  # Every estimator a converted (ELECTRA or masked-LM) model allows reads
  # its masked LM; appendix G also its discriminator.
  need = ("generator",)
  main = objective_class(pretrain_config.objective).MAIN_NETWORK
  if main == "discriminator" and method in ("", "electra"):
    need += (main,)
  # Only the objective's own estimator and appendix G sample from the
  # generator (and so need a unigram generator's table).
  model = runs.restore_model(
      pretrained,
      _token_counts(pretrain_config, method in ("", "electra")),
      tokenizer.special_ids.values(),
      need=need)
  return pretrain_config, model, tokenizer
