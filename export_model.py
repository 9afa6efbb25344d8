"""Exports a pretrained model for serving and for other tools.

  python export_model.py --data-dir DATA_DIR --model-name NAME \
      --format {hf,savedmodel,keras,keras_hub} --output-dir OUT

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
              the XLNet-style SQuAD head, 2.0's answerability classifier
              and a CRF tagger have no transformers class
  savedmodel  GLUE heads: serve_text (text, and text_b for pairs) -> label
              (or score); SQuAD: serve_text (question, context) -> answer,
              windowed and decoded in the graph as fine-tuning does
"""

import contextlib
import os
import shutil
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from interop.config import load_config  # noqa: E402
from training.progress import Progress  # noqa: E402
from util import outputs  # noqa: E402
from util.errors import main_guard  # noqa: E402
from util.errors import UserError  # noqa: E402


def export_hf(model, pretrain_config, vocab_file, tokenizer, output_dir,
              shown_dir=None):
  from interop import hf
  from interop.weights import export_weights
  from interop.weights import networks
  found = networks(model)
  if not found:
    raise UserError(f"a {pretrain_config.objective} model has no network "
                    "transformers' ELECTRA classes can hold")
  for role, (encoder, head) in found.items():
    hf.save(os.path.join(output_dir, role), role, export_weights(model, role),
            encoder.config, vocab_file, pretrain_config.do_lower_case,
            pad_id=tokenizer.special_ids.get("pad", 0), with_head=head
            is not None)
    print(f"wrote {os.path.join(shown_dir or output_dir, role)} "
          f"({hf.architecture(role, head is not None)})", flush=True)
    if role == "generator" and encoder.config.hidden_act != "gelu":
      print(f"note: transformers' generator head uses the exact GELU, this "
            f"model's {encoder.config.hidden_act}: its logits will differ "
            "slightly", flush=True)
  if getattr(model, "generator", None) is not None and "generator" not in found:
    print("note: this model's generator (two-tower or fixed) has no "
          "transformers class and was not exported", flush=True)


def export_keras_hub(model, vocab_file, tokenizer, output_dir):
  from interop.keras_hub import export_preset
  difference = export_preset(model, tokenizer, vocab_file, output_dir,
                             log=lambda text: print(text, flush=True))
  print(f"checked: keras_hub.models.ElectraBackbone.from_preset loads it; "
        f"its sequence output is within {difference:.1e} of ours",
        flush=True)
  from interop.weights import networks
  encoder = next(iter(networks(model).values()))[0]
  if encoder.config.hidden_act == "gelu":
    print("note: KerasHub's ElectraBackbone computes the tanh GELU; this "
          "model was trained with the exact one, hence the difference "
          "(--init-checkpoint of this preset restores the exact GELU)",
          flush=True)


def export_finetuned(config, progress):
  """OUT/<task>/ for each head of a fine-tuned model (export_model.py's
  docstring); every head is checked before anything is written."""
  from finetune.model import head_weights
  from finetune.model import load_finetuned
  from interop import hf
  from interop.savedmodel import check_finetuned_kind
  from interop.savedmodel import export_finetuned_savedmodel
  if config.format not in ("hf", "savedmodel"):
    raise UserError(f"a fine-tuned model exports as hf or savedmodel, not "
                    f"{config.format}")
  finetuned, ft_config, tokenizer, tasks, model = load_finetuned(
      config.model_path, config.task_names)
  progress.report(1, f"loaded the fine-tuned model from {config.model_path} "
                  f"({', '.join(t.name for t in tasks)})")
  encoder, _ = finetuned.weights()
  model_config = finetuned.model_config
  plans = {}
  for task in tasks:
    info = finetuned.tasks[task.name]
    if config.format == "hf":
      plans[task.name] = hf.finetuned_head(
          task.name, info["head"], head_weights(model.heads[task.name]),
          model_config.hidden_size, info.get("labels"))
    else:
      check_finetuned_kind(task.name, info["head"])
  out = config.output_dir
  with staging_dir(out) as staging:
    for task in tasks:
      info, folder = finetuned.tasks[task.name], os.path.join(staging,
                                                             task.name)
      if config.format == "hf":
        architecture, extra, head = plans[task.name]
        hf.save(folder, "discriminator", dict(encoder, **head), model_config,
                finetuned.vocab_file, finetuned.pretrain_config.do_lower_case,
                pad_id=tokenizer.special_ids.get("pad", 0),
                architecture_name=architecture, extra_config=extra)
      else:
        architecture = "SavedModel: serve_text -> " + {
            "regression": "score", "classification": "label"}.get(
                info["head"], "answer")
        export_finetuned_savedmodel(
            model.encoder, model.heads[task.name], task, info,
            tokenizer, finetuned.vocab_file, folder,
            config.max_seq_length or ft_config.max_seq_length,
            dict(task=task.name, **info, source=finetuned.path,
                 trial=finetuned.info.get("trial"),
                 results=finetuned.info.get("results")))
      print(f"wrote {os.path.join(out, task.name)} ({architecture})",
            flush=True)
  progress.finish(f"wrote {config.format} export {out}: "
                  f"{', '.join(sorted(os.listdir(out)))}", done=2)
  return out


@main_guard
def main(argv=None):
  config = load_config(argv)
  progress = Progress("export", 2, "steps", sys.stdout)
  from util.tf_quiet import import_tensorflow
  import_tensorflow(with_text=True)
  from loading import finetuned
  if finetuned.is_finetuned(config.model_path):
    return export_finetuned(config, progress)
  if config.task_names:
    raise UserError("--task-names applies to a fine-tuned model only")
  from loading import runs
  from loading.sources import find_pretrained
  pretrained = find_pretrained(config.model_path)
  pretrain_config = pretrained.config
  vocab_file = runs.vocab_path_for(pretrain_config, config.vocab_file,
                                   config.data_dir)
  tokenizer = runs.load_tokenizer_for(pretrain_config, config.vocab_file,
                                      config.data_dir)
  model = runs.restore_model(pretrained,
                             special_ids=tokenizer.special_ids.values())
  progress.report(1, f"loaded the model from {config.model_path}")
  out = config.output_dir
  with staging_dir(out) as staging:
    if config.format == "keras_hub":
      export_keras_hub(model, vocab_file, tokenizer, staging)
    elif config.format == "hf":
      export_hf(model, pretrain_config, vocab_file, tokenizer, staging, out)
    elif config.format == "savedmodel":
      from interop.savedmodel import export_savedmodel
      export_savedmodel(model, pretrain_config, tokenizer, vocab_file, staging,
                        config.max_seq_length or None)
    else:
      from interop.keras_archive import export_keras
      export_keras(model, pretrain_config,
                   os.path.join(staging, "discriminator.keras"))
  progress.finish(f"wrote {config.format} export {out}: "
                  f"{', '.join(sorted(os.listdir(out)))}", done=2)
  return out


@contextlib.contextmanager
def staging_dir(out):
  """A hidden folder beside `out` to export into, moved into place only
  when complete: a failed or interrupted export leaves `out` as it was
  (absent, or the empty folder the user made)."""
  parent = os.path.dirname(os.path.abspath(out))
  try:
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.",
                               suffix=".incomplete", dir=parent)
  except OSError as e:
    raise UserError(f"cannot write to {parent}: {e.strerror}") from None
  try:
    yield staging
    outputs.give_usual_mode(staging)
    if os.path.isdir(out):  # the empty folder the user made: fill it
      for name in os.listdir(staging):
        os.replace(os.path.join(staging, name), os.path.join(out, name))
      os.rmdir(staging)
    else:
      os.replace(staging, out)
  except OSError as e:
    raise UserError(f"cannot write {out}: {e.strerror or e}") from None
  finally:
    shutil.rmtree(staging, ignore_errors=True)  # gone when it was moved


if __name__ == "__main__":
  sys.exit(0 if main() else 1)
