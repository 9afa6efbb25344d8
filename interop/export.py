"""What export_model.py does, one function per format (EXPORTERS), and a
fine-tuned model's heads. Every export is written to a hidden staging
folder and moved into place whole. Imports Keras and TensorFlow: the script
imports this only after its flags are checked."""

import contextlib
import os
import shutil
import tempfile

from finetune.model import head_weights
from finetune.model import load_finetuned
from inference import export as engine_export
from interop import hf
from interop import keras_archive
from interop import keras_hub
from interop import savedmodel
from interop.weights import export_weights
from loading import finetuned as finetuned_files
from loading import runs
from loading.sources import find_pretrained
from util import outputs
from util.errors import UserError


def export_hf(model, pretrain_config, tokenizer, vocab_file, staging, config):
  found = model.networks()
  if not found:
    raise UserError(f"a {pretrain_config.objective} model has no network "
                    "transformers' ELECTRA classes can hold")
  for role, (encoder, head) in found.items():
    hf.save(os.path.join(staging, role), role, export_weights(model, role),
            encoder.config, vocab_file, pretrain_config.do_lower_case,
            pad_id=tokenizer.special_ids.get("pad", 0), with_head=head
            is not None)
    print(f"wrote {os.path.join(config.output_dir, role)} "
          f"({hf.architecture(role, head is not None)})", flush=True)
    if role == "generator" and encoder.config.hidden_act != "gelu":
      print(f"note: transformers' generator head uses the exact GELU, this "
            f"model's {encoder.config.hidden_act}: its logits will differ "
            "slightly", flush=True)
  # A pair's generator that networks() leaves out: two-tower or fixed.
  if hasattr(model, "pair") and "generator" not in found:
    print("note: this model's generator (two-tower or fixed) has no "
          "transformers class and was not exported", flush=True)


def export_keras_hub(model, pretrain_config, tokenizer, vocab_file, staging,
                     config):
  del pretrain_config, config
  mapped, activation = keras_hub.export_preset(
      model, tokenizer, vocab_file, staging,
      log=lambda text: print(text, flush=True))
  encoder = next(iter(model.networks().values()))[0]
  exact = encoder.config.hidden_act == "gelu"
  print(f"checked: keras_hub.models.ElectraBackbone.from_preset loads it; "
        f"its sequence output is within {mapped:.1e} of ours"
        + (" computed with its tanh GELU" if exact else ""), flush=True)
  if exact:
    print(f"note: KerasHub's ElectraBackbone computes the tanh GELU; this "
          f"model was trained with the exact one, which differs by up to "
          f"{activation:.1e} in the sequence output (--init-checkpoint of "
          "this preset restores the exact GELU)", flush=True)


def export_savedmodel(model, pretrain_config, tokenizer, vocab_file, staging,
                      config):
  savedmodel.export_savedmodel(model, pretrain_config, tokenizer, vocab_file,
                               staging, config.max_seq_length or None)
  engine_export.write_beside(staging)  # openvino/model.xml


def export_keras(model, pretrain_config, tokenizer, vocab_file, staging,
                 config):
  del tokenizer, vocab_file, config
  keras_archive.export_keras(model, pretrain_config,
                             os.path.join(staging, "discriminator.keras"))


# --format -> exporter(model, pretrain_config, tokenizer, vocab_file,
# staging folder, ExportConfig); interop/config.py's FORMATS name these.
EXPORTERS = {"hf": export_hf, "savedmodel": export_savedmodel,
             "keras": export_keras, "keras_hub": export_keras_hub}


def export(config, progress):
  """export_model.py's work: the model at config.model_path, pretrained or
  fine-tuned, exported as config.format into config.output_dir."""
  if finetuned_files.is_finetuned(config.model_path):
    return export_finetuned(config, progress)
  if config.task_names:
    raise UserError("--task-names applies to a fine-tuned model only")
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
    EXPORTERS[config.format](model, pretrain_config, tokenizer, vocab_file,
                             staging, config)
  progress.finish(f"wrote {config.format} export {out}: "
                  f"{', '.join(sorted(os.listdir(out)))}", done=2)
  return out


def export_finetuned(config, progress):
  """OUT/<task>/ for each head of a fine-tuned model (export_model.py's
  docstring); every head is checked before anything is written."""
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
      savedmodel.check_finetuned_kind(task.name, info["head"])
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
        savedmodel.export_finetuned_savedmodel(
            model.encoder, model.heads[task.name], task, info,
            tokenizer, finetuned.vocab_file, folder,
            config.max_seq_length or ft_config.max_seq_length,
            dict(task=task.name, **info, source=finetuned.path,
                 trial=finetuned.info.get("trial"),
                 results=finetuned.info.get("results")))
        engine_export.write_beside(folder)  # openvino/model.xml
      print(f"wrote {os.path.join(out, task.name)} ({architecture})",
            flush=True)
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
    os.makedirs(parent, exist_ok=True)  # validate() checked where it can
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.",
                               suffix=".incomplete", dir=parent)
  except OSError as e:
    raise UserError(f"cannot write to {parent}: {e.strerror}") from None
  try:
    yield staging
    outputs.give_usual_modes(staging)
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
