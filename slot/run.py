"""The slot's phases in order; slot.json rewritten after each."""

import json
import os
import sys
import tempfile

import jax
import keras

from slot.clock import Clock
from slot.flags import fine_tune_only
from slot.finetune_phase import finetune_phase
from slot.pretrain_phase import pretrain_phase
from util.paths import portable

RESULTS = "slot.json"
MAX_FILES, MAX_FILE_BYTES = 8, 16 * 2 ** 20  # what comes back from $OUT


def main(args):
  """Runs the slot; slot.json is rewritten after each phase, so a failure
  keeps what was measured (and its error)."""
  clock = Clock(args.started_at or None)
  os.makedirs(args.out, exist_ok=True)
  result = {"command": sys.argv, "size": args.size}

  def write():
    result["tensorflow_imported"] = "tensorflow" in sys.modules
    result["seconds"] = clock.elapsed()
    # The record travels: no path of this machine in it (util/paths.py).
    record = portable(result, {"$OUT": os.path.abspath(args.out),
                               "$TMPDIR": tempfile.gettempdir()})
    with open(os.path.join(args.out, RESULTS), "w") as f:
      json.dump(record, f, indent=2)

  try:
    return run(args, clock, result, write)
  except BaseException as e:
    result["error"] = f"{type(e).__name__}: {str(e)[:1000]}"
    write()
    raise


def run(args, clock, result, write):
  # Before JAX's first compile: the scripts' runs reuse each other's
  # compiled steps (a timing run's are its training run's: the schedule's
  # lengths are traced; each fine-tuning call's are the last one's).
  jax.config.update("jax_compilation_cache_dir", os.environ.get(
      "JAX_COMPILATION_CACHE_DIR") or os.path.join(tempfile.gettempdir(),
                                                    "slot_jax_cache"))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
  if fine_tune_only(args):
    clock.log(f"python {sys.version.split()[0]}, keras {keras.__version__} "
              f"({keras.backend.backend()}); fine-tuning "
              f"{', '.join(args.pretrained)}")
    models = {os.path.basename(os.path.normpath(p)): p
              for p in args.pretrained}
    finetune_phase(args, clock, result, write, models)
    report_out(args, clock)
    return result
  pretrain_phase(args, clock, result, write)
  if args.finetune_data and args.finetune_seeds:  # 0: pretraining only
    models = {e["folder"]: e["weights_dir"] for e in result["objectives"]}
    finetune_phase(args, clock, result, write, models)
  report_out(args, clock)
  return result


def report_out(args, clock):
  files = out_files(args.out)
  big = [f for f in files if os.path.getsize(f) > MAX_FILE_BYTES]
  clock.log(f"$OUT holds {len(files)} files, "
            f"{sum(os.path.getsize(f) for f in files) / 1e6:.1f} MB" +
            (f"; OVER the {MAX_FILES}-file limit" if len(files) > MAX_FILES
             else "") + (f"; over 16 MiB: {big}" if big else ""))


def out_files(out):
  found = []
  for base, _, files in os.walk(out):
    found += [os.path.join(base, f) for f in files]
  return sorted(found)
