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

import os
import zipfile

import numpy as np

from comparison import report
from comparison.config import TAGGING_TASKS
from finetune import arrays as ft_arrays
from finetune import baselines
from finetune import task_builder
from finetune.featurization import limit
from util import storage
from util import text_files
from util.errors import UserError
from util.machine import cpu_kind
from util.tokenization import load_tokenizer

CONTROL = "random init (no pretraining)"  # slot/control.py's row
PAPER_TABLE_1 = {"BERT-Small": (1.4e18, 75.1), "ELECTRA-Small": (1.4e18, 79.9),
                 "ELECTRA-Small 6.25%": (8.9e16, 74.1)}


def read_records(folders):
  """[(slot.json, pretraining entries by folder)] of each record folder, and
  the dev outputs of all of them: a later folder's trial replaces an
  earlier one's of the same model, task and seed (a second call that goes
  on where the first stopped)."""
  records, outputs, pretrained = [], {}, {}
  for folder in folders:
    slot_path = os.path.join(folder, "slot.json")
    if not storage.exists(slot_path):
      raise UserError(f"{slot_path} not found: is {folder} a slot's "
                      "returned folder?")
    slot = text_files.read_json(slot_path)
    for entry in slot.get("objectives", []):
      if entry["folder"] in pretrained:
        raise UserError(f"{entry['folder']} was pretrained by two of the "
                        f"records ({pretrained[entry['folder']][0]} and "
                        f"{folder}): give a later slot its own seeds "
                        "(--objectives NAME:A-B)")
      pretrained[entry["folder"]] = (folder, dict(
          entry, device=slot.get("device")))
    outputs_path = os.path.join(folder, ft_arrays.OUTPUTS)
    if storage.exists(outputs_path):
      outputs.update(read_outputs(outputs_path))
    else:  # trials whose outputs were not kept are not counted
      slot = dict(slot, finetune=[])
    records.append(slot)
  if not outputs:
    raise UserError(f"no {ft_arrays.OUTPUTS} in {', '.join(folders)}: the "
                    "slots did not fine-tune")
  return records, {k: e for k, (_, e) in pretrained.items()}, outputs


def read_outputs(path):
  """{key: array} of a finetune_outputs.npz, read whole: a truncated or
  damaged file is named, not half-read."""
  try:
    with storage.open_file(path, "rb") as f:
      with np.load(f, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}
  except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile) as e:
    raise UserError(f"{path} is truncated or not an .npz file "
                    f"({type(e).__name__}: {str(e)[:80]})") from None


def score_outputs(meta, outputs, raw_data_dir, vocab_file, tagging_dir=""):
  """{model: {(seed): {task: score x100}}} of the dev outputs, through
  each task's scorer on its dev examples, featurized as exported.
  raw_data_dir / tagging_dir / vocab_file: where the GLUE folders, the
  chunk/ and pos/ folders and the vocabulary are here ("": where
  finetune.json says they were)."""
  config = ft_arrays.load_config(meta)
  vocab_file = vocab_file or config.vocab_file
  if not storage.exists(vocab_file):
    raise UserError(f"vocabulary {vocab_file} (as finetune.json records it) "
                    "is not here: name it with --vocab-file")
  tokenizer = load_tokenizer(vocab_file, config.do_lower_case)
  tasks = {}
  for name in meta["tasks"]:
    own = ft_arrays.task_config(config, meta, name)
    tagging = name in TAGGING_TASKS
    given = tagging_dir if tagging else raw_data_dir
    own.raw_data_dir = given or own.raw_data_dir
    if not storage.isdir(own.raw_data_dir):
      raise UserError(f"{name}: its data folder {own.raw_data_dir} (as "
                      "finetune.json records it) is not here: name it with "
                      f"{'--conll-dir' if tagging else '--glue-dir'}")
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


def complete_seeds(scores, tasks):
  """{model: {seed: ...}} cut to the fine-tuning seeds every model finished
  on every task (a slot's time limit may stop a seed part way: its few
  trials would make the medians of unequal samples), and how many trials
  that leaves out."""
  done = [{seed for seed, by_task in by_seed.items()
           if all(t in by_task for t in tasks)} for by_seed in scores.values()]
  kept = set.intersection(*done) if done else set()
  left_out = sum(len(by_task) for by_seed in scores.values()
                 for seed, by_task in by_seed.items() if seed not in kept)
  return {m: {s: v for s, v in by_seed.items() if s in kept}
          for m, by_seed in scores.items()}, left_out


def _checkpoints(runs, summary):
  """comparison/report.py's checkpoints of one objective: the held-out eval
  at each mark (the mean over its pretraining seeds), the final one with
  its fine-tuning summary."""
  marks = {}
  for run in runs:
    for point in run.get("curve", []):
      marks.setdefault(point["flops"], []).append(point)
  points = [{"flops": flops, "eval": report.mean_eval(
      [{k: v for k, v in p.items() if k != "flops"} for p in evals])}
            for flops, evals in sorted(marks.items())]
  if points:
    points[-1].update(summary)
  return points


def _size(record):
  if record.get("size"):
    return record["size"]
  command = record.get("command") or []  # records from before "size"
  return (command[command.index("--size") + 1] if "--size" in command
          else "small")


def _devices(records, key):
  """'NVIDIA H200 (7 runs), ...': the devices of the records that ran
  `key` ("objectives": pretraining runs, "finetune": fine-tuning trials)."""
  counts = {}
  for r in records:
    if r.get(key):
      counts[r.get("device")] = counts.get(r.get("device"), 0) + len(r[key])
  return ", ".join(f"{d} ({n} {'runs' if key == 'objectives' else 'trials'})"
                   for d, n in counts.items())


def collect(folders, finetune_meta, raw_data_dir="", vocab_file="",
            tagging_dir=""):
  """results.json's dict from the record folders of one or more slots (a
  slot.json each, finetune_outputs.npz where it fine-tuned): the runs
  they pretrained, the dev outputs they returned."""
  records, pretrained, outputs = read_records(folders)
  config, scores, task_objects = score_outputs(
      finetune_meta, outputs, raw_data_dir, vocab_file, tagging_dir)
  tasks = list(finetune_meta["tasks"])
  scores, left_out = complete_seeds(scores, tasks)
  seeds = sorted({s for by_seed in scores.values() for s in by_seed})
  lead = next((r for r in records if r.get("objectives")), records[0])
  jax_versions = sorted({r["jax"] for r in records if r.get("jax")})
  results = {"machine": f"pretrained on {_devices(records, 'objectives')}, "
             f"fine-tuned on {_devices(records, 'finetune')} "
             f"(jax {', '.join(jax_versions)}); scored on {cpu_kind()}",
             "budget_flops": max((e.get("train_flops", 0)
                                  for e in pretrained.values()), default=0),
             "model_size": _size(lead),
             "tasks": tasks, "seeds": len(seeds),
             "finetune_trials_left_out": left_out,
             "finetune_hparams": {k: finetune_meta["config"][k] for k in (
                 "learning_rate", "layerwise_lr_decay", "train_batch_size",
                 "train_examples_limit", "max_seq_length")},
             "finetune_steps": {t: e["train_steps"] for t, e in
                                finetune_meta["tasks"].items()},
             "objectives": {}, "slot": [{k: r.get(k) for k in (
                 "device", "peak_bf16_tflops", "hf_pytorch_electra",
                 "targets")} for r in records if r.get("objectives")],
             "finetune_trials": [dict(t, device=r.get("device"))
                                 for r in records
                                 for t in r.get("finetune", [])]}
  groups = {}  # objective as written -> its runs' folders (pretrain seeds)
  # The control last, beside the baseline row that follows it.
  for folder in sorted(scores, key=lambda f: f.startswith(
      ft_arrays.RANDOM_INIT)):
    entry = pretrained.get(folder, {})
    name = (CONTROL if folder.startswith(ft_arrays.RANDOM_INIT) else
            entry.get("written") or entry.get("objective") or folder)
    groups.setdefault(name, []).append(folder)
  for name, runs_of in groups.items():
    runs_of.sort(key=lambda f: pretrained.get(f, {}).get("pretrain_seed", 1))
    first = pretrained.get(runs_of[0], {})
    summary = report.summarize(tasks, {
        (folder, seed): s for folder in runs_of
        for seed, s in scores[folder].items()})
    runs = [pretrained.get(f, {}) for f in runs_of]
    results["objectives"][name] = dict(
        summary, steps=first.get("steps", "-"),
        flops=first.get("train_flops"), matmul_flops=first.get("model_flops"),
        pretrain_seeds=len(runs_of), runs=runs_of,
        devices=[r.get("device") for r in runs],
        eval=[r.get("eval", {}) for r in runs],
        curves=[r.get("curve", []) for r in runs],
        checkpoints=_checkpoints(runs, summary),
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
  if results.get("finetune_trials_left_out"):
    lines += ["", f"Left out: {results['finetune_trials_left_out']} "
              "fine-tuning trials of seeds that not every model finished on "
              "every task before the slot's time limit."]
  return text + "\n".join(lines) + "\n"
