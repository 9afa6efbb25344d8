"""Exports a pretrained model for serving and for other tools.

  python export_model.py --data-dir DATA_DIR --model-name NAME \
      --format {hf,savedmodel,keras} --output-dir OUT

  hf          OUT/discriminator/ (ElectraForPreTraining) and OUT/generator/
              (ElectraForMaskedLM; a BERT or SCRIPT model has only this):
              config.json, model.safetensors, vocab.txt, as transformers
              saves them
  savedmodel  a TF SavedModel: signatures `serving_default` (token ids ->
              logits, hidden states, per-token scores) and `serve_text`
              (raw strings, tokenized in the graph)
  keras       OUT/discriminator.keras (load after `import model.standalone`)

The model may be one of our runs or any format --init-checkpoint accepts
(transformers, the original TF1 release, .keras), so this also converts,
e.g. a TF1 release checkpoint to transformers. OUT must be new or empty.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from interop.config import load_config  # noqa: E402
from util.errors import main_guard  # noqa: E402


def export_hf(model, hparams, vocab_file, tokenizer, output_dir):
  from interop import hf
  from interop.weights import export_weights
  from interop.weights import networks
  found = networks(model)
  if not found:
    from util.errors import UserError
    raise UserError(f"a {hparams.objective} model has no network "
                    "transformers' ELECTRA classes can hold")
  for role, (encoder, head) in found.items():
    hf.save(os.path.join(output_dir, role), role, export_weights(model, role),
            encoder.config, vocab_file, hparams.do_lower_case,
            pad_id=tokenizer.special_ids.get("pad", 0), with_head=head
            is not None)
    print(f"wrote {os.path.join(output_dir, role)} "
          f"({hf.architecture(role, head is not None)})", flush=True)
    if role == "generator" and encoder.config.hidden_act != "gelu":
      print(f"note: transformers' generator head uses the exact GELU, this "
            f"model's {encoder.config.hidden_act}: its logits will differ "
            "slightly", flush=True)
  if getattr(model, "generator", None) is not None and "generator" not in found:
    print("note: this model's generator (two-tower or fixed) has no "
          "transformers class and was not exported", flush=True)


@main_guard
def main(argv=None):
  config = load_config(argv)
  from util.tf_quiet import import_tensorflow
  import_tensorflow(with_text=True)
  from pretrain import runs
  pretrained = runs.find_pretrained(config.model_path)
  hparams = pretrained.config
  vocab_file = runs.vocab_path_for(hparams, config.vocab_file, config.data_dir)
  tokenizer = runs.load_tokenizer_for(hparams, config.vocab_file,
                                      config.data_dir)
  model = runs.restore_model(pretrained,
                             special_ids=tokenizer.special_ids.values())
  out = config.output_dir
  created = not os.path.exists(out)
  os.makedirs(out, exist_ok=True)
  try:
    if config.format == "hf":
      export_hf(model, hparams, vocab_file, tokenizer, out)
    elif config.format == "savedmodel":
      from interop.savedmodel import export_savedmodel
      export_savedmodel(model, hparams, tokenizer, vocab_file, out,
                        config.max_seq_length or None)
      print(f"wrote SavedModel {out}", flush=True)
    else:
      from interop.keras_archive import export_keras
      path = os.path.join(out, "discriminator.keras")
      export_keras(model, hparams, path)
      print(f"wrote {path}", flush=True)
  except BaseException:
    if created:  # only what this run made is removed
      import shutil
      shutil.rmtree(out, ignore_errors=True)
    raise
  return out


if __name__ == "__main__":
  sys.exit(0 if main() else 1)
