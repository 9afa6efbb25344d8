"""The slot's pretraining through run_pretraining.py (its JAX path: the one
pretraining loop, its checkpoints, weights and --seeds): each unit (a run,
or seeds of one objective in one vmapped step) timed by a short run of the
script, then trained by it at equal FLOPs within the time left, a SIGTERM
at its deadline (the script saves and stops); its marks and last step
evaluated by the script's run class. What only a slot measures stays
here: the bf16 matmul peak, transformers' PyTorch step, MFU."""

import dataclasses
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time

import jax
import keras

import run_pretraining
from interop import npz_weights
from pretrain import arrays as arrays_lib
from pretrain import flops
from pretrain.jax_run import JaxRun
from pretrain.multi_seed import seed_config
from pretrain.config import PretrainingConfig
from pretrain.objective_names import ALIASES
from pretrain.run_config import CONFIG_FILE
from pretrain.run_config import read_saved_config
from slot.measure import hf_baseline
from slot.plan import budget_steps
from slot.plan import equal_flops_steps
from slot.plan import fit_budget
from slot.plan import plan
from slot.plan import slot_config
from util.config import load_hparams
from util.machine import jax_matmul_peak_tflops

NAMES = {"electra": "ELECTRA", "mlm": "BERT"}  # objective -> paper name
FLOPS_TARGET = 3e16  # per objective (issue 39)
SPEEDUP_TARGET = 1.5  # JAX ELECTRA step vs transformers' PyTorch one


def pretrain_phase(args, clock, result, write):
  """The baseline, the bf16 peak, each unit's speed, then the runs trained
  at equal FLOPs; the figures into `result`, written as they come."""
  tmp = tempfile.gettempdir()
  # Its metadata and counts here; the training rows are the script's.
  arrays = arrays_lib.load(args.data, lazy_train=True)
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
  devices = jax.devices()
  n = args.matmul_size or (8192 if devices[0].platform == "gpu" else 1024)
  peak = jax_matmul_peak_tflops(n, jax.numpy.bfloat16)
  result.update(device=devices[0].device_kind, platform=devices[0].platform,
                num_devices=len(devices), jax=jax.__version__,
                keras=keras.__version__, peak_bf16_tflops=peak)
  clock.log(f"{len(devices)} x {devices[0].device_kind} "
            f"({devices[0].platform}), jax {jax.__version__}; bf16 matmul "
            f"peak {peak:.1f} TFLOP/s ({n}^3)")
  write()

  data_dir = _data_dir(args.data, tmp)
  runs = plan(args)
  weights_out = (args.weights_out == "yes" or
                 (args.weights_out == "auto" and len(runs) <= 2))
  units, entries = [], []
  for members in _units(runs, args.seeds_per_step):
    seeds = [k for _, _, k, _ in members]
    # Seed 1's folder: --seeds names seed K's FOLDER.seedK, as plan() does.
    base = slot_config(members[0][1], args, arrays, data_dir, os.path.join(
        tmp, "slot_runs", members[0][3].split(".seed")[0]))
    arrays.check(base)  # its vocab_size
    measured = _measure(base, seeds, args, clock, tmp)
    unit = {"base": base, "seeds": seeds, "entries": []}
    for run_name, written, k, folder in members:
      config = seed_config(base, k)
      paper = NAMES.get(ALIASES.get(written, written), written)
      entry = {"objective": config.objective, "written": written,
               "run": run_name, "pretrain_seed": k,
               "name": f"{paper}-{args.size}" + (f" seed {k}" if k > 1
                                                  else ""),
               "folder": folder, "model_dir": config.model_dir,
               "weights_dir": os.path.join(tmp, "slot_weights", folder),
               "unit": "+".join(m[0] for m in members),
               "seeds_per_step": len(seeds), "batch": config.train_batch_size,
               "seq_len": config.max_seq_length, **measured,
               "train_flops_per_step": flops.train_flops_per_step(config),
               "model_flops_per_step": flops.model_flops_per_step(config)}
      # step_s is the unit's step (all its seeds).
      entry["mfu"] = entry["model_flops_per_step"] / entry["step_s"] / (
          peak * 1e12)
      entry["unit_mfu"] = entry["mfu"] * len(seeds)
      hf = result["hf_pytorch_electra"]
      if config.objective == "electra" and "step_s" in hf:
        entry["speedup_vs_hf_pytorch"] = (hf["step_s"] / entry["step_s"] *
                                          len(seeds))
      clock.log(f"{entry['name']}: {entry['step_s'] * 1e3:.2f} ms/step"
                + (f" for {len(seeds)} seeds ({entry['unit']})"
                   if len(seeds) > 1 else "") +
                f", {entry['seq_per_s']:,.0f} seq/s, MFU {entry['mfu']:.1%} "
                f"(first call {entry['first_call_s']:.1f} s)" +
                (f", {entry['speedup_vs_hf_pytorch']:.2f}x transformers' "
                 "PyTorch ELECTRA" if "speedup_vs_hf_pytorch" in entry
                 else ""))
      unit["entries"].append(entry)
      entries.append(entry)
    units.append(unit)
  result["objectives"] = entries
  write()

  budget = _train_all(args, clock, units, peak,
                      args.out if weights_out else "", write)
  _report(result, entries, budget, clock, write)


def _data_dir(arrays_folder, tmp):
  """A DATA_DIR whose pretrain_arrays/ is the slot's arrays folder, as
  run_pretraining.py's JAX path reads it without TensorFlow."""
  data_dir = os.path.join(tmp, "slot_data_dir")
  link = os.path.join(data_dir, arrays_lib.CACHE)
  os.makedirs(data_dir, exist_ok=True)
  if os.path.islink(link):
    os.remove(link)
  os.symlink(os.path.abspath(arrays_folder), link)
  return data_dir


def _units(runs, per_step):
  """The plan's runs of each objective in groups of up to `per_step`
  seeds (one --seeds call each), in the plan's order."""
  by_objective = {}
  for run in runs:
    by_objective.setdefault(run[1], []).append(run)
  units = [members[i:i + per_step] for members in by_objective.values()
           for i in range(0, len(members), per_step)]
  order = [r[0] for r in runs]
  return sorted(units, key=lambda u: order.index(u[0][0]))


def _argv(config, seeds, **changes):
  """run_pretraining.py's argv for `config` (+ changes) and `seeds`."""
  values = dataclasses.asdict(dataclasses.replace(config, **changes))
  argv = ["--data-dir", values.pop("data_dir"), "--model-dir",
          values.pop("model_dir")]
  for key in ("model_name", "seeds"):
    values.pop(key)
  argv += ["--hparams", json.dumps(values)]
  return argv + (["--seeds", ",".join(map(str, seeds))] if seeds != [1]
                 else [])


def _run_script(argv, deadline, clock):
  """run_pretraining.main(argv) in this process; from `deadline`
  (time.time(); None: none) a SIGTERM every few seconds until it ends,
  the script's preemption: it saves, then stops (one that arrives before
  its loop is ready is ignored; the next one counts). Returns whether it
  stopped early."""
  previous = signal.signal(signal.SIGTERM, lambda *_: clock.log(
      "SIGTERM outside the training loop: ignored"))
  done = threading.Event()

  def notify():
    if done.wait(max(0.0, deadline - time.time())):
      return
    while not done.is_set():
      os.kill(os.getpid(), signal.SIGTERM)
      done.wait(5)

  sender = threading.Thread(target=notify, daemon=True)
  if deadline:
    sender.start()
  try:
    run_pretraining.main(argv)
    return False
  except SystemExit as e:
    if e.code != 143:
      raise
    return True
  finally:
    done.set()
    if deadline:
      sender.join()  # no SIGTERM once the handler is put back
    signal.signal(signal.SIGTERM, previous)


def _scalars(model_dir):
  path = os.path.join(model_dir, "train", "scalars.jsonl")
  with open(path) as f:
    return [json.loads(line) for line in f if line.strip()]


def _measure(base, seeds, args, clock, tmp):
  """The unit's speed from a short run of the script from the initial
  weights (a scratch folder, removed): its first call (the compile) and
  its fastest call after."""
  scratch = dataclasses.replace(base, model_dir=os.path.join(
      tmp, "slot_measure", os.path.basename(base.model_dir)))
  dirs = [seed_config(scratch, k).model_dir for k in seeds]
  for folder in dirs:
    shutil.rmtree(folder, ignore_errors=True)
  chunk = args.chunk
  steps = chunk * (args.measure_calls + 1)
  clock.log(f"timing {base.objective} ({len(seeds)} seed(s)): {steps} steps "
            "of run_pretraining.py")
  _run_script(_argv(scratch, seeds, num_train_steps=steps,
                    iterations_per_loop=chunk, save_checkpoints_steps=steps,
                    num_warmup_steps=0, log_every_steps=0), None, clock)
  rates = [line["sequences_per_second"] for line in _scalars(dirs[0])]
  for folder in dirs:
    shutil.rmtree(folder, ignore_errors=True)
  batch = base.train_batch_size
  step_s = batch / max(rates[1:] or rates)
  return {"first_call_s": chunk * batch / rates[0], "step_s": step_s,
          "steps_per_s": 1 / step_s, "seq_per_s": batch / step_s,
          "chunk": chunk, "calls": args.measure_calls}


def _train_all(args, clock, units, peak, returned, write):
  """Each unit trained by the script for its share of the budget (held-out
  evals at --checkpoints marks); returns the train FLOPs per run.
  --budget-flops that does not fit the time left at the measured speeds
  is cut to what fits."""
  heads = [unit["entries"][0] for unit in units]  # one per program
  left = args.time_limit - clock.elapsed() - args.reserve_seconds
  if args.budget_flops:
    budget, need = fit_budget(heads, args.budget_flops, left)
    clock.log(f"budget {args.budget_flops:.3g} FLOPs per run: {need:.0f} s "
              f"of training at the measured speeds, {left:.0f} s left")
    if budget < args.budget_flops:
      clock.log(f"does not fit: training {budget:.3g} FLOPs per run "
                f"instead ({budget / args.budget_flops:.0%} of it)")
    steps = budget_steps(heads, budget, args.chunk)
  else:
    seconds = max(0.0, min(args.train_seconds, left))
    budget, steps = equal_flops_steps(heads, seconds, args.chunk)
    clock.log(f"training budget {seconds:.0f} s: {budget:.3g} FLOPs per "
              "objective")
  clock.log(f"steps {dict(zip([h['unit'] for h in heads], steps))}")
  deadline = clock.start + args.time_limit - args.reserve_seconds
  given_warmup = any("num_warmup_steps" in load_hparams(spec)
                     for spec in args.hparams)
  for unit, num_steps in zip(units, steps):
    # The script saves every `every` steps and at the last: the marks.
    every = max(args.chunk, int(round(num_steps / args.checkpoints /
                                      args.chunk)) * args.chunk)
    marks = [every * j for j in range(1, args.checkpoints)
             if every * j < num_steps]
    changes = dict(num_train_steps=num_steps, iterations_per_loop=args.chunk,
                   save_checkpoints_steps=every,
                   keep_checkpoint_max=len(marks) + 2)
    if not given_warmup:  # else the --hparams' num_warmup_steps
      changes["num_warmup_steps"] = int(round(args.warmup_fraction *
                                              num_steps))
    base = dataclasses.replace(unit["base"], **changes)
    start = time.time()
    stopped = _run_script(_argv(base, unit["seeds"]), deadline, clock)
    train_s = time.time() - start
    if stopped:
      clock.log(f"{unit['entries'][0]['unit']}: the deadline stopped it "
                "(saved; the same command goes on from there)")
    for entry, k in zip(unit["entries"], unit["seeds"]):
      config = seed_config(base, k)
      kept = [m for m in marks if os.path.exists(
          os.path.join(config.model_dir, f"ckpt-{m}.npz"))]
      _finish(args, clock, config, entry, train_s, peak, returned, write,
              kept)
  return budget


def _evaluate(model_dir, steps):
  """The script's held-out eval (its run class, built once, on the run's
  saved config) of model_dir's checkpoints at `steps`, then of its latest
  (whose eval_results.json it writes); and the precision it resolved."""
  config = PretrainingConfig(**read_saved_config(os.path.join(
      model_dir, CONFIG_FILE))[1])
  config.do_train, config.do_eval = False, True
  results = []
  with JaxRun(config) as run:
    for step in steps + [None]:
      run.config.eval_checkpoint = (
          os.path.join(model_dir, f"ckpt-{step}.npz") if step else "")
      results.append(run.evaluate())
    return results, run.precision


def _finish(args, clock, config, entry, train_s, peak, returned, write,
            marks):
  """A trained run's figures, float16 weights and held-out evals (at its
  kept `marks` and its last step) into `entry`."""
  manifest, weights = npz_weights.read(config.model_dir)  # the script's
  step = manifest["step"]
  entry["train_s"] = train_s  # its unit's: the seeds trained together
  entry["steps"] = step
  entry["planned_steps"] = config.num_train_steps
  entry["warmup_steps"] = config.num_warmup_steps
  entry["train_flops"] = step * entry["train_flops_per_step"]
  entry["model_flops"] = step * entry["model_flops_per_step"]
  entry["train_mfu"] = entry["model_flops"] / train_s / (peak * 1e12)
  entry["unit_train_mfu"] = entry["train_mfu"] * entry["seeds_per_step"]
  entry["last_train_logs"] = _scalars(config.model_dir)[-1]
  paths = npz_weights.write(
      entry["weights_dir"], weights, manifest["pretrain_config"],
      dtype=args.weights_dtype, step=step,
      extra={"trained_by": manifest.get("trained_by", ""), "slot": {
          k: entry[k] for k in ("name", "steps", "train_flops")}})
  entry["weights"] = [os.path.relpath(p, os.path.dirname(
      entry["weights_dir"])) for p in paths]
  if returned:
    shutil.copytree(entry["weights_dir"],
                    os.path.join(returned, entry["folder"]),
                    dirs_exist_ok=True)
  clock.log(f"wrote {len(paths)} files to {entry['folder']}/" + (
      " (and $OUT)" if returned else ""))
  write()
  results, entry["precision"] = _evaluate(config.model_dir, marks)
  entry["eval"] = results[-1]
  entry["curve"] = [dict(r, flops=r["global_step"] *
                         entry["train_flops_per_step"]) for r in results]
  clock.log(f"{entry['name']} eval ({entry['steps']} steps, "
            f"{entry['train_flops']:.3g} FLOPs): " + ", ".join(
                f"{k} {v:.4f}" for k, v in entry["eval"].items()
                if isinstance(v, float)))
  write()


def _report(result, entries, budget, clock, write):
  """The targets and the aggregate MFU."""
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
  # Every run's model FLOPs over the seconds the units trained.
  seconds = sum({e["unit"]: e["train_s"] for e in entries}.values())
  result["aggregate_mfu"] = sum(e["model_flops"] for e in entries) / max(
      seconds, 1e-9) / (result["peak_bf16_tflops"] * 1e12)
  write()
  clock.log(f"aggregate MFU {result['aggregate_mfu']:.1%}: "
            f"{sum(e['model_flops'] for e in entries):.3g} model FLOPs of "
            f"{len(entries)} run(s) in {seconds:.0f} s of training")
  clock.log(f"targets: >= {FLOPS_TARGET:.0e} FLOPs each: "
            f"{result['targets']['met_flops']}; >= {SPEEDUP_TARGET}x "
            f"PyTorch ELECTRA: {result['targets']['met_speedup']}; "
            f"tensorflow imported: {result['tensorflow_imported']}")
