"""One GPU slot's work (docs/gpu_slot.md): measure, then pretrain ELECTRA
and BERT at equal FLOPs, without TensorFlow.

  KERAS_BACKEND=jax python run_gpu_slot.py --data .slot_data --out $OUT
      [--size small] [--batch 128] [--train-seconds 360] [--time-limit 480]

Run through gpu_slot.sh, which installs the carried wheels first. In order:
  1. the device, and JAX's bf16 matmul peak (an 8192^3 product on a GPU);
  2. transformers' PyTorch ELECTRA step on the same device and batches
     (benchmarks/hf_electra_step.py, in a subprocess, before JAX holds
     the GPU);
  3. for each objective (ELECTRA, BERT: configs/<objective>_<size>.json,
     temperature 1.0), the JAX driver's steps (pretrain/jax_trainer.py),
     all compiled at once in threads, then each timed from the initial
     weights: seq/s and MFU;
  4. steps per objective for equal training FLOPs (ELECTRA appendix E
     convention, pretrain/flops.py) so that both runs end within the
     training time left, warmup a fraction of them; both trained, each
     evaluated on the held-out examples;
  5. $OUT/<objective>_<size>/ (.npz weight shards + weights.json, which
     run_finetuning.py / run_pretraining.py / export_model.py
     --init-checkpoint read on the CPU) and $OUT/slot.json (the figures);
  6. when DATA/finetune/ holds fine-tuning arrays (prepare_gpu_slot.py
     --glue-dir), each model just written fine-tuned on each task with
     --finetune-seeds seeds (finetune/jax_trainer.py), seed by seed while
     time is left; the dev outputs go to $OUT/finetune_outputs.npz, which
     collect_gpu_slot.py scores on the CPU with each task's own scorer.
--pretrained DIR (repeatable) skips 2-5 and fine-tunes those weights.
Nothing here imports TensorFlow (slot.json says so).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "jax")
ROOT = os.path.dirname(os.path.abspath(__file__))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

from util.errors import main_guard  # noqa: E402

NAMES = {"electra": "ELECTRA", "mlm": "BERT"}  # objective -> paper name
RESULTS = "slot.json"
MAX_FILES, MAX_FILE_BYTES = 8, 16 * 2 ** 20  # what comes back from $OUT
FLOPS_TARGET = 3e16  # per objective (issue 39)
SPEEDUP_TARGET = 1.5  # JAX ELECTRA step vs transformers' PyTorch one


class Clock:
  def __init__(self, started_at=None):
    self.start = started_at or time.time()

  def elapsed(self):
    return time.time() - self.start

  def log(self, message):
    print(f"[{self.elapsed():6.1f}s] {message}", flush=True)


def parse_args(argv):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                              allow_abbrev=False)
  p.add_argument("--data", default=".slot_data",
                 help="pretrain/arrays.py folder (prepare_gpu_slot.py)")
  p.add_argument("--out", default=os.environ.get("OUT", ""))
  p.add_argument("--size", default="small", help="configs/<obj>_<size>.json")
  p.add_argument("--objectives", default="electra,mlm",
                 help="NAME[:K],...: K pretraining seeds of NAME (any "
                 "objective, its preset as run_comparison.py picks it)")
  p.add_argument("--budget-flops", type=float, default=0,
                 help="train FLOPs per run (appendix E); 0: equal FLOPs "
                 "sized from the measured speeds and --train-seconds")
  p.add_argument("--checkpoints", type=int, default=1,
                 help="held-out evals at k/N of each run (the curves)")
  p.add_argument("--weights-out", default="auto",
                 help="yes: the weights come back in $OUT; no: kept on the "
                 "slot only (for fine-tuning); auto: yes for <= 2 runs")
  p.add_argument("--batch", type=int, default=128)
  p.add_argument("--hparams", action="append", default=[],
                 help="JSON (file or string) applied to every objective")
  p.add_argument("--precision", default="auto")
  p.add_argument("--chunk", type=int, default=100,
                 help="steps per jitted call; step counts are multiples")
  p.add_argument("--measure-calls", type=int, default=3)
  p.add_argument("--train-seconds", type=float, default=360,
                 help="both objectives' training together, at most")
  p.add_argument("--time-limit", type=float, default=480,
                 help="the whole command's seconds (a slot's may be 600)")
  p.add_argument("--reserve-seconds", type=float, default=30,
                 help="kept after training for eval and weights")
  p.add_argument("--warmup-fraction", type=float, default=0.1)
  p.add_argument("--eval-steps", type=int, default=32)
  p.add_argument("--weights-dtype", default="float16")
  p.add_argument("--hf-steps", type=int, default=20,
                 help="timed PyTorch steps (x3); 0 skips the baseline")
  p.add_argument("--matmul-size", type=int, default=0,
                 help="0: 8192 on a GPU, 1024 on a CPU")
  p.add_argument("--finetune-data", default="",
                 help="finetune/arrays.py folder (default DATA/finetune "
                 "when it exists)")
  p.add_argument("--finetune-seeds", type=int, default=3)
  p.add_argument("--finetune-first-seed", type=int, default=1,
                 help="start at this fine-tuning seed (1-based): a later "
                 "call goes on where an earlier one stopped")
  p.add_argument("--finetune-chunk", type=int, default=50,
                 help="fine-tuning steps per jitted call")
  p.add_argument("--pretrained", action="append", default=[],
                 help="npz weights folder to fine-tune (skips pretraining)")
  p.add_argument("--started-at", type=float, default=0,
                 help="epoch seconds the command began (gpu_slot.sh)")
  args = p.parse_args(argv)
  if not args.out:
    p.error("--out (or $OUT) is required")
  if not args.finetune_data and os.path.isdir(os.path.join(args.data,
                                                           "finetune")):
    args.finetune_data = os.path.join(args.data, "finetune")
  if args.pretrained and not args.finetune_data:
    p.error("--pretrained needs fine-tuning arrays (--finetune-data)")
  return args


def slot_config(name, args, arrays, model_dir, pretrain_seed=1):
  """`name`'s preset at --size (comparison/plan.py's choice: its own
  configs/<objective>_<size>.json, or ELECTRA's for an ablation) +
  --hparams, at the slot's batch; seed K adds K - 1 to the seed."""
  from comparison.plan import preset
  from pretrain.config import PretrainingConfig
  from util.config import apply_overrides
  from util.config import load_hparams
  config = apply_overrides(PretrainingConfig(), preset(name, args.size),
                           source=f"the {name} preset")
  objective = config.objective
  for spec in args.hparams:
    config = apply_overrides(config, load_hparams(spec), source=spec)
  config.objective = objective
  config.seed += pretrain_seed - 1
  config.temperature = 1.0
  config.train_batch_size = args.batch
  config.eval_batch_size = args.batch
  config.max_seq_length = arrays.meta["max_seq_length"]
  config.max_predictions_per_seq = None  # from mask_prob and the length
  config.iterations_per_loop = args.chunk
  # Each held-out example once, at most --eval-steps batches of them.
  config.num_eval_steps = max(1, min(
      args.eval_steps, arrays.num_examples("heldout") // args.batch))
  config.mixed_precision = args.precision
  config.data_dir = ""
  config.pretrain_tfrecords = os.path.abspath(args.data)
  config.model_dir = model_dir
  config.validate()
  return config


def hf_baseline(args, clock):
  """benchmarks/hf_electra_step.py in a subprocess (JAX on its CPU)."""
  if not args.hf_steps:
    return {"skipped": "--hf-steps 0"}
  with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "hf.json")
    command = [sys.executable, os.path.join(ROOT, "benchmarks",
                                            "hf_electra_step.py"),
               "--arrays", args.data, "--batch", str(args.batch),
               "--steps", str(args.hf_steps), "--json", out,
               "--hparams", os.path.join(ROOT, "configs",
                                         f"electra_{args.size}.json")]
    for spec in args.hparams:
      command += ["--hparams", spec]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    clock.log("transformers' PyTorch ELECTRA step: " +
              " ".join(command[1:]))
    try:
      done = subprocess.run(command, env=env, timeout=240, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except subprocess.TimeoutExpired:
      return {"error": "timed out after 240 s"}
    print(done.stdout[-3000:], end="", flush=True)
    if done.returncode or not os.path.exists(out):
      lines = done.stdout.strip().splitlines() or ["no output"]
      return {"error": f"exit {done.returncode}: {lines[-1][:300]}"}
    with open(out) as f:
      return json.load(f)


def plan(args):
  """[(name, objective as written, pretrain seed K, folder)], seed-major."""
  runs = []
  for item in args.objectives.split(","):
    name, _, seeds = item.strip().partition(":")
    for k in range(1, int(seeds or 1) + 1):
      paper = {"mlm": "bert", "bert": "bert"}.get(name, name)
      folder = f"{paper}_{args.size}" + (f".seed{k}" if k > 1 else "")
      runs.append((f"{name}.seed{k}" if k > 1 else name, name, k, folder))
  return sorted(runs, key=lambda r: r[2])


def budget_steps(entries, budget, chunk):
  """Steps spending `budget` train FLOPs per run, multiples of `chunk`."""
  return [max(chunk, int(round(budget / e["train_flops_per_step"] / chunk))
              * chunk) for e in entries]


def equal_flops_steps(entries, seconds, chunk):
  """Steps per objective with equal training FLOPs, all within `seconds`
  at the measured speeds; multiples of `chunk` (at least one chunk)."""
  per_flop = sum(e["step_s"] / e["train_flops_per_step"] for e in entries)
  budget = seconds / per_flop
  return budget, [max(chunk, int(budget / e["train_flops_per_step"] / chunk)
                      * chunk) for e in entries]


def compile_all(trainers, chunk, clock):
  """Each trainer's train chunk and eval step, traced here in turn and
  compiled in parallel threads (XLA compiles without the GIL); on any
  failure the steps compile on their first call instead."""
  from concurrent import futures
  start = time.time()
  lowered = {(name, kind): step for name, trainer in trainers.items()
             for kind, step in trainer.lower(chunk).items()}
  traced = time.time() - start

  def compile_one(step):
    began = time.time()
    return step.compile(), time.time() - began

  try:
    with futures.ThreadPoolExecutor(len(lowered)) as pool:
      done = dict(zip(lowered, pool.map(compile_one, lowered.values())))
  except Exception as e:  # pylint: disable=broad-except
    clock.log(f"parallel compile failed ({type(e).__name__}: "
              f"{str(e)[:200]}); compiling on first use")
    return {"error": str(e)[:500], "trace_s": traced}
  for name, trainer in trainers.items():
    trainer.install(chunk, {kind: done[(name, kind)][0]
                            for kind in ("train", "eval")})
  seconds = {f"{name}_{kind}": round(t, 1)
             for (name, kind), (_, t) in done.items()}
  wall = time.time() - start
  clock.log(f"traced in {traced:.0f} s, compiled in parallel in "
            f"{wall - traced:.0f} s: {seconds}")
  return {"trace_s": traced, "wall_s": wall, "compile_s": seconds}


def out_files(out):
  found = []
  for base, _, files in os.walk(out):
    found += [os.path.join(base, f) for f in files]
  return sorted(found)


@main_guard
def main(argv=None):
  """Runs the slot; slot.json is rewritten after each phase, so a failure
  keeps what was measured (and its error)."""
  args = parse_args(argv)
  clock = Clock(args.started_at or None)
  os.makedirs(args.out, exist_ok=True)
  result = {"command": sys.argv, "size": args.size}

  def write():
    result["tensorflow_imported"] = "tensorflow" in sys.modules
    result["seconds"] = clock.elapsed()
    with open(os.path.join(args.out, RESULTS), "w") as f:
      json.dump(result, f, indent=2)

  try:
    return run(args, clock, result, write)
  except BaseException as e:
    result["error"] = f"{type(e).__name__}: {str(e)[:1000]}"
    write()
    raise


def run(args, clock, result, write):
  if args.pretrained:
    import keras
    clock.log(f"python {sys.version.split()[0]}, keras {keras.__version__} "
              f"({keras.backend.backend()}); fine-tuning "
              f"{', '.join(args.pretrained)}")
    models = {os.path.basename(os.path.normpath(p)): p
              for p in args.pretrained}
    finetune_phase(args, clock, result, write, models)
    report_out(args, clock)
    return result
  pretrain_phase(args, clock, result, write)
  if args.finetune_data:
    models = {e["folder"]: e["weights_dir"] for e in result["objectives"]}
    finetune_phase(args, clock, result, write, models)
  report_out(args, clock)
  return result


def pretrain_phase(args, clock, result, write):
  import keras
  from pretrain import arrays as arrays_lib
  arrays = arrays_lib.load(args.data)
  clock.log(f"python {sys.version.split()[0]}, keras {keras.__version__} "
            f"({keras.backend.backend()}); arrays {args.data}: "
            f"{arrays.num_examples('train'):,} training and "
            f"{arrays.num_examples('heldout'):,} held-out examples of "
            f"{arrays.meta['max_seq_length']} tokens")
  result["arrays"] = {k: arrays.meta.get(k) for k in (
      "source", "train_examples", "train_tokens", "heldout_examples",
      "eval_source", "vocab_size")}
  result["hf_pytorch_electra"] = hf_baseline(args, clock)
  write()

  import jax
  from benchmarks.jax_throughput import matmul_peak_tflops
  from pretrain import flops
  from pretrain.jax_trainer import JaxTrainer
  from util.config import load_hparams
  devices = jax.devices()
  device = devices[0]
  n = args.matmul_size or (8192 if device.platform == "gpu" else 1024)
  peak = matmul_peak_tflops(n, jax.numpy.bfloat16)
  result.update(device=device.device_kind, platform=device.platform,
                num_devices=len(devices), jax=jax.__version__,
                keras=keras.__version__, peak_bf16_tflops=peak)
  clock.log(f"{len(devices)} x {device.device_kind} ({device.platform}), "
            f"jax {jax.__version__}; bf16 matmul peak {peak:.1f} TFLOP/s "
            f"({n}^3)")
  write()

  runs = plan(args)
  weights_out = (args.weights_out == "yes" or
                 (args.weights_out == "auto" and len(runs) <= 2))
  weights_root = args.out if weights_out else os.path.join(
      tempfile.gettempdir(), "slot_weights")
  trainers, entries = {}, []
  for run_name, written, k, folder in runs:
    config = slot_config(written, args, arrays,
                         os.path.join(weights_root, folder), k)
    trainers[run_name] = JaxTrainer(config, arrays, log=clock.log)
  result["compile"] = compile_all(trainers, args.chunk, clock)
  for (run_name, written, k, folder), trainer in zip(runs, trainers.values()):
    config = trainer.config
    objective = config.objective
    name = f"{NAMES.get(objective, written)}-{args.size}" + (
        f" seed {k}" if k > 1 else "")
    measured = trainer.measure(args.chunk, args.measure_calls)
    entry = {"objective": objective, "written": written, "run": run_name,
             "pretrain_seed": k, "name": name, "folder": folder,
             "weights_dir": config.model_dir,
             "batch": config.train_batch_size,
             "seq_len": config.max_seq_length,
             "precision": trainer.precision, **measured,
             "train_flops_per_step": flops.train_flops_per_step(config),
             "model_flops_per_step": flops.model_flops_per_step(config)}
    entry["mfu"] = entry["model_flops_per_step"] / entry["step_s"] / (
        peak * 1e12)
    hf = result["hf_pytorch_electra"]
    if objective == "electra" and "step_s" in hf:
      entry["speedup_vs_hf_pytorch"] = hf["step_s"] / entry["step_s"]
    clock.log(f"{name}: {entry['step_s'] * 1e3:.2f} ms/step, "
              f"{entry['seq_per_s']:,.0f} seq/s, MFU {entry['mfu']:.1%} "
              f"(first call {entry['first_call_s']:.1f} s)" +
              (f", {entry['speedup_vs_hf_pytorch']:.2f}x transformers' "
               "PyTorch ELECTRA" if "speedup_vs_hf_pytorch" in entry else ""))
    entries.append(entry)
  result["objectives"] = entries
  write()

  if args.budget_flops:
    budget, steps = args.budget_flops, budget_steps(
        entries, args.budget_flops, args.chunk)
    clock.log(f"budget {budget:.3g} FLOPs per run -> steps "
              f"{dict(zip(trainers, steps))}")
  else:
    left = args.time_limit - clock.elapsed() - args.reserve_seconds
    seconds = max(0.0, min(args.train_seconds, left))
    budget, steps = equal_flops_steps(entries, seconds, args.chunk)
    clock.log(f"training budget {seconds:.0f} s: {budget:.3g} FLOPs per "
              f"objective -> steps {dict(zip(trainers, steps))}")
  deadline = clock.start + args.time_limit - args.reserve_seconds
  given_warmup = any("num_warmup_steps" in load_hparams(spec)
                     for spec in args.hparams)
  for entry, num_steps in zip(entries, steps):
    trainer = trainers[entry["run"]]
    if not given_warmup:  # else the --hparams' num_warmup_steps
      trainer.config.num_warmup_steps = int(round(args.warmup_fraction *
                                                  num_steps))
    start, history, entry["curve"] = time.time(), [], []
    marks = sorted({max(args.chunk, int(round(num_steps * j / args.checkpoints
                                              / args.chunk)) * args.chunk)
                    for j in range(1, args.checkpoints + 1)} - {num_steps})
    for mark in marks + [num_steps]:
      # The schedule is the whole run's at every mark.
      history += trainer.train(num_steps, chunk=args.chunk,
                               deadline=deadline, stop_at=mark)
      if trainer.step < mark:  # past the deadline
        break
      if mark != num_steps:
        entry["curve"].append(dict(trainer.evaluate(), flops=mark * entry[
            "train_flops_per_step"]))
    entry["train_s"] = time.time() - start
    entry["steps"] = trainer.step
    entry["planned_steps"] = num_steps
    entry["warmup_steps"] = trainer.config.num_warmup_steps
    entry["train_flops"] = trainer.step * entry["train_flops_per_step"]
    entry["model_flops"] = trainer.step * entry["model_flops_per_step"]
    entry["train_mfu"] = entry["model_flops"] / entry["train_s"] / (
        peak * 1e12)
    entry["last_train_logs"] = history[-1] if history else {}
    paths = trainer.save(entry["weights_dir"],
                         dtype=args.weights_dtype,
                         extra={"slot": {k: entry[k] for k in (
                             "name", "steps", "train_flops")}})
    entry["weights"] = [os.path.relpath(p, weights_root) for p in paths]
    clock.log(f"wrote {len(paths)} files to {entry['folder']}/")
    write()
    entry["eval"] = trainer.evaluate()
    entry["curve"].append(dict(entry["eval"], flops=entry["train_flops"]))
    clock.log(f"{entry['name']} eval ({entry['steps']} steps, "
              f"{entry['train_flops']:.3g} FLOPs): " + ", ".join(
                  f"{k} {v:.4f}" for k, v in entry["eval"].items()
                  if isinstance(v, float)))
    write()

  electra = next((e for e in entries if e["objective"] == "electra"), None)
  result["budget_flops"] = budget
  result["targets"] = {
      "train_flops_per_objective": FLOPS_TARGET,
      "met_flops": all(e["train_flops"] >= FLOPS_TARGET for e in entries),
      "speedup_vs_hf_pytorch": SPEEDUP_TARGET,
      "met_speedup": bool(electra and electra.get(
          "speedup_vs_hf_pytorch", 0) >= SPEEDUP_TARGET)}
  write()
  for e in entries:
    clock.log(f"{e['name']}: {e['steps']} steps, {e['train_flops']:.3g} "
              f"FLOPs in {e['train_s']:.0f} s, {e['seq_per_s']:,.0f} seq/s, "
              f"MFU {e['mfu']:.1%} (timed) / {e['train_mfu']:.1%} (run)")
  clock.log(f"targets: >= {FLOPS_TARGET:.0e} FLOPs each: "
            f"{result['targets']['met_flops']}; >= {SPEEDUP_TARGET}x "
            f"PyTorch ELECTRA: {result['targets']['met_speedup']}; "
            f"tensorflow imported: {result['tensorflow_imported']}")


def report_out(args, clock):
  files = out_files(args.out)
  big = [f for f in files if os.path.getsize(f) > MAX_FILE_BYTES]
  clock.log(f"$OUT holds {len(files)} files, "
            f"{sum(os.path.getsize(f) for f in files) / 1e6:.1f} MB" +
            (f"; OVER the {MAX_FILES}-file limit" if len(files) > MAX_FILES
             else "") + (f"; over 16 MiB: {big}" if big else ""))


def finetune_phase(args, clock, result, write, models):
  """Each of `models` ({name: npz folder}) fine-tuned on each task of the
  fine-tuning arrays, --finetune-seeds seeds, seed-major while time is
  left; dev outputs to $OUT/finetune_outputs.npz, figures to slot.json."""
  import dataclasses
  import jax
  import numpy as np
  from finetune import arrays as ft_arrays
  from finetune import task_builder
  from finetune.jax_trainer import JaxFinetuner
  from finetune.model import model_config_for
  from finetune.model import pretrained_encoder_weights
  from loading.sources import find_pretrained
  data = ft_arrays.load(args.finetune_data)
  config = data.config
  device = jax.devices()[0]
  result.setdefault("device", device.device_kind)
  result.setdefault("platform", device.platform)
  result.setdefault("jax", jax.__version__)
  config.mixed_precision = ("bfloat16" if args.precision == "auto" and
                            device.platform != "cpu" else
                            "float32" if args.precision == "auto" else
                            args.precision)
  tasks = task_builder.get_tasks(config, None)
  for task in tasks:
    task.restore_labels(data.meta["tasks"][task.name]["labels"])
  encoders, shapes = {}, {}
  for name, path in models.items():
    pretrained = find_pretrained(path)
    model_config = model_config_for(pretrained, config)
    encoders[name] = pretrained_encoder_weights(pretrained, config)
    shapes[name] = model_config
  # One compiled step per task and encoder shape (BERT-Small and
  # ELECTRA-Small's discriminator share one).
  distinct = {}
  for name, model_config in shapes.items():
    distinct.setdefault(repr(dataclasses.asdict(model_config)),
                        (name, model_config))
  finetuners = {}
  for key, (_, model_config) in distinct.items():
    for task in tasks:
      finetuners[(key, task.name)] = JaxFinetuner(
          config, model_config, task, data, device, clock.log,
          chunk=args.finetune_chunk)
  clock.log(f"fine-tuning {', '.join(models)} on "
            f"{', '.join(t.name for t in tasks)} "
            f"({config.mixed_precision}, {args.finetune_seeds} seeds, "
            f"steps {dict((t, data.meta['tasks'][t]['train_steps']) for t in data.task_names)})")
  labelled = {(task if len(distinct) == 1 else f"{task}{i}"): f
              for i, ((_, task), f) in enumerate(finetuners.items())}
  result["finetune_compile"] = compile_all(labelled, 0, clock)
  entries = result["finetune"] = []
  outputs = {}
  deadline = clock.start + args.time_limit - 10
  per_trial = {}
  for seed_index in range(args.finetune_first_seed - 1, args.finetune_seeds):
    seed = config.seed + seed_index
    for name in models:
      key = repr(dataclasses.asdict(shapes[name]))
      for task in tasks:
        guess = per_trial.get(task.name, 0.0)
        if time.time() + guess > deadline:
          clock.log(f"skipping {name} {task.name} seed {seed}: "
                    f"{guess:.0f} s would pass the time limit")
          continue
        began = time.time()
        out, summary = finetuners[(key, task.name)].trial(encoders[name],
                                                          seed)
        per_trial[task.name] = max(guess, time.time() - began)
        for k, v in out.items():
          outputs[f"{name}/{task.name}/{seed}/{k}"] = v
        entries.append({"model": name, "task": task.name, "seed": seed,
                        "trial_s": time.time() - began, **summary})
        clock.log(f"{name} {task.name} seed {seed}: {summary['steps']} "
                  f"steps in {summary['train_s']:.1f} s, loss "
                  f"{summary['final_loss']:.4f}, dev loss "
                  f"{summary['dev_loss']:.4f}")
    np.savez_compressed(os.path.join(args.out, ft_arrays.OUTPUTS), **outputs)
    write()
  result["finetune_config"] = dataclasses.asdict(config)
  write()
  return result


if __name__ == "__main__":
  main()
