"""Exports a pretrained model for serving and for other tools.

  python export_model.py --data-dir DATA_DIR --model-name NAME \
      --format {hf,savedmodel,keras,keras_hub,tf1} --output-dir OUT

  hf          OUT/discriminator/ (ElectraForPreTraining) and OUT/generator/
              (ElectraForMaskedLM; a BERT or SCRIPT model has only this):
              config.json, model.safetensors, vocab.txt, as transformers
              saves them
  savedmodel  a TF SavedModel: signatures `serving_default` (token ids ->
              logits, hidden states, per-token scores) and `serve_text`
              (raw strings, tokenized in the graph)
  keras       OUT/discriminator.keras (load after `import model.standalone`)
  keras_hub   a KerasHub preset: keras_hub.models.ElectraBackbone.from_preset
              (OUT) and ElectraTokenizer.from_preset(OUT) load it (needs
              pip install keras-hub)
  tf1         OUT/model.ckpt + checkpoint + vocab.txt in the original
              release's variable names: its run_finetuning.py and
              run_pretraining.py start from it (interop/tf1.py)

The model may be one of our runs or any format --init-checkpoint accepts
(transformers, the original TF1 release, .keras, KerasHub), so this also
converts, e.g. a TF1 release checkpoint to transformers. OUT must be new or
empty.

A fine-tuned model (--init-checkpoint OUTPUT_DIR/<tasks>_model, kept by
run_finetuning.py) exports one folder per task head, OUT/<task>/:
  hf          ElectraForSequenceClassification (GLUE classification and
              regression), ElectraForTokenClassification (tagging),
              ElectraForMultipleChoice or ElectraForQuestionAnswering
              (SQuAD with qa_head linear), with the same logits as ours;
              the release's (or XLNet's) SQuAD head, 2.0's answerability classifier
              and a CRF tagger have no transformers class
  savedmodel  GLUE heads: serve_text (text, and text_b for pairs) -> label
              (or score); SQuAD: serve_text (question, context) -> answer,
              windowed and decoded in the graph as fine-tuning does

Each format's export is interop/export.py's (EXPORTERS); loading/export.py
loads the run and calls it.
"""

import sys

# Before any Keras import: pins the backend, quiets TF's C++ chatter.
from util.tf_quiet import import_tensorflow
from util.tf_quiet import tensorflow_script

tensorflow_script("export_model.py")

from interop.config import load_config  # noqa: E402
from loading.presence import check_model_present  # noqa: E402
from loading.presence import check_vocab_present  # noqa: E402
from training.progress import Progress  # noqa: E402
from util.errors import main_guard  # noqa: E402


@main_guard
def main(argv=None):
  config = load_config(argv)
  check_model_present(config.model_path)  # before TensorFlow loads
  check_vocab_present(config.model_path, config.vocab_file, config.data_dir)
  # Loading (TensorFlow's import most of it), then writing: no rate.
  progress = Progress("export", 2, "steps", sys.stdout, timed=False)
  # TensorFlow only after the flags are checked: a bad flag fails at once.
  import_tensorflow(with_text=True)
  from loading import export  # loads the run, then exports (TensorFlow)
  return export.export(config, progress)


if __name__ == "__main__":
  sys.exit(0 if main() else 1)
