"""A GPU slot's comparison (docs/gpu_slot.md) as the harness reports one:
the slot's pretraining figures (slot.json) and its fine-tuning dev outputs
(finetune_outputs.npz) scored on the CPU by each task's own scorer, then
the same summary, table and verdict as comparison/report.py (median and
spread over fine-tuning seeds, the GLUE mean per seed, the no-text
baseline row, the margin against BERT).

The paper's reference (ELECTRA Table 1, GLUE dev over eight tasks, not the
five here): BERT-Small 75.1 and ELECTRA-Small 79.9 at 1.4e18 train FLOPs;
ELECTRA-Small 74.1 at 6.25% of its training, 8.9e16.
"""

import json
import os

import numpy as np

from comparison import baselines
from comparison import report
from comparison.config import TAGGING_TASKS
from finetune import arrays as ft_arrays
from finetune import task_builder
from finetune.featurization import limit
from util import storage
from util.errors import UserError
from util.machine import cpu_kind
from util.tokenization import load_tokenizer

PAPER_TABLE_1 = {"BERT-Small": (1.4e18, 75.1), "ELECTRA-Small": (1.4e18, 79.9),
                 "ELECTRA-Small 6.25%": (8.9e16, 74.1)}


def _read(files_at):
  slot_path = os.path.join(files_at, "slot.json")
  outputs_path = os.path.join(files_at, "finetune_outputs.npz")
  for path in (slot_path, outputs_path):
    if not storage.exists(path):
      raise UserError(f"{path} not found: is {files_at} a slot's returned "
                      "folder with fine-tuning?")
  slot = json.loads(storage.read_text(slot_path))
  with storage.open_file(outputs_path, "rb") as f:
    with np.load(f, allow_pickle=False) as data:
      outputs = {k: data[k] for k in data.files}
  return slot, outputs


def score_outputs(meta, outputs, raw_data_dir, vocab_file):
  """{model: {(seed): {task: score x100}}} of the dev outputs, through
  each task's scorer on its dev examples, featurized as exported."""
  config = ft_arrays.load_config(meta)
  tokenizer = load_tokenizer(vocab_file or config.vocab_file,
                             config.do_lower_case)
  tasks = {}
  for name in meta["tasks"]:
    own = ft_arrays.task_config(config, meta, name)
    if raw_data_dir and name not in TAGGING_TASKS:
      own.raw_data_dir = raw_data_dir
    tasks[name], = task_builder.get_tasks(own, tokenizer)
  grouped = {}
  for key, value in outputs.items():
    model, task, seed, column = key.split("/")
    grouped.setdefault((model, task, int(seed)), {})[column] = value
  scores = {}
  for name, task in tasks.items():
    examples = limit(task.get_examples("dev"), config.eval_examples_limit)
    if name in TAGGING_TASKS:  # its labels as the slot's head predicts them
      task.restore_labels(meta["tasks"][name]["labels"])
    features = task.featurize(examples, is_training=False)
    metric = report.TASK_METRICS.get(name, "accuracy")
    for (model, task_name, seed), out in grouped.items():
      if task_name != name:
        continue
      if len(out["predictions"]) != len(features["input_ids"]):
        raise UserError(f"{model} {name} seed {seed}: "
                        f"{len(out['predictions'])} outputs for "
                        f"{len(features['input_ids'])} dev rows")
      results = ft_arrays.score(task, examples, features, out)
      scores.setdefault(model, {}).setdefault(seed, {})[name] = results[
          metric]
  return config, scores, tasks


def collect(files_at, finetune_meta, raw_data_dir="", vocab_file="",
            pretrain_record=None):
  """results.json's dict; `pretrain_record`: the slot.json of the run that
  pretrained the weights, when another run (--pretrained) fine-tuned
  them."""
  slot, outputs = _read(files_at)
  pretrain_record = pretrain_record or slot
  config, scores, task_objects = score_outputs(finetune_meta, outputs,
                                               raw_data_dir, vocab_file)
  tasks = list(finetune_meta["tasks"])
  seeds = sorted({s for by_seed in scores.values() for s in by_seed})
  pretrained = {e["folder"]: e for e in pretrain_record.get("objectives",
                                                           [])}
  results = {"machine": f"pretrained on {pretrain_record.get('device')}, "
             f"fine-tuned on {slot.get('device') or pretrain_record.get('device')} "
             f"(jax {slot.get('jax') or pretrain_record.get('jax')}); "
             f"scored on {cpu_kind()}",
             "budget_flops": max((e.get("train_flops", 0)
                                  for e in pretrained.values()), default=0),
             "tasks": tasks, "seeds": len(seeds),
             "finetune_hparams": {k: finetune_meta["config"][k] for k in (
                 "learning_rate", "layerwise_lr_decay", "train_batch_size",
                 "train_examples_limit", "max_seq_length")},
             "finetune_steps": {t: e["train_steps"] for t, e in
                                finetune_meta["tasks"].items()},
             "objectives": {}, "slot": {k: pretrain_record.get(k) for k in (
                 "device", "peak_bf16_tflops", "hf_pytorch_electra",
                 "targets")},
             "finetune_trials": slot.get("finetune", [])}
  groups = {}  # objective as written -> its runs' folders (pretrain seeds)
  for folder in scores:
    entry = pretrained.get(folder, {})
    name = entry.get("written") or entry.get("objective") or folder
    groups.setdefault(name, []).append(folder)
  for name, folders in groups.items():
    folders.sort(key=lambda f: pretrained.get(f, {}).get("pretrain_seed", 1))
    first = pretrained.get(folders[0], {})
    summary = report.summarize(tasks, {
        (folder, seed): s for folder in folders
        for seed, s in scores[folder].items()})
    results["objectives"][name] = dict(
        summary, steps=first.get("steps", "-"),
        flops=first.get("train_flops"), matmul_flops=first.get("model_flops"),
        pretrain_seeds=len(folders), runs=folders,
        eval=[pretrained.get(f, {}).get("eval", {}) for f in folders],
        curves=[pretrained.get(f, {}).get("curve", []) for f in folders],
        mfu=first.get("train_mfu"))
  results["versus_baseline"] = report.versus_baseline(results["objectives"])
  results["baseline"] = report.baseline_row(tasks, {
      t: baselines.baseline_score(t, task_objects[t].config.raw_data_dir,
                                  report.TASK_METRICS.get(t, "accuracy"))
      for t in tasks})
  results["paper_table_1"] = PAPER_TABLE_1
  return results


def markdown(results):
  text = report.markdown(dict(results, blimp_same_method=""))
  lines = ["", "The paper at this model size (ELECTRA Table 1, GLUE dev "
           "mean over eight tasks, so only the ordering compares): " +
           "; ".join(f"{k} {v[1]} at {v[0]:.1e} FLOPs"
                     for k, v in PAPER_TABLE_1.items()) + "."]
  return text + "\n".join(lines) + "\n"
