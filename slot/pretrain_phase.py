"""The slot's pretraining: each run measured, trained at equal FLOPs and
evaluated on the held-out examples."""

import os
import sys
import tempfile

import jax
import keras

from pretrain import arrays as arrays_lib
from pretrain import flops
from pretrain.objective_names import ALIASES
from pretrain.jax_trainer import JaxTrainer
from slot.measure import compile_all
from slot.measure import hf_baseline
from slot.plan import plan
from slot.plan import slot_config
from slot.train import train_runs
from slot.units import group
from util.machine import jax_matmul_peak_tflops

NAMES = {"electra": "ELECTRA", "mlm": "BERT"}  # objective -> paper name
FLOPS_TARGET = 3e16  # per objective (issue 39)
SPEEDUP_TARGET = 1.5  # JAX ELECTRA step vs transformers' PyTorch one


def pretrain_phase(args, clock, result, write):
  """The baseline, the bf16 peak, each run's speed, then the runs trained
  at equal FLOPs; the figures into `result`, written as they come."""
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

  devices = jax.devices()
  device = devices[0]
  n = args.matmul_size or (8192 if device.platform == "gpu" else 1024)
  peak = jax_matmul_peak_tflops(n, jax.numpy.bfloat16)
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
  # Kept on the slot for a later call on the warm machine (--pretrained),
  # and copied to $OUT when they come back.
  weights_root = os.path.join(tempfile.gettempdir(), "slot_weights")
  trainers, entries = {}, []
  for run_name, written, k, folder in runs:
    config = slot_config(written, args, arrays,
                         os.path.join(weights_root, folder), k)
    trainers[run_name] = JaxTrainer(config, arrays, log=clock.log)
  units = group(runs, trainers, args.seeds_per_step)
  result["compile"] = compile_all({name: unit for name, unit, _ in units},
                                  args.chunk, clock)
  folders = {r[0]: r for r in runs}
  for unit_name, unit, names in units:
    measured = unit.measure(args.chunk, args.measure_calls)
    n = len(names)
    for run_name in names:
      _, written, k, folder = folders[run_name]
      config = trainers[run_name].config
      objective = config.objective
      # A preset of its own (electra_gdes, ale) keeps its name.
      paper = NAMES.get(ALIASES.get(written, written), written)
      name = f"{paper}-{args.size}" + (f" seed {k}" if k > 1 else "")
      entry = {"objective": objective, "written": written, "run": run_name,
               "pretrain_seed": k, "name": name, "folder": folder,
               "weights_dir": config.model_dir, "unit": unit_name,
               "seeds_per_step": n,
               "batch": config.train_batch_size,
               "seq_len": config.max_seq_length,
               "precision": trainers[run_name].precision, **measured,
               "seq_per_s": measured["seq_per_s"] / n,  # this seed's
               "train_flops_per_step": flops.train_flops_per_step(config),
               "model_flops_per_step": flops.model_flops_per_step(config)}
      # step_s is the unit's step (all its seeds): this run's share of
      # the FLOPs per second, and the unit's together.
      entry["mfu"] = entry["model_flops_per_step"] / entry["step_s"] / (
          peak * 1e12)
      entry["unit_mfu"] = entry["mfu"] * n
      hf = result["hf_pytorch_electra"]
      if objective == "electra" and "step_s" in hf:
        entry["speedup_vs_hf_pytorch"] = hf["step_s"] / entry["step_s"] * n
      clock.log(f"{name}: {entry['step_s'] * 1e3:.2f} ms/step" +
                (f" for {n} seeds ({unit_name})" if n > 1 else "") +
                f", {entry['seq_per_s']:,.0f} seq/s, MFU {entry['mfu']:.1%}"
                + (f" (the step's {entry['unit_mfu']:.1%})" if n > 1 else "")
                + f" (first call {entry['first_call_s']:.1f} s)" +
                (f", {entry['speedup_vs_hf_pytorch']:.2f}x transformers' "
                 "PyTorch ELECTRA" if "speedup_vs_hf_pytorch" in entry
                 else ""))
      entries.append(entry)
  result["objectives"] = entries
  write()

  budget = train_runs(args, clock, units, trainers, entries, peak,
                      args.out if weights_out else "", write)

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
      seconds, 1e-9) / (peak * 1e12)
  write()
  clock.log(f"aggregate MFU {result['aggregate_mfu']:.1%}: "
            f"{sum(e['model_flops'] for e in entries):.3g} model FLOPs of "
            f"{len(entries)} run(s) in {seconds:.0f} s of training")
  clock.log(f"targets: >= {FLOPS_TARGET:.0e} FLOPs each: "
            f"{result['targets']['met_flops']}; >= {SPEEDUP_TARGET}x "
            f"PyTorch ELECTRA: {result['targets']['met_speedup']}; "
            f"tensorflow imported: {result['tensorflow_imported']}")
