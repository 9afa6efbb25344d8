"""Pretraining throughput and model-FLOPs utilisation (MFU) on this machine.

  python benchmarks/pretrain_throughput.py [--sizes small,base]
      [--batch-sizes 32,128] [--precisions float32,bfloat16] [--steps 4]
      [--xla] [--json out.json]

Measures, in one process: the machine's matmul peak (fp32 and bf16), then
our ELECTRA train step through the real code path (synthetic TFRecords ->
pretrain/data.py -> Trainer's compiled train loop) per setting. MFU =
util/flops.model_flops_per_step x steps/s / measured peak.

Each implementation is one entry of IMPLEMENTATIONS: a function
(size, batch, precision, args) -> dict(seq_per_s, flops_per_step, ...), so a
peer column (e.g. Hugging Face) is one more function.
"""

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run as a script: make the repo importable
  sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
from util.tf_quiet import import_tensorflow  # noqa: E402

tf = import_tensorflow()

from util import flops  # noqa: E402

SPECIAL_IDS = {"pad": 0, "unk": 100, "cls": 101, "sep": 102, "mask": 103}
NUM_RECORDS = 512  # enough that batches differ; the pipeline repeats them


# ------------------------------------------------------------------- peak
def matmul_peak_tflops(dtype, n, reps):
  """Best of `reps` n x n matmuls, after a warmup, in TFLOP/s."""
  a = tf.random.normal((n, n), dtype=tf.float32)
  b = tf.random.normal((n, n), dtype=tf.float32)
  a, b = tf.cast(a, dtype), tf.cast(b, dtype)
  for _ in range(2):
    tf.matmul(a, b).numpy()
  best = float("inf")
  for _ in range(reps):
    start = time.perf_counter()
    tf.matmul(a, b).numpy()[0, 0]  # eager on CPU: the copy waits for it
    best = min(best, time.perf_counter() - start)
  return 2 * n ** 3 / best / 1e12


# ------------------------------------------------------------------- data
def write_synthetic_data(data_dir, seq_len, vocab_size, seed=0):
  """Random-token TFRecords + metadata.json in pretrain/data.py's format."""
  rng = np.random.default_rng(seed)
  path = os.path.join(data_dir, "pretrain_data.tfrecord-0")
  first = max(SPECIAL_IDS.values()) + 1
  with tf.io.TFRecordWriter(path) as writer:
    for _ in range(NUM_RECORDS):
      ids = rng.integers(first, vocab_size, seq_len)
      ids[0], ids[-1] = SPECIAL_IDS["cls"], SPECIAL_IDS["sep"]
      segments = np.zeros(seq_len, np.int64)
      segments[seq_len // 2:] = 1
      feature = {
          "input_ids": ids, "input_mask": np.ones(seq_len, np.int64),
          "segment_ids": segments}
      example = tf.train.Example(features=tf.train.Features(feature={
          k: tf.train.Feature(int64_list=tf.train.Int64List(value=v))
          for k, v in feature.items()}))
      writer.write(example.SerializeToString())
  meta = {"vocab_size": vocab_size, "max_seq_length": seq_len,
          "special_ids": SPECIAL_IDS, "num_examples": NUM_RECORDS,
          "tokenizer": "synthetic"}
  with open(os.path.join(data_dir, "metadata.json"), "w") as f:
    json.dump(meta, f)
  return os.path.join(data_dir, "pretrain_data.tfrecord*")


# ------------------------------------------------------------------- ours
def time_ours(size, batch, precision, args):
  """Our Trainer's compiled train loop: warmup (trace + compile), then the
  best of `args.loops` calls of `args.steps` steps each."""
  import keras
  import configure_pretraining
  from pretrain.trainer import Trainer

  model_dir = tempfile.mkdtemp(dir=args.work_dir)
  argv = ["--hparams", os.path.join(ROOT, "configs", f"electra_{size}.json"),
          "--pretrain-tfrecords", args.tfrecords, "--model-dir", model_dir,
          "--max-seq-length", str(args.seq_len),
          "--train-batch-size", str(batch),
          "--mixed-precision", precision,
          "--iterations-per-loop", str(args.steps),
          "--xla" if args.xla else "--no-xla"]
  config = configure_pretraining.load_config(argv)
  keras.backend.clear_session()  # drop the previous setting's graphs
  trainer = Trainer(config)  # sets the dtype policy, then builds the model
  iterator = iter(trainer._distributed_dataset(batch, True))
  train_loop = trainer._build_train_loop()

  def run(steps):
    start = time.perf_counter()
    logs = train_loop(iterator, tf.constant(steps, tf.int32))
    loss = float(logs["loss"])  # waits for the loop to finish
    return time.perf_counter() - start, loss

  compile_s, _ = run(args.warmup_steps)
  times, loss = [], None
  for _ in range(args.loops):
    seconds, loss = run(args.steps)
    times.append(seconds)
  step_s = min(times) / args.steps
  result = dict(
      seq_per_s=batch / step_s, step_ms=step_s * 1e3,
      flops_per_step=flops.model_flops_per_step(config),
      warmup_s=compile_s, loss=loss, precision=trainer.precision)
  del trainer, train_loop, iterator
  shutil.rmtree(model_dir, ignore_errors=True)
  return result


IMPLEMENTATIONS = {"ours": time_ours}


# ------------------------------------------------------------------- main
def machine_description():
  cpu = platform.processor() or platform.machine()
  try:
    with open("/proc/cpuinfo") as f:
      names = [line.split(":", 1)[1].strip() for line in f
               if line.startswith("model name")]
    cpu = names[0] if names else cpu
  except OSError:
    pass
  gpus = tf.config.list_physical_devices("GPU")
  return (f"{cpu}, {os.cpu_count()} CPU cores, "
          f"{len(gpus)} GPU(s), TensorFlow {tf.__version__}, "
          f"Python {platform.python_version()}")


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--sizes", default="small", help="comma list: small,base")
  p.add_argument("--batch-sizes", default="32", help="comma list")
  p.add_argument("--precisions", default="float32,bfloat16",
                 help="comma list of float32, bfloat16")
  p.add_argument("--implementations", default=",".join(IMPLEMENTATIONS))
  p.add_argument("--steps", type=int, default=4,
                 help="steps per timed loop (one tf.function call)")
  p.add_argument("--loops", type=int, default=2,
                 help="timed loops per setting; the fastest counts")
  p.add_argument("--warmup-steps", type=int, default=1,
                 help="steps of the first (tracing/compiling) call")
  p.add_argument("--seq-len", type=int, default=128)
  p.add_argument("--vocab-size", type=int, default=flops.PAPER_VOCAB_SIZE)
  p.add_argument("--xla", action="store_true", help="jit_compile the step")
  p.add_argument("--matmul-size", type=int, default=2048)
  p.add_argument("--matmul-reps", type=int, default=10)
  p.add_argument("--json", help="write the results here")
  return p.parse_args(argv)


def split(text):
  return [t.strip() for t in text.split(",") if t.strip()]


def print_table(entries, peaks):
  print(f"\n{'impl':<6} {'size':<6} {'batch':>5} {'precision':<9} "
        f"{'step ms':>8} {'seq/s':>7} {'tok/s':>8} {'TFLOP/s':>8} "
        f"{'MFU bf16':>8} {'MFU fp32':>8}")
  for e in entries:
    if "error" in e:
      print(f"{e['impl']:<6} {e['size']:<6} {e['batch']:>5} "
            f"{e['precision']:<9} error: {e['error']}")
      continue
    print(f"{e['impl']:<6} {e['size']:<6} {e['batch']:>5} "
          f"{e['precision']:<9} {e['step_ms']:8.0f} {e['seq_per_s']:7.2f} "
          f"{e['tokens_per_s']:8.0f} {e['achieved_tflops']:8.3f} "
          f"{e['mfu']:8.1%} {e['mfu_vs_fp32_peak']:8.1%}")
  print(f"peak matmul: fp32 {peaks['float32']:.3f} TFLOP/s, bf16 "
        f"{peaks['bfloat16']:.3f} TFLOP/s; MFU = model matmul FLOPs "
        "(util/flops.model_flops_per_step, 3x forward) x steps/s / peak")


def main(argv=None):
  args = parse_args(argv)
  args.work_dir = tempfile.mkdtemp(prefix="pretrain_throughput_")
  try:
    machine = machine_description()
    print(machine, flush=True)
    peaks = {}
    for dtype in ("float32", "bfloat16"):
      peaks[dtype] = matmul_peak_tflops(getattr(tf, dtype), args.matmul_size,
                                        args.matmul_reps)
      print(f"matmul peak {dtype}: {peaks[dtype]:.3f} TFLOP/s "
            f"({args.matmul_size}^3, best of {args.matmul_reps})",
            flush=True)
    data_dir = os.path.join(args.work_dir, "data")
    os.makedirs(data_dir)
    args.tfrecords = write_synthetic_data(data_dir, args.seq_len,
                                          args.vocab_size)
    entries = []
    for impl in split(args.implementations):
      for size in split(args.sizes):
        for batch in [int(b) for b in split(args.batch_sizes)]:
          for precision in split(args.precisions):
            entry = dict(impl=impl, size=size, batch=batch,
                         precision=precision, seq_len=args.seq_len,
                         xla=args.xla, steps=args.steps)
            try:
              entry.update(IMPLEMENTATIONS[impl](size, batch, precision,
                                                 args))
            except Exception as e:  # one failed setting keeps the others
              entry["error"] = f"{type(e).__name__}: {str(e)[:200]}"
              print(f"{impl} {size} b{batch} {precision}: {entry['error']}",
                    flush=True)
              entries.append(entry)
              continue
            achieved = entry["flops_per_step"] * entry["seq_per_s"] / batch
            entry.update(
                tokens_per_s=entry["seq_per_s"] * args.seq_len,
                achieved_tflops=achieved / 1e12,
                mfu=achieved / (peaks["bfloat16"] * 1e12),
                mfu_vs_fp32_peak=achieved / (peaks["float32"] * 1e12))
            entries.append(entry)
            print(f"{impl} {size} b{batch} {precision}: "
                  f"{entry['seq_per_s']:.2f} seq/s "
                  f"(warmup {entry['warmup_s']:.0f}s)", flush=True)
    print_table(entries, peaks)
    ours = [e for e in entries if e["impl"] == "ours" and "error" not in e
            and e["size"] == "small" and e["batch"] == 32]
    best = max(ours, key=lambda e: e["seq_per_s"]) if ours else None
    result = {
        "ours": best and {k: best[k] for k in (
            "seq_per_s", "mfu", "mfu_vs_fp32_peak", "tokens_per_s",
            "precision", "batch", "size")},
        "peak_bf16_tflops": peaks["bfloat16"],
        "peak_fp32_tflops": peaks["float32"],
        "entries": entries, "machine": machine}
    if args.json:
      with open(args.json, "w") as f:
        json.dump(result, f, indent=2)
      print(f"wrote {args.json}")
    return result
  finally:
    import keras
    keras.mixed_precision.set_dtype_policy("float32")  # leave no global
    shutil.rmtree(args.work_dir, ignore_errors=True)


if __name__ == "__main__":
  main()
