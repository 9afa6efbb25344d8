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


def _original_pretrain(args, plan, name, seed, *flags):
  """original_pretrain.py on DATA_DIR/models/NAME with the plan's hparams
  and the held-out shards as its eval rows; `flags`: --eval-only etc."""
  heldout = os.path.join(args.data_dir, "pretrain_tfrecords",
                         "heldout_data.tfrecord*")
  subprocess.run([args.original_python,
                  os.path.join(HERE, "original_pretrain.py"), args.original,
                  "--data-dir", args.data_dir, "--model-name", name,
                  "--hparams", json.dumps(_original_hparams(plan)),
                  "--seed", str(seed), "--eval-tfrecords", heldout, *flags],
                 check=True)


def _write_checkpoint_state(folder, names):
  """FOLDER/checkpoint listing every checkpoint prefix in `names` (the
  last the newest), relative to the folder."""
  with open(os.path.join(folder, "checkpoint"), "w") as f:
    f.write(f'model_checkpoint_path: "{names[-1]}"\n' + "".join(
        f'all_model_checkpoint_paths: "{n}"\n' for n in names))


def pretrain_original(args, plan, seed, name, record):
  _original_pretrain(args, plan, name, seed)
  model_dir = os.path.join(args.data_dir, "models", name)
  _copy_records(args, record, os.path.join(model_dir, "eval"),
                os.path.join(model_dir, "train_log.jsonl"))


def _original_init(args, plan, seed):
  """The original's initial weights for `seed` (original_pretrain.py
  --init-only), saved once: its truncated-normal draws are those its run
  of that seed starts from; its glorot kernels, which two processes of
  one graph seed draw apart, are a fresh draw of its initializer."""
  name = plan.get("run_prefix", "") + f"originit_seed{seed}"
  prefix = os.path.join(args.data_dir, "models", name, "model.ckpt-0")
  if not os.path.exists(prefix + ".index"):
    _original_pretrain(args, plan, name, seed, "--init-only")
  return prefix


def pretrain_ours(args, plan, seed, name, record):
  model_dir = os.path.join(args.data_dir, "models", name)
  os.makedirs(model_dir, exist_ok=True)
  argv = _our_argv(plan, args.data_dir, name, seed)
  # Side ours_originit: ours trained from the original's initial weights
  # of the same seed (its TF1 import): the start shared, all but 3 kernels.
  if record.startswith("ours_originit_"):
    hparams = json.loads(argv[argv.index("--hparams") + 1])
    hparams["init_checkpoint"] = _original_init(args, plan, seed)
    argv[argv.index("--hparams") + 1] = json.dumps(hparams)
  log = os.path.join(model_dir, "stdout.log")
  with open(log, "a") as f:  # its step lines -> train_log.jsonl below
    subprocess.run([sys.executable, os.path.join(REPO, "run_pretraining.py")]
                   + argv, check=True, stdout=f, stderr=subprocess.STDOUT)
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


def orig_eval(args):
  """Our runs' kept checkpoints evaluated by the original's evaluator:
  each written in the release's names (interop/tf1.py, export_model.py
  --format tf1's code) into DATA_DIR/models/origeval_<run>/, then
  original_pretrain.py --eval-only with the seed's eval masks (those its
  own run of that seed used): RECORDS/orig_eval/<run>/step_<S>.json. One
  evaluator, the original's, at every eval point; the original's runs
  have theirs in RECORDS/pretrain/."""
  plan = load_plan(args.plan)
  for side, seed in plan["pretrain_runs"]:
    record = f"{side}_seed{seed}"
    name = plan.get("run_prefix", "") + record
    if side == "original" or (args.only and
                              name not in args.only.split(",")):
      continue
    if not os.path.exists(os.path.join(args.data_dir, "models", name,
                                       "checkpoint")):
      print(f"== {name}: no checkpoints here, skipped", flush=True)
      continue
    print(f"== {name}: the original's evaluator", flush=True)
    target = "origeval_" + name
    subprocess.run([sys.executable, __file__, "_export_tf1", "--data-dir",
                    args.data_dir, "--name", name, "--plan", args.plan],
                   check=True)
    _original_pretrain(args, plan, target, seed, "--eval-only")
    _copy_records(args, record, os.path.join(args.data_dir, "models", target,
                                             "eval"), "", kind="orig_eval")


def evaluator_offset(args):
  """One set of weights, our run --only NAME's last checkpoint, evaluated by
  both evaluators with eval-mask seeds 1..--mask-seeds (ours: the config's
  seed; the original's: its graph seed): RECORDS/evaluator_offset/NAME/
  {ours,original}_masks<k>.json. The weights are the same, so each seed's
  difference is the evaluators' alone: its mean over seeds says whether
  they differ beyond the draw of the masks. ours_origrows_masks<k>.json:
  ours on the rows the original's evaluator read for seed k. Needs
  orig_eval's export of NAME first (DATA_DIR/models/origeval_NAME)."""
  plan = load_plan(args.plan)
  step = plan["pretrain"]["num_train_steps"]
  name = args.only or "ours_origorder_fp32_seed1"
  out_dir = os.path.join(args.records, "evaluator_offset", name)
  os.makedirs(out_dir, exist_ok=True)
  _write_machine(out_dir)
  exported = os.path.join(args.data_dir, "models", "origeval_" + name)
  for k in range(1, args.mask_seeds + 1):
    out = os.path.join(out_dir, f"original_masks{k}.json")
    if not os.path.exists(out):  # a folder holding only step S, seed k
      target = os.path.join(args.data_dir, "models",
                            f"origoffset_{name}_masks{k}")
      os.makedirs(target, exist_ok=True)
      for f in os.listdir(exported):
        if f.startswith(f"model.ckpt-{step}.") and not os.path.exists(
            os.path.join(target, f)):
          os.symlink(os.path.join(exported, f), os.path.join(target, f))
      _write_checkpoint_state(target, [f"model.ckpt-{step}"])
      _original_pretrain(args, plan, os.path.basename(target), k,
                         "--eval-only")
      shutil.copy(os.path.join(target, "eval", f"step_{step}.json"), out)
    out = os.path.join(out_dir, f"ours_masks{k}.json")
    if not os.path.exists(out):
      subprocess.run([sys.executable, __file__, "_eval_masks", "--data-dir",
                      args.data_dir, "--name", name, "--seed", str(k),
                      "--plan", args.plan, "--records", out], check=True)
    # Ours again, on the rows the original's evaluator read for seed k
    # (its input repeats and shuffles the held-out shards).
    out = os.path.join(out_dir, f"ours_origrows_masks{k}.json")
    if not os.path.exists(out):
      rows = os.path.join(args.data_dir, "origrows", f"seed{k}.tfrecord")
      os.makedirs(os.path.dirname(rows), exist_ok=True)
      _original_pretrain(args, plan, "origrows", k, "--write-eval-rows",
                         rows)
      subprocess.run([sys.executable, __file__, "_eval_masks", "--data-dir",
                      args.data_dir, "--name", name, "--seed", str(k),
                      "--plan", args.plan, "--records", out,
                      "--eval-tfrecords", rows], check=True)


def eval_masks(args):
  """Our evaluator on our run NAME's last checkpoint with --seed's eval
  masks, into the file --records names."""
  sys.path.insert(0, REPO)
  from util.tf_quiet import import_tensorflow
  import_tensorflow()
  from loading.sources import open_source
  from pretrain import config as configure_pretraining
  from pretrain.trainer import Trainer
  plan = load_plan(args.plan)
  step = plan["pretrain"]["num_train_steps"]
  argv = _our_argv(plan, args.data_dir, f"evaloffset_masks{args.seed}",
                   args.seed, eval_only=True) + ["--do-eval"]
  hparams = json.loads(argv[argv.index("--hparams") + 1])
  hparams.update(mixed_precision="float32", init_checkpoint=os.path.join(
      args.data_dir, "models", args.name, f"ckpt-{step}"),
                 eval_tfrecords=args.eval_tfrecords)
  argv[argv.index("--hparams") + 1] = json.dumps(hparams)
  with Trainer(configure_pretraining.load_config(argv),
               open_source=open_source) as trainer:
    results = trainer.evaluate()
  results["global_step"] = step
  if args.eval_tfrecords:  # how many of the rows are distinct
    import tensorflow as tf
    rows = [tf.train.Example.FromString(r.numpy()).features.feature[
        "input_ids"].int64_list.value for r in tf.data.TFRecordDataset(
            args.eval_tfrecords)]
    results["eval_rows"] = len(rows)
    results["distinct_eval_rows"] = len({tuple(r) for r in rows})
  with open(args.records + ".tmp", "w") as f:
    json.dump(results, f, indent=2, sort_keys=True)
  os.replace(args.records + ".tmp", args.records)
  print(f"ours, eval masks {args.seed}: {json.dumps(results)}", flush=True)


def export_tf1(args):
  """DATA_DIR/models/origeval_NAME/model.ckpt-<S>: each kept checkpoint of
  our run NAME in the release's names, with its global_step."""
  sys.path.insert(0, REPO)
  from util.tf_quiet import import_tensorflow
  tf = import_tensorflow()
  from interop import tf1
  from loading import runs
  from loading.sources import find_pretrained
  source = os.path.join(args.data_dir, "models", args.name)
  target = os.path.join(args.data_dir, "models", "origeval_" + args.name)
  os.makedirs(target, exist_ok=True)
  paths = []
  for path in tf.train.get_checkpoint_state(
      source).all_model_checkpoint_paths:
    step = int(path.rsplit("-", 1)[1])
    prefix = os.path.join(target, f"model.ckpt-{step}")
    paths.append(os.path.basename(prefix))
    if not os.path.exists(prefix + ".index"):
      model = runs.restore_model(find_pretrained(os.path.join(
          source, os.path.basename(path))))
      tf1.write_checkpoint(prefix, tf1.release_weights(model), step)
  # Every step listed: the saver's own file names only the last.
  _write_checkpoint_state(target, paths)


def _copy_records(args, name, eval_dir, train_log, kind="pretrain"):
  dest = os.path.join(args.records, kind, name)
  os.makedirs(dest, exist_ok=True)
  _write_machine(dest)
  for f in sorted(os.listdir(eval_dir)):
    if f.endswith(".json"):
      shutil.copy(os.path.join(eval_dir, f), os.path.join(dest, f))
  if train_log and os.path.exists(train_log):
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
                         side)


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


# Our sides' heads: "ours" ran before dense_init defaulted to the
# original's glorot_uniform (its records were made with the truncated
# normal); "ours_orighead" has the original's init (and, for SQuAD, the
# release's head, qa_head electra, the default since 2026-12-06);
# "ours_xlnethead" the original's init with XLNet's SQuAD head (qa_head
# xlnet, the default before).
FINETUNE_SIDES = {
    "ours": {"model_hparam_overrides": {"dense_init": "truncated_normal"}},
    "ours_orighead": {"model_hparam_overrides": {"dense_init": "original"}},
    "ours_xlnethead": {"model_hparam_overrides": {"dense_init": "original"},
                       "qa_head": "xlnet"}}


def _finetune_ours(args, spec, model_dir, lr, task, outs, work, side):
  """All seeds in one run (num_trials; trial k has seed seed + k)."""
  seeds = sorted(outs)
  assert seeds == list(range(seeds[0], seeds[0] + len(seeds)))
  hparams = dict(spec["hparams"], learning_rate=lr, seed=seeds[0],
                 num_trials=len(seeds), keep_model="none",
                 **FINETUNE_SIDES[side])
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
                                        "cross_eval", "orig_eval",
                                        "evaluator_offset",
                                        "squad_split", "_eval_ours",
                                        "_export_tf1", "_eval_masks"])
  # The original's checkout and its venv (tests/reference/README.md).
  parser.add_argument("--original", default=os.environ.get("ORIG_ELECTRA"))
  parser.add_argument("--original-python", default=os.environ.get(
      "ORIG_VENV", "") and os.path.join(os.environ["ORIG_VENV"], "bin",
                                        "python"))
  parser.add_argument("--data-dir", required=True)
  parser.add_argument("--records",
                      default=os.path.join(REPO, "results", "original_parity"))
  parser.add_argument("--name", help="_eval_ours, _export_tf1: the run")
  parser.add_argument("--seed", type=int, default=1)
  parser.add_argument("--shared", default=os.path.join(
      os.path.dirname(REPO), "shared", "data"),
                      help="squad_split: the shared data folder")
  parser.add_argument("--plan", default=PLAN)
  parser.add_argument("--eval-tfrecords", default="",
                      help="_eval_masks: these rows instead of the held-out "
                      "shards")
  parser.add_argument("--mask-seeds", type=int, default=8,
                      help="evaluator_offset: eval-mask seeds per evaluator")
  parser.add_argument("--only", default="",
                      help="pretrain, orig_eval: these runs only, named as "
                      "in DATA_DIR/models, e.g. ours_seed2 or "
                      "electric_ours_seed2")
  args = parser.parse_args()
  if args.phase in ("pretrain", "finetune", "orig_eval",
                    "evaluator_offset") and not (
      args.original and args.original_python):
    parser.error("the original's code is needed: --original (or "
                 "$ORIG_ELECTRA) and --original-python (or $ORIG_VENV)")
  if args.phase == "finetune":
    finetune(args)
    baselines(args)
    return
  {"pretrain": pretrain, "baselines": baselines, "cross_eval": cross_eval,
   "orig_eval": orig_eval, "evaluator_offset": evaluator_offset,
   "squad_split": squad_split, "_eval_ours": eval_ours,
   "_export_tf1": export_tf1, "_eval_masks": eval_masks}[args.phase](args)


if __name__ == "__main__":
  main()
