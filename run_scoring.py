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
Sentences mode prints a header, then `pll<TAB>tokens<TAB>sentence` per
input line (--format jsonl: a JSON object per line; --per-token adds each
token's). PLL: the sum of log p(token | the rest) in nats (natural log).
Blimp and nbest print tables (--results-file: JSON). The work is
scoring/run.py's.
"""

# Before any Keras import: pins the backend, quiets TF's C++ chatter.
from util.tf_quiet import tensorflow_script

tensorflow_script("run_scoring.py")

from loading.presence import check_model_present  # noqa: E402
from loading.presence import check_vocab_present  # noqa: E402
from scoring import run  # noqa: E402
from scoring.config import load_config  # noqa: E402
from util.errors import main_guard  # noqa: E402


@main_guard
def main(argv=None):
  config = load_config(argv)
  inputs = run.load_inputs(config)
  check_model_present(config.model_path)  # before TensorFlow loads
  check_vocab_present(config.model_path, config.vocab_file, config.data_dir)
  from util.tf_quiet import import_tensorflow
  import_tensorflow(with_text=True)
  return run.score(config, inputs)  # TF import after the checks above


if __name__ == "__main__":
  main()
