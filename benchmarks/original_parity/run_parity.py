"""Whole runs side by side with the original release (issue 50): the same
tiny ELECTRA pretrained by the original's code and by ours on the same
TFRecords (ours, held-out shards for eval), the same hparams, several
seeds, held-out eval at every saved checkpoint.

  python benchmarks/original_parity/run_parity.py pretrain \
      --original $ORIG_ELECTRA --original-python $ORIG_VENV/bin/python \
      --data-dir $PARITY/data --records results/original_parity

DATA_DIR holds vocab.txt and pretrain_tfrecords/ (build_pretraining_dataset.py
on ../shared/data's Wikipedia; docs in results/original_parity/README.md).
Runs go one at a time in plan.json's order, original and ours alternating;
a run whose last eval is in RECORDS is skipped (on any machine), the others
resume from their checkpoints (DATA_DIR/models/<side>_seed<k>), so the
command can simply be run again. Records (small JSON,
no checkpoints) land in RECORDS/pretrain/<side>_seed<k>/ as they complete.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PLAN = os.path.join(HERE, "plan.json")


def load_plan(path=PLAN):
  with open(path) as f:
    return json.load(f)


def _original_hparams(plan):
  """Ours -> the original's spelling of the same model (its configure_
  pretraining has no tiny size: small with the tiny sizes overridden)."""
  # The plan's objective in the original's flags (plan_electric.json).
  shared = dict(plan["pretrain"], **plan.get("original_hparams", {}))
  if "tiny_sizes" not in plan:  # a preset both codes have (plan_small.json)
    return dict(shared, model_size=plan["model_size"])
  return dict(shared, model_size="small",
              model_hparam_overrides=plan["tiny_sizes"], embedding_size=128)


def cross_eval(args):
  """The original's last checkpoints evaluated by our evaluator, with the
  data and eval masks of our run of the same seed, in bfloat16 (as our
  `auto` runs evaluate on this CPU) and float32 (as the original and our
  _fp32 runs): RECORDS/cross_eval/<precision>/original_seed<N>/
  step_<S>.json. One evaluator, so a gap to our run is in the weights, not
  the metric."""
  sys.path.insert(0, REPO)
  from util.tf_quiet import import_tensorflow
  import_tensorflow()
  from loading.sources import open_source
  from pretrain import config as configure_pretraining
  from pretrain.trainer import Trainer
  plan = load_plan(args.plan)
  step = plan["pretrain"]["num_train_steps"]
  for precision, tag in (("bfloat16", ""), ("float32", "_fp32")):
    for side, seed in plan["pretrain_runs"]:
      name = f"{side}_seed{seed}"
      out_dir = os.path.join(args.records, "cross_eval", precision, name)
      out = os.path.join(out_dir, f"step_{step}.json")
      if side != "original" or os.path.exists(out):
        continue
      argv = _our_argv(plan, args.data_dir, f"cross_eval{tag}_{name}", seed,
                       eval_only=True) + ["--do-eval"]
      hparams = json.loads(argv[argv.index("--hparams") + 1])
      hparams.update(mixed_precision=precision,
                     init_checkpoint=os.path.join(
                         args.data_dir, "models", name, f"model.ckpt-{step}"))
      argv[argv.index("--hparams") + 1] = json.dumps(hparams)
      config = configure_pretraining.load_config(argv)
      with Trainer(config, open_source=open_source) as trainer:
        results = trainer.evaluate()
      results["global_step"] = step  # the imported weights' step
      os.makedirs(out_dir, exist_ok=True)
      _write_machine(out_dir)
      with open(out + ".tmp", "w") as f:
        json.dump(results, f, indent=2, sort_keys=True)
      os.replace(out + ".tmp", out)
      print(f"{precision} {name}: {json.dumps(results)}", flush=True)


def _our_argv(plan, data_dir, name, seed, eval_only=False):
  hparams = dict(plan["pretrain"], objective=plan.get("objective", "electra"),
                 model_size=plan.get("model_size", "tiny"), seed=seed,
                 keep_checkpoint_max=100, iterations_per_loop=100,
                 **plan.get("our_hparams", {}))
  if "model_size" not in plan:  # later plans run today's defaults throughout
    _tiny_variants(hparams, name)
  argv = ["--data-dir", data_dir, "--model-name", name,
          "--hparams", json.dumps(hparams)]
  return argv + (["--no-do-train"] if eval_only else [])


def _tiny_variants(hparams, name):
  """The tiny plan's sides that differ from today's defaults, by name."""
  if name.startswith("ours_first_"):  # runs made before the default changed
    hparams["repeated_positions"] = "first"
  # "auto" trains in bfloat16 on a CPU with AVX512-BF16 or AMX; the
  # original trains in float32: the _fp32 runs (and evals) are like for like.
  if "_fp32_" in name:
    hparams["mixed_precision"] = "float32"
  # The original's glorot_uniform where its tf.layers.dense has no
  # initializer (embeddings_project, the discriminator's output layer):
  # the default since these runs; the runs before it had the truncated
  # normal there, and say so to reproduce.
  if "_origdense_" in name or "_origorder_" in name:
    hparams["model_hparam_overrides"] = {"dense_init": "original"}
  else:
    hparams["model_hparam_overrides"] = {"dense_init": "truncated_normal"}
  # The original's order of the training data, the default since
  # 2026-12-02 (the plan's our_hparams pin the old one for the rest).
  if "_origorder_" in name:
    hparams.update(input_cycle_length=4, shuffle_buffer_size=100)


def pretrain_original(args, plan, seed, name, record):
  heldout = os.path.join(args.data_dir, "pretrain_tfrecords",
                         "heldout_data.tfrecord*")
  cmd = [args.original_python,
         os.path.join(HERE, "original_pretrain.py"), args.original,
         "--data-dir", args.data_dir, "--model-name", name,
         "--hparams", json.dumps(_original_hparams(plan)),
         "--seed", str(seed), "--eval-tfrecords", heldout]
  subprocess.run(cmd, check=True)
  model_dir = os.path.join(args.data_dir, "models", name)
  _copy_records(args, record, os.path.join(model_dir, "eval"),
                os.path.join(model_dir, "train_log.jsonl"))


def pretrain_ours(args, plan, seed, name, record):
  model_dir = os.path.join(args.data_dir, "models", name)
  os.makedirs(model_dir, exist_ok=True)
  log = os.path.join(model_dir, "stdout.log")
  with open(log, "a") as f:  # its step lines -> train_log.jsonl below
    subprocess.run([sys.executable, os.path.join(REPO, "run_pretraining.py")]
                   + _our_argv(plan, args.data_dir, name, seed), check=True,
                   stdout=f, stderr=subprocess.STDOUT)
  _train_log_from_stdout(log, os.path.join(model_dir, "train_log.jsonl"))
  # Every kept checkpoint evaluated in one process (its own eval masks).
  subprocess.run([sys.executable, __file__, "_eval_ours",
                  "--data-dir", args.data_dir, "--name", name,
                  "--seed", str(seed), "--plan", args.plan], check=True)
  _copy_records(args, record, os.path.join(model_dir, "eval"),
                os.path.join(model_dir, "train_log.jsonl"))


def _train_log_from_stdout(log, out):
  """`step N/M | loss X | ...` lines (the mean over the logged steps) ->
  {step, loss} lines, the last line of each step kept (a resume repeats)."""
  records = {}
  with open(log) as f:
    for line in f:
      match = re.match(r"step (\d+)/\d+ \| loss ([0-9.eE+-]+)", line)
      if match:
        records[int(match.group(1))] = float(match.group(2))
  with open(out, "w") as f:
    for step in sorted(records):
      f.write(json.dumps({"step": step, "loss": records[step]}) + "\n")


def eval_ours(args):
  sys.path.insert(0, REPO)
  from util.tf_quiet import import_tensorflow
  import_tensorflow()
  import tensorflow as tf
  from loading.sources import open_source
  from pretrain import config as configure_pretraining
  from pretrain.trainer import Trainer
  plan = load_plan(args.plan)
  config = configure_pretraining.load_config(
      _our_argv(plan, args.data_dir, args.name, args.seed, eval_only=True)
      + ["--do-eval"])
  out_dir = os.path.join(config.model_dir, "eval")
  os.makedirs(out_dir, exist_ok=True)
  state = tf.train.get_checkpoint_state(config.model_dir)
  with Trainer(config, open_source=open_source) as trainer:
    for path in state.all_model_checkpoint_paths:
      step = int(path.rsplit("-", 1)[1])
      out = os.path.join(out_dir, f"step_{step}.json")
      if os.path.exists(out):
        continue
      trainer.config.eval_checkpoint = os.path.join(config.model_dir, path)
      results = trainer.evaluate()
      with open(out + ".tmp", "w") as f:
        json.dump(results, f, indent=2, sort_keys=True)
      os.replace(out + ".tmp", out)


def _copy_records(args, name, eval_dir, train_log):
  dest = os.path.join(args.records, "pretrain", name)
  os.makedirs(dest, exist_ok=True)
  _write_machine(dest)
  for f in sorted(os.listdir(eval_dir)):
    if f.endswith(".json"):
      shutil.copy(os.path.join(eval_dir, f), os.path.join(dest, f))
  if os.path.exists(train_log):
    shutil.copy(train_log, os.path.join(dest, "train_log.jsonl"))


def _write_machine(folder):
  """The CPU that produced a folder's records, beside them."""
  sys.path.insert(0, REPO)
  from util.machine import cpu_kind
  path = os.path.join(folder, "machine.json")
  if not os.path.exists(path):
    with open(path, "w") as f:
      json.dump({"cpu": cpu_kind()}, f)


def pretrain(args):
  plan = load_plan(args.plan)
  for side, seed in plan["pretrain_runs"]:
    # Its folder in RECORDS/pretrain; in DATA_DIR/models prefixed, so that
    # plans share a data folder.
    record = f"{side}_seed{seed}"
    name = plan.get("run_prefix", "") + record
    if args.only and name not in args.only.split(","):
      continue
    final = os.path.join(args.records, "pretrain", record,
                         f"step_{plan['pretrain']['num_train_steps']}.json")
    if os.path.exists(final):  # recorded: a fresh machine need not redo it
      print(f"== {name}: recorded ({final}), skipped", flush=True)
      continue
    print(f"== {name}", flush=True)
    if side == "original":
      pretrain_original(args, plan, seed, name, record)
    else:
      pretrain_ours(args, plan, seed, name, record)


def finetune(args):
  """One pretrained checkpoint (the original's, plan["finetune"]["model"])
  fine-tuned by the original's code and by ours (its TF1 import) on each
  task with each seed and learning rate; a record per (side, lr, task,
  seed) in RECORDS/finetune/, skipped when there."""
  plan = load_plan(args.plan)
  spec = plan["finetune"]
  model_dir = os.path.join(args.data_dir, "models", spec["model"])
  out_dir = os.path.join(args.records, "finetune")
  work = os.path.join(args.data_dir, "finetune_work")
  os.makedirs(out_dir, exist_ok=True)
  _write_machine(out_dir)
  for lr in spec["learning_rates"]:
    for task in spec["tasks"]:
      for side in spec.get("sides", ("original", "ours")):
        outs = {seed: os.path.join(out_dir, f"{side}_lr{lr:g}_{task}_seed"
                                   f"{seed}.json") for seed in spec["seeds"]}
        if all(os.path.exists(o) for o in outs.values()):
          continue
        print(f"== fine-tune {side} lr {lr:g} {task}", flush=True)
        if side == "original":
          for seed, out in outs.items():
            if not os.path.exists(out):
              _finetune_original(args, plan, lr, task, seed, out)
        else:
          _finetune_ours(args, spec, model_dir, lr, task, outs,
                         os.path.join(work, f"{side}_lr{lr:g}_{task}"),
                         FINETUNE_DENSE_INIT[side])


def squad_split(args):
  """DATA_DIR/finetuning_data/squadv1/{train,dev}.json: the SQuAD 1.1 dev
  set we hold, split by article (plan["squad_split"]), the same files for
  both codes."""
  spec = load_plan(args.plan)["squad_split"]
  write_squad_split(spec["source"].replace("$SHARED", args.shared),
                    spec["held_out_every"],
                    os.path.join(args.data_dir, "finetuning_data", "squadv1"))


def write_squad_split(source, every, out):
  """OUT/{train,dev}.json from the SQuAD file `source`: every `every`-th
  article, from the first, is the dev side; the rest trains (also
  benchmarks/squad_backends.py's split)."""
  with open(source) as f:
    squad = json.load(f)
  parts = {"train": [a for i, a in enumerate(squad["data"]) if i % every],
           "dev": [a for i, a in enumerate(squad["data"]) if not i % every]}
  os.makedirs(out, exist_ok=True)
  for split, articles in parts.items():
    questions = sum(len(p["qas"]) for a in articles for p in a["paragraphs"])
    with open(os.path.join(out, f"{split}.json"), "w") as f:
      json.dump({"version": squad["version"], "data": articles}, f)
    print(f"squadv1 {split}: {len(articles)} articles, {questions} "
          "questions", flush=True)


def baselines(args):
  """RECORDS/finetune/baselines.json: each task's no-text baseline (the
  training set's majority class; finetune/baselines.py), the floor the
  table prints beside the scores."""
  sys.path.insert(0, REPO)
  from finetune.baselines import baseline_score
  from collect_parity import HEADLINE
  spec = load_plan(args.plan)["finetune"]
  raw = os.path.join(args.data_dir, "finetuning_data")
  # A constant answer is no baseline for a span: SQuAD has none here.
  scores = {task: baseline_score(task, raw, HEADLINE[task])
            for task in spec["tasks"] if not task.startswith("squad")}
  out = os.path.join(args.records, "finetune", "baselines.json")
  with open(out, "w") as f:
    json.dump(scores, f, indent=2, sort_keys=True)
  print(json.dumps(scores))


def _finetune_original(args, plan, lr, task, seed, out):
  spec = plan["finetune"]
  hparams = dict(spec["hparams"], model_size="small", embedding_size=128,
                 model_hparam_overrides=plan["tiny_sizes"],
                 task_names=[task], learning_rate=lr)
  subprocess.run([args.original_python,
                  os.path.join(HERE, "original_finetune.py"), args.original,
                  "--data-dir", args.data_dir, "--model-name", spec["model"],
                  "--hparams", json.dumps(hparams), "--seed", str(seed),
                  "--output", out], check=True)
  shutil.rmtree(out + ".work", ignore_errors=True)  # its model, tfrecords


# Our sides' head init: "ours" ran before dense_init defaulted to the
# original's glorot_uniform (its records were made with the truncated
# normal); "ours_orighead" has the original's.
FINETUNE_DENSE_INIT = {"ours": "truncated_normal", "ours_orighead": "original"}


def _finetune_ours(args, spec, model_dir, lr, task, outs, work, dense_init):
  """All seeds in one run (num_trials; trial k has seed seed + k)."""
  seeds = sorted(outs)
  assert seeds == list(range(seeds[0], seeds[0] + len(seeds)))
  hparams = dict(spec["hparams"], learning_rate=lr, seed=seeds[0],
                 num_trials=len(seeds), keep_model="none",
                 model_hparam_overrides={"dense_init": dense_init})
  subprocess.run([sys.executable, os.path.join(REPO, "run_finetuning.py"),
                  "--init-checkpoint", model_dir,
                  "--vocab-file", os.path.join(args.data_dir, "vocab.txt"),
                  "--raw-data-dir", os.path.join(args.data_dir,
                                                 "finetuning_data"),
                  "--task-names", task, "--output-dir", work,
                  "--hparams", json.dumps(hparams)], check=True)
  with open(os.path.join(work, f"{task}_trials.json")) as f:
    trials = json.load(f)["trials"]
  for seed, trial in zip(seeds, trials):
    record = {"task": task, "seed": seed, "results": trial[task]}
    with open(outs[seed], "w") as f:
      json.dump(record, f, indent=2, sort_keys=True)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("phase", choices=["pretrain", "finetune", "baselines",
                                        "cross_eval", "squad_split",
                                        "_eval_ours"])
  # The original's checkout and its venv (tests/reference/README.md).
  parser.add_argument("--original", default=os.environ.get("ORIG_ELECTRA"))
  parser.add_argument("--original-python", default=os.environ.get(
      "ORIG_VENV", "") and os.path.join(os.environ["ORIG_VENV"], "bin",
                                        "python"))
  parser.add_argument("--data-dir", required=True)
  parser.add_argument("--records",
                      default=os.path.join(REPO, "results", "original_parity"))
  parser.add_argument("--name", help="_eval_ours: the run")
  parser.add_argument("--seed", type=int, default=1)
  parser.add_argument("--shared", default=os.path.join(
      os.path.dirname(REPO), "shared", "data"),
                      help="squad_split: the shared data folder")
  parser.add_argument("--plan", default=PLAN)
  parser.add_argument("--only", default="",
                      help="pretrain: these runs only, e.g. ours_seed2 (a "
                      "fresh machine has no checkpoints: the others would "
                      "start again)")
  args = parser.parse_args()
  if args.phase in ("pretrain", "finetune") and not (
      args.original and args.original_python):
    parser.error("the original's code is needed: --original (or "
                 "$ORIG_ELECTRA) and --original-python (or $ORIG_VENV)")
  if args.phase == "pretrain":
    pretrain(args)
  elif args.phase == "finetune":
    finetune(args)
    baselines(args)
  elif args.phase == "baselines":
    baselines(args)
  elif args.phase == "cross_eval":
    cross_eval(args)
  elif args.phase == "squad_split":
    squad_split(args)
  else:
    eval_ours(args)


if __name__ == "__main__":
  main()
