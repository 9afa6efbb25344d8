"""Pretraining throughput and model-FLOPs utilisation (MFU) on this machine.

  python benchmarks/pretrain_throughput.py [--sizes small,base]
      [--batch-sizes 32,128] [--precisions float32,bfloat16] [--steps 4]
      [--implementations ours,hf] [--xla] [--json out.json]

Measures, in one process: the machine's matmul peak (fp32 and bf16); our
ELECTRA train step through the real code path (synthetic TFRecords ->
pretrain/data.py -> Trainer's compiled train loop) per setting; the same
step in Hugging Face transformers on PyTorch CPU (the peer; fp32 and bf16
autocast); and the input pipeline alone. MFU = matmul FLOPs per step
(pretrain/flops.model_flops_per_step; for transformers also its generator's
vocabulary projection at every position) x steps/s / measured bf16 peak.

Each implementation is one entry of IMPLEMENTATIONS: a function
(size, batch, precision, args) -> dict(seq_per_s, flops_per_step, ...).
The last MFU column is against the faster of the two peaks (bf16 where
the CPU has it natively, fp32 elsewhere), and a line says whether
mixed_precision "auto" picks the precision that is fastest here.
`--json` writes {"ours": {seq_per_s, mfu, ...}, "hf": {seq_per_s, ...},
"speedup_vs_hf", "pipeline_seq_per_s", "peak_bf16_tflops",
"auto_precision", "entries"}
(ours and hf: the best precision at the small preset, batch 32).
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

from benchmarks import scratch  # noqa: E402
from benchmarks import write_json  # noqa: E402

import numpy as np  # noqa: E402
from util.tf_quiet import import_tensorflow  # noqa: E402

tf = import_tensorflow()

from pretrain import flops  # noqa: E402
from util.machine import cpu_kind  # noqa: E402

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


def measure_peaks(args):
  peaks = {}
  for dtype in ("float32", "bfloat16"):
    peaks[dtype] = matmul_peak_tflops(getattr(tf, dtype), args.matmul_size,
                                      args.matmul_reps)
    print(f"matmul peak {dtype}: {peaks[dtype]:.3f} TFLOP/s "
          f"({args.matmul_size}^3, best of {args.matmul_reps})", flush=True)
  return peaks


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
  from pretrain import config as configure_pretraining
  from pretrain.trainer import Trainer

  model_dir = tempfile.mkdtemp(dir=args.work_dir)
  argv = ["--hparams", os.path.join(ROOT, "configs", f"electra_{size}.json"),
          "--pretrain-tfrecords", args.tfrecords, "--model-dir", model_dir,
          "--max-seq-length", str(args.seq_len),
          "--train-batch-size", str(batch),
          "--mixed-precision", precision,
          "--iterations-per-loop", str(args.steps),
          "--xla" if args.xla else "--no-xla"]
  for extra in args.hparams:  # e.g. an ablation: dropout off
    argv += ["--hparams", extra]
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


def time_pipeline(batch, args, batches=200):
  """The input pipeline alone (pretrain/data.py: read, parse, mask,
  batch, prefetch) in sequences/s, as the train step consumes it."""
  from pretrain import config as configure_pretraining
  from pretrain import data
  config = configure_pretraining.load_config([
      "--hparams", os.path.join(ROOT, "configs", "electra_small.json"),
      "--pretrain-tfrecords", args.tfrecords, "--model-dir",
      os.path.join(args.work_dir, "pipeline"), "--max-seq-length",
      str(args.seq_len), "--train-batch-size", str(batch)])
  iterator = iter(data.make_dataset(config, data.load_metadata(config),
                                    batch, True))
  for _ in range(10):  # fill the prefetch buffers
    next(iterator)
  start = time.perf_counter()
  for _ in range(batches):
    next(iterator)
  return batches * batch / (time.perf_counter() - start)


# --------------------------------------------------------- Hugging Face
def hf_configs(size, vocab_size, seq_len):
  """transformers ElectraConfigs of the discriminator and the generator,
  sized as our preset (generator: Table 5.1's multiplier)."""
  import transformers
  from model import config as model_config
  disc = model_config.get_model_config(size, vocab_size)
  gen = model_config.scale_config(disc,
                                  model_config.GENERATOR_MULTIPLIER[size])

  def config(c):
    return transformers.ElectraConfig(
        vocab_size=c.vocab_size, embedding_size=c.embedding_size,
        hidden_size=c.hidden_size, num_hidden_layers=c.num_hidden_layers,
        num_attention_heads=c.num_attention_heads,
        intermediate_size=c.intermediate_size,
        max_position_embeddings=max(512, seq_len))
  return config(disc), config(gen), gen


def time_hf(size, batch, precision, args):
  """The same ELECTRA step in transformers on PyTorch CPU, written as its
  users write it: ElectraForMaskedLM generator sharing the discriminator's
  embeddings (tied output), ElectraForPreTraining discriminator, 15%
  masking, a sample at the masked positions, loss = MLM + 50 x disc, AdamW.
  bfloat16 means torch.autocast; the best of `args.loops` timings."""
  import contextlib
  import torch
  import transformers
  torch.set_num_threads(os.cpu_count())
  torch.manual_seed(0)
  disc_config, gen_config, _ = hf_configs(size, args.vocab_size,
                                          args.seq_len)
  disc = transformers.ElectraForPreTraining(disc_config)
  gen = transformers.ElectraForMaskedLM(gen_config)
  gen.electra.embeddings = disc.electra.embeddings  # ELECTRA's sharing
  gen.tie_weights()
  params = {id(p): p for m in (disc, gen) for p in m.parameters()}
  optimizer = torch.optim.AdamW(params.values(), lr=5e-4, weight_decay=0.01)
  ids = torch.randint(104, args.vocab_size, (batch, args.seq_len))
  mask = torch.ones_like(ids)
  autocast = (torch.autocast("cpu", dtype=torch.bfloat16)
              if precision == "bfloat16" else contextlib.nullcontext())

  def step():
    masked = torch.rand(ids.shape) < 0.15
    gen_input = ids.masked_fill(masked, 103)
    labels = ids.masked_fill(~masked, -100)
    with autocast:
      out = gen(input_ids=gen_input, attention_mask=mask, labels=labels)
      with torch.no_grad():
        logits = out.logits[masked].float()
        sample = torch.multinomial(torch.softmax(logits, -1), 1)[:, 0]
      fake = ids.clone()
      fake[masked] = sample
      disc_labels = (fake != ids).long()
      disc_out = disc(input_ids=fake, attention_mask=mask, labels=disc_labels)
      loss = out.loss + 50.0 * disc_out.loss
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params.values(), 1.0)
    optimizer.step()
    return float(loss)

  start = time.perf_counter()
  for _ in range(args.warmup_steps):
    step()
  warmup = time.perf_counter() - start
  times, loss = [], None
  for _ in range(args.loops):
    start = time.perf_counter()
    for _ in range(args.steps):
      loss = step()
    times.append(time.perf_counter() - start)
  step_s = min(times) / args.steps
  return dict(seq_per_s=batch / step_s, step_ms=step_s * 1e3,
              flops_per_step=hf_flops_per_step(size, batch, args),
              warmup_s=warmup, loss=loss, precision=precision)


def hf_flops_per_step(size, batch, args):
  """Matmul FLOPs of the transformers step: as ours, but its generator's
  vocabulary projection runs at every position, not only the masked."""
  gen = hf_configs(size, args.vocab_size, args.seq_len)[2]
  from pretrain.config import PretrainingConfig
  config = PretrainingConfig(model_size=size, vocab_size=args.vocab_size,
                             max_seq_length=args.seq_len,
                             train_batch_size=batch)
  config.resolve()
  per_position = 2 * gen.embedding_size * (gen.hidden_size + gen.vocab_size)
  extra = 3 * batch * per_position * (args.seq_len -
                                      config.max_predictions_per_seq)
  return flops.model_flops_per_step(config) + extra


IMPLEMENTATIONS = {"ours": time_ours, "hf": time_hf}


# ------------------------------------------------------------------- main
def machine_description():
  gpus = tf.config.list_physical_devices("GPU")
  return (f"{cpu_kind()}, "
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
  p.add_argument("--hparams", action="append", default=[],
                 help="more hparams (JSON) for our step, e.g. "
                      "'{\"model_hparam_overrides\": {\"hidden_dropout_prob\": 0}}'")
  p.add_argument("--json", help="write the results here")
  return p.parse_args(argv)


def split(text):
  return [t.strip() for t in text.split(",") if t.strip()]


def print_table(entries, peaks):
  print(f"\n{'impl':<6} {'size':<6} {'batch':>5} {'precision':<9} "
        f"{'step ms':>8} {'seq/s':>7} {'tok/s':>8} {'TFLOP/s':>8} "
        f"{'MFU bf16':>8} {'MFU fp32':>8} {'MFU':>6}")
  for e in entries:
    if "error" in e:
      print(f"{e['impl']:<6} {e['size']:<6} {e['batch']:>5} "
            f"{e['precision']:<9} error: {e['error']}")
      continue
    print(f"{e['impl']:<6} {e['size']:<6} {e['batch']:>5} "
          f"{e['precision']:<9} {e['step_ms']:8.0f} {e['seq_per_s']:7.2f} "
          f"{e['tokens_per_s']:8.0f} {e['achieved_tflops']:8.3f} "
          f"{e['mfu']:8.1%} {e['mfu_vs_fp32_peak']:8.1%} "
          f"{e['mfu_vs_fastest_peak']:6.1%}")
  print(f"peak matmul: fp32 {peaks['float32']:.3f} TFLOP/s, bf16 "
        f"{peaks['bfloat16']:.3f} TFLOP/s; MFU = model matmul FLOPs "
        "(pretrain/flops.model_flops_per_step, 3x forward) x steps/s / peak "
        "(the last column: the faster of the two peaks)")


def auto_check(entries, peaks, machine):
  """What mixed_precision "auto" picks here, beside the precision of the
  faster matmul peak and of our fastest measured step: the check that
  auto picks the fastest on this machine kind."""
  from configure_pretraining import PretrainingConfig
  from training.distribution import resolve_precision
  auto = resolve_precision(PretrainingConfig())
  peak = max(peaks, key=peaks.get)
  ours = {e["precision"]: e["seq_per_s"] for e in entries
          if e["impl"] == "ours" and "error" not in e}
  step = max(ours, key=ours.get) if len(ours) > 1 else None
  agree = auto == peak and step in (None, auto)
  print(f"mixed_precision auto picks {auto}; faster matmul peak: {peak}; "
        f"faster step of ours: {step or 'not measured (one precision)'}"
        f" -> {'auto is the fastest' if agree else 'MISMATCH'}  [{machine}]")
  return {"picks": auto, "faster_peak": peak, "faster_step": step,
          "agree": agree}


def main(argv=None):
  args = parse_args(argv)
  with scratch("pretrain_throughput_") as args.work_dir:
    machine = machine_description()
    print(machine, flush=True)
    peaks = measure_peaks(args)
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
            entry["tokens_per_s"] = entry["seq_per_s"] * args.seq_len
            entries.append(entry)
            print(f"{impl} {size} b{batch} {precision}: "
                  f"{entry['seq_per_s']:.2f} seq/s "
                  f"(warmup {entry['warmup_s']:.0f}s)", flush=True)
    # The peak again after the runs, the best of both: a busy moment on a
    # shared machine must not lower the peak and so raise MFU.
    peaks = {k: max(v, measure_peaks(args)[k]) for k, v in peaks.items()}
    for entry in entries:
      if "error" not in entry:
        achieved = (entry["flops_per_step"] * entry["seq_per_s"] /
                    entry["batch"])
        entry.update(achieved_tflops=achieved / 1e12,
                     mfu=achieved / (peaks["bfloat16"] * 1e12),
                     mfu_vs_fp32_peak=achieved / (peaks["float32"] * 1e12),
                     mfu_vs_fastest_peak=achieved / (max(peaks.values()) *
                                                     1e12))
    print_table(entries, peaks)
    auto = auto_check(entries, peaks, machine)
    batch = int(split(args.batch_sizes)[0])
    pipeline = time_pipeline(batch, args)
    fastest = max((e["seq_per_s"] for e in entries if e["impl"] == "ours"
                   and "error" not in e), default=float("nan"))
    print(f"input pipeline alone, batch {batch}: {pipeline:,.0f} seq/s = "
          f"{pipeline / fastest:.0f}x our fastest step", flush=True)
    ours = [e for e in entries if e["impl"] == "ours" and "error" not in e
            and e["size"] == "small" and e["batch"] == 32]
    best = max(ours, key=lambda e: e["seq_per_s"]) if ours else None
    hf = [e for e in entries if e["impl"] == "hf" and "error" not in e
          and e["size"] == "small" and e["batch"] == 32]
    hf_best = max(hf, key=lambda e: e["seq_per_s"]) if hf else None  # its best
    result = {
        "ours": best and {k: best[k] for k in (
            "seq_per_s", "mfu", "mfu_vs_fp32_peak", "mfu_vs_fastest_peak",
            "tokens_per_s",
            "precision", "batch", "size")},
        "hf": hf_best and {k: hf_best[k] for k in (
            "seq_per_s", "precision", "batch", "size")},
        "speedup_vs_hf": (best["seq_per_s"] / hf_best["seq_per_s"]
                          if best and hf_best else None),
        "pipeline_seq_per_s": pipeline,
        "peak_bf16_tflops": peaks["bfloat16"],
        "peak_fp32_tflops": peaks["float32"],
        "auto_precision": auto,
        "entries": entries, "machine": machine}
    write_json(args.json, result)
    return result


if __name__ == "__main__":
  main()
