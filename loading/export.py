"""export_model.py's work: a run (pretrained or fine-tuned) found and
loaded, then written by interop/export.py's exporter for --format."""

import os

from finetune.model import head_weights
from finetune.model import load_finetuned
from inference import export as engine_export
from interop import hf
from interop import savedmodel
from interop.export import EXPORTERS
from interop.export import staging_dir
from loading import finetuned as finetuned_files
from loading import runs
from loading.sources import find_pretrained
from util.errors import UserError


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
