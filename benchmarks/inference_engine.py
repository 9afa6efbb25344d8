"""The inference engine beside our TensorFlow path and transformers: GLUE
dev forward, SQuAD dev forward, the runner's evaluation end to end (a
run's first and a later trial's), n-pass MLM PLL. OpenVINO (the engine)
and ONNX Runtime (the candidate it was chosen over; measured only here,
where it is installed: pip install onnxruntime tf2onnx) side by side.

  python benchmarks/inference_engine.py [--size small] [--batch-size 32]
      [--eval-examples 128] [--squad-eval-examples 16] [--loops 2]
      [--sentences 40] [--precision auto] [--omp-wait-policy default]
      [--json out.json]

  quick check:  --size tiny --eval-examples 32 --squad-eval-examples 4
                --seq-len 64 --squad-seq-len 128 --sentences 10 --loops 1

Sides (benchmarks/finetune_throughput.py builds ours and transformers' the
same way, from one random checkpoint; scoring_speed.py the PLL sides):
  tensorflow  our forward as the runner traces it (float32 and the
              mixed_bfloat16 policy; the faster counts)
  openvino    the same tf.function, converted (inference/engine.py) at
              --precision (auto = bfloat16 on AVX512-BF16/AMX)
  onnxruntime the same frozen graph through tf2onnx, CPU provider (fp32:
              it has no bf16 matmuls on CPU)
  hf          transformers on PyTorch, its best of fp32 / bf16 autocast,
              in a process of its own (benchmarks/hf_inference.py) with
              PyTorch's OpenMP wait policy at --omp-wait-policy (default:
              libgomp's own, its best on a quiet machine)
Each forward also runs "trimmed": rows sorted by length, each batch cut to
its longest row (ours: the Predictor's engine path, at least SQuAD's beam;
hf: as its DataCollatorWithPadding pads). Forward figures are the best of
--loops (the sides alternate loop by loop, transformers' in a child
process per loop, after its warm-up call). The evaluation end
to end (all of --eval-examples): a fresh Predictor's first predict() per
engine, trace or conversion and compile included, as a run's first dev
evaluation, then a later trial's model on it (TensorFlow reuses its trace,
the engine compiles the new weights into its conversion), beside hf's
trimmed evaluation with accuracy: its first call in its process (the
first at those shapes, as ours) and its best warm one. Each forward also
prints its ceiling: the time its matmuls alone would take at the engine's
own bf16 matmul rate, measured in the same process, and so the largest
ratio over hf any engine could reach on the same rows.
"""

import contextlib
import os
import sys
import time


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from benchmarks import finetune_throughput as ft  # noqa: E402
from benchmarks import hf_inference  # noqa: E402
from benchmarks import scoring_speed  # noqa: E402
from benchmarks import OMP_WAIT_POLICIES  # noqa: E402
from benchmarks import scratch  # noqa: E402
from benchmarks import set_omp_wait_policy  # noqa: E402
from benchmarks import write_json  # noqa: E402
from inference.choices import resolve_precision  # noqa: E402
from util.machine import cpu_kind  # noqa: E402

tf = ft.tf


def parse_args(argv=None):
  args = ft.parse_args([])  # finetune_throughput's settings, then ours
  import argparse
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--size", default="small")
  p.add_argument("--batch-size", type=int, default=32)
  p.add_argument("--seq-len", type=int, default=128)
  p.add_argument("--squad-seq-len", type=int, default=384)
  p.add_argument("--eval-examples", type=int, default=128)
  p.add_argument("--squad-eval-examples", type=int, default=16)
  p.add_argument("--loops", type=int, default=2)
  p.add_argument("--sentences", type=int, default=40)
  p.add_argument("--precision", default="auto")
  p.add_argument("--engines", default="tensorflow,openvino,onnxruntime,hf")
  p.add_argument("--omp-wait-policy", default="default",
                 choices=OMP_WAIT_POLICIES,
                 help="PyTorch's OpenMP wait policy (benchmarks/__init__.py;"
                      " default: transformers' best on a quiet machine)")
  p.add_argument("--json", default="")
  for k, v in vars(p.parse_args(argv)).items():
    setattr(args, k, v)
  return args


def frozen_onnx(concrete):
  """An onnxruntime session of the concrete function's frozen graph, its
  Erfc (no ONNX op) rewritten as 1 - Erf."""
  import onnxruntime
  import tf2onnx
  from inference.openvino_engine import frozen_graph
  graph_def, inputs, outputs = frozen_graph(concrete)
  for node in list(graph_def.node):
    if node.op == "Erfc":
      erf = graph_def.node.add()
      erf.CopyFrom(node)
      erf.name, erf.op = node.name + "/erf", "Erf"
      one = graph_def.node.add()
      one.name, one.op = node.name + "/one", "Const"
      one.attr["dtype"].type = node.attr["T"].type
      one.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(
          np.float32(1.0)))
      node.op = "Sub"
      del node.input[:]
      node.input.extend([one.name, erf.name])
  proto, _ = tf2onnx.convert.from_graph_def(
      graph_def, input_names=[n + ":0" for n in inputs],
      output_names=outputs, opset=17)
  session = onnxruntime.InferenceSession(proto.SerializeToString(),
                                         providers=["CPUExecutionProvider"])
  names = [i.name for i in session.get_inputs()]
  return lambda batch: session.run(None, {n: np.asarray(batch[n.split(":")[0]])
                                          for n in names})


def forward_sides(kind, args):
  """{side: fn() -> seconds of the dev rows' forward passes}."""
  from finetune.featurization import model_inputs
  from inference.engine import Engine
  sides, rows = {}, None
  for precision in ("float32", "bfloat16"):
    ours = ft.build_ours(kind, precision, args, args.features[kind])
    rows = rows or ours["eval_rows"]
    if "tensorflow" in args.engine_list:
      sides[f"tensorflow {precision}"] = ours["forward"]
    if precision == "float32":  # the engines convert the fp32 graph
      runner_model = ours["model"]
      task = ours["task"]
  examples, features = args.dev[kind]
  inputs = model_inputs(features)
  n, b = len(inputs["input_ids"]), args.batch_size
  batches = [{k: v[i:i + b] for k, v in inputs.items()}
             for i in range(0, n, b)]

  def forward(batch):
    loss, outputs = runner_model(batch, task_name=task.name, training=False)
    return dict(outputs, loss=loss)

  def timed(fn, batches):
    def run():
      start = time.perf_counter()
      for batch in batches:
        fn(batch)
      return time.perf_counter() - start
    return run

  def mapped(fn, batches):  # as the Predictor runs the engine: in flight
    def run():
      start = time.perf_counter()
      for _ in fn.map(batches):
        pass
      return time.perf_counter() - start
    return run

  if "openvino" in args.engine_list:
    engine = Engine("openvino", args.precision)
    fn = engine.wrap(forward, variables=runner_model.variables,
                     throughput=True)
    sides[f"openvino {engine.precision}"] = mapped(fn, batches)
  if "onnxruntime" in args.engine_list:
    try:
      specs = {k: tf.TensorSpec((None,) + v.shape[1:], v.dtype, name=k)
               for k, v in inputs.items()}
      # Without the argmax: Keras' (its signbit) is a Bitcast, which ONNX
      # has no op for; the probabilities are all a GLUE scorer needs.
      concrete = tf.function(lambda batch: {
          k: v for k, v in forward(batch).items() if k != "predictions"}
                             ).get_concrete_function(specs)
      sides["onnxruntime float32"] = timed(frozen_onnx(concrete),
                                          batches)
    except Exception as e:  # not installed, or a conversion failure
      print(f"  onnxruntime: {type(e).__name__}: {str(e)[:200]}", flush=True)
  if "openvino" in args.engine_list:
    order = np.argsort(inputs["input_mask"].sum(axis=1), kind="stable")
    by_length = [{k: v[order[i:i + b]] for k, v in inputs.items()}
                 for i in range(0, n, b)]
    fn = engine.wrap(forward, trim_by="input_mask",
                     min_length=task.min_trimmed_length,
                     variables=runner_model.variables, throughput=True)
    sides[f"openvino {engine.precision} trimmed"] = mapped(fn, by_length)
  if kind == "squad" and "openvino" in args.engine_list:
    # Like for like with transformers' span head: a linear one (the end
    # logits do not depend on the start), not the original's beam head.
    args.qa_head = "linear"
    linear = ft.build_ours(kind, "float32", args, args.features[kind])
    args.qa_head = ""
    model, name = linear["model"], linear["task"].name

    def linear_forward(batch):
      loss, outputs = model(batch, task_name=name, training=False)
      return dict(outputs, loss=loss)

    for suffix, trim in (("", None), (" trimmed", "input_mask")):
      fn = engine.wrap(linear_forward, trim_by=trim,
                       min_length=task.min_trimmed_length,
                       variables=model.variables, throughput=True)
      sides[f"openvino {engine.precision} linear head{suffix}"] = mapped(
          fn, by_length if trim else batches)
  runner = ours["runner"]
  config = getattr(runner, "model_config", None) or runner.encoder_config
  gemm = gemm_flops(config, inputs["input_mask"].sum(axis=1),
                    inputs["input_mask"].shape[1], b)
  return sides, len(examples), gemm


def gemm_flops(config, lengths, seq, b):
  """{"full", "trimmed"}: FLOPs of the encoder's matmuls (dense layers,
  attention's two products) over rows of these lengths in batches of b,
  padded to `seq`, or sorted and trimmed as hf_inference.trimmed runs
  them."""
  h, layers = config.hidden_size, config.num_hidden_layers
  dense = layers * (4 * h * h + 2 * h * config.intermediate_size)
  if config.embedding_size != h:
    dense += config.embedding_size * h

  def flops(rows, length):  # per token: dense + q.k and probs.v
    return 2.0 * rows * length * (dense + 2 * layers * h * length)
  lengths = np.sort(lengths)
  chunks = [lengths[i:i + b] for i in range(0, len(lengths), b)]
  return dict(full=sum(flops(len(c), seq) for c in chunks),
              trimmed=sum(flops(len(c), int(c.max())) for c in chunks))


def matmul_peak(precision, size=1024, chain=8):
  """FLOP/s of `chain` [4096, size] x [size, size] MatMuls in a row,
  compiled by the engine at `precision` (its input converted once): the
  hardware limit its forward is read against."""
  import openvino as ov
  from openvino import opset13 as ops
  from inference.openvino_engine import compile_model
  rng = np.random.default_rng(0)
  x = ops.parameter([4096, size], np.float32)
  y = x
  for _ in range(chain):
    y = ops.matmul(y, ops.constant(rng.standard_normal(
        (size, size)).astype(np.float32) / np.float32(np.sqrt(size))),
                   False, False)
  compiled = compile_model(ov.Model([y], [x]), precision)
  request = compiled.create_infer_request()
  data = rng.standard_normal((4096, size)).astype(np.float32)
  request.infer([data])
  best = min(_seconds(lambda: request.infer([data])) for _ in range(10))
  return 2.0 * 4096 * size * size * chain / best


def _seconds(fn):
  start = time.perf_counter()
  fn()
  return time.perf_counter() - start


def best_of(sides, loops, hf=None):
  """{side: best seconds}: warm-up, then loops alternating the sides and,
  loop by loop, hf() -> {side: seconds} (transformers' in a child
  process, one timed loop each), so that a change in the shared
  machine's speed falls on both."""
  times = {name: [] for name in sides}
  for fn in sides.values():
    fn()  # traces, converts, compiles
  for _ in range(loops):
    for name, fn in sides.items():
      times[name].append(fn())
      ft.release_memory()
    for name, seconds in (hf() if hf else {}).items():
      times.setdefault(name, []).append(seconds)
  return {name: min(t) for name, t in times.items()}


def evaluation_end_to_end(args):
  """{side: seconds} of a run's first dev evaluation (GLUE): a fresh
  Predictor's predict, its trace or its conversion and compile included;
  "later trial": the same Predictor's on a new trial's model (TensorFlow
  reuses its trace, the engine compiles the new weights). transformers'
  side: hf_seconds("evaluation")."""
  from finetune.prediction import Predictor
  from inference.engine import Engine
  out = {}
  ours = ft.build_ours("glue", "float32", args, args.features["glue"])
  runner, model, task = ours["runner"], ours["model"], ours["task"]
  later = runner._build(runner.config.seed + 1)  # noqa: SLF001
  runner.predictor.call_once(later, task, "dev")
  for engine in ("tensorflow", "openvino"):
    if engine not in args.engine_list:
      continue
    predictor = Predictor(runner.config, runner.data)
    predictor.engine = Engine(engine, args.precision)
    name = f"{engine} {predictor.engine.describe(1)}"
    for key, trial_model in ((name, model), (f"{name} later trial", later)):
      with contextlib.redirect_stdout(open(os.devnull, "w")):
        start = time.perf_counter()
        predictor.predict(trial_model, task, "dev")
        out[key] = time.perf_counter() - start
  return out


def pll_sides(args):
  """{side: seconds} of n-pass MLM PLL of --sentences sentences."""
  from util.tokenization import load_tokenizer
  sargs = scoring_speed.parse_args(["--sentences", str(args.sentences),
                                    "--model-size", args.size,
                                    "--repeats", str(args.loops)])
  tokenizer = load_tokenizer(sargs.vocab_file)
  sentences, _ = scoring_speed.load_sentences(sargs)
  out = {}
  for engine in ("tensorflow", "openvino"):
    if engine in args.engine_list:
      scorer = scoring_speed.build_scorer("mlm", sargs, tokenizer)
      scorer.engine = type(scorer.engine)(engine, args.precision)
      scorer.score(sentences)  # traces or compiles
      seconds = []
      for _ in range(args.loops):
        scorer.score(sentences)
        seconds.append(scorer.last_stats["seconds"])
      out[f"{engine} {scorer.engine.describe(1)}"] = min(seconds)
  # The passes' rows (a sentence of L tokens: L rows of L + 2), for the
  # encoder's matmul FLOPs at their exact widths.
  from model.config import get_model_config
  lengths = np.array([len(t) for t in tokenizer.tokenize_batch(sentences)])
  widths = np.repeat(lengths + 2, lengths)
  gemm = gemm_flops(get_model_config(args.size, tokenizer.vocab_size),
                    widths, widths.max(), sargs.batch_size)
  return out, len(sentences), {"full": gemm["trimmed"]}


def hf_seconds(job, kind, args, work_dir, loops=None):
  """{side: seconds} of transformers' sides of a job (hf_inference.py, in
  a process of its own), each its best of `loops` (--loops) after a first
  call; the evaluation adds its first call (cold: the model's first at
  those shapes in that process) and prints its accuracy."""
  if "hf" not in args.engine_list:
    return {}
  from finetune.featurization import model_inputs
  request = dict(job=job, kind=kind, batch_size=args.batch_size,
                 loops=loops or args.loops, torch_threads=args.torch_threads,
                 pretrained=args.pretrained, size=args.size,
                 sentences=args.sentences, examples=0)
  if job != "pll":
    examples, features = args.dev[kind]
    request.update(examples=len(examples),
                   rows=os.path.join(work_dir, f"{kind}_dev.npz"),
                   train_rows=os.path.join(work_dir, f"{kind}_train.npz"))
    if not os.path.exists(request["rows"]):  # once a run: one a loop
      np.savez(request["rows"], **model_inputs(features))
      np.savez(request["train_rows"], **args.features[kind])
  result = hf_inference.run(request, work_dir)
  seconds = dict(result["seconds"])
  if job == "evaluation":
    for side, value in result["first"].items():
      seconds[f"{side}, first call"] = value
    print("  hf accuracy: " + ", ".join(
        f"{k} {v:.4f}" for k, v in result["accuracy"].items()), flush=True)
  return seconds


def report(name, seconds, count, unit, machine):
  """Prints each side's rate, ours (engine) vs transformers' best and vs
  our TensorFlow path."""
  rates = {side: count / s for side, s in seconds.items()}
  print(f"\n{name}: {count} {unit}  [{machine}]")
  for side, rate in rates.items():
    print(f"  {side:<24} {rate:10.2f} {unit}/s")

  def best(prefix, trimmed=None):
    found = {s: r for s, r in rates.items() if s.startswith(prefix) and
             trimmed in (None, s.endswith(" trimmed"))}
    return max(found.items(), key=lambda x: x[1]) if found else (None, None)
  # Best against best, then on the same rows (padded; trimmed) where both.
  rows = [None] + ([False, True] if any(s.endswith(" trimmed")
                                        for s in rates) else [])
  for trimmed in rows:
    print({None: "  best against best:", False: "  padded rows:",
           True: "  trimmed rows:"}[trimmed])
    # Best against best: the engine's best; on the same rows: each of its
    # sides (e.g. SQuAD's beam head and the linear one).
    engines = ([best("openvino", trimmed)] if trimmed is None else
               [(s, r) for s, r in rates.items() if s.startswith("openvino")
                and s.endswith(" trimmed") == trimmed])
    for engine, rate in engines:
      for peer in ("hf", "tensorflow", "onnxruntime"):
        side, peer_rate = best(peer, trimmed)
        if engine and side:
          print(f"    {engine} / {side}: {rate / peer_rate:.2f}x  "
                f"[{machine}]")
  return dict(seconds=seconds, rates=rates, count=count, unit=unit)


def report_evaluation(seconds, count, machine):
  """Prints each side's rate and, for a run's first evaluation and a later
  trial's, ours (engine) against transformers' best (warm), our
  TensorFlow path of the same trial and, for the first, transformers'
  first call in its process (like ours, the first at those shapes)."""
  rates = {side: count / s for side, s in seconds.items()}
  print(f"\nthe runner's GLUE dev evaluation, end to end: {count} examples"
        f"  [{machine}]")
  for side, rate in rates.items():
    print(f"  {side:<36} {rate:10.2f} examples/s")
  hf = max((r for s, r in rates.items() if s.startswith("hf") and
            not s.endswith(", first call")), default=None)
  hf_first = max((r for s, r in rates.items() if s.startswith("hf") and
                  s.endswith(", first call")), default=None)
  ratios = {}
  for trial in ("", " later trial"):
    engine = [r for s, r in rates.items() if s.startswith("openvino") and
              s.endswith(" later trial") == bool(trial)]
    tf_rate = [r for s, r in rates.items() if s.startswith("tensorflow") and
               s.endswith(" later trial") == bool(trial)]
    if not engine:
      continue
    what = "a later trial" if trial else "the first evaluation"
    peers = [("hf best", hf), ("our TensorFlow", tf_rate[0] if tf_rate
                                else None)]
    if not trial:
      peers.append(("hf's first call", hf_first))
    for peer, rate in peers:
      if rate:
        ratios[f"{what}: engine / {peer}"] = engine[0] / rate
        print(f"  {what}: engine / {peer}: {engine[0] / rate:.2f}x  "
              f"[{machine}]")
  return dict(seconds=seconds, rates=rates, count=count, unit="examples",
              ratios=ratios)


def ceiling(seconds, gemm, peak, machine, label=None):
  """Prints and returns, for each of gemm's works (padded rows "full",
  "trimmed"), the matmuls' time at `peak`, ours (engine) against it, and
  hf's best over it: the largest ratio over hf any engine could reach on
  the same rows. label: what to call the rows instead."""
  out = {}
  for work in gemm:
    floor = gemm[work] / peak
    suffix = " trimmed" if work == "trimmed" else ""
    mine = [t for s, t in seconds.items() if s.startswith("openvino")
            and s.endswith(" trimmed") == bool(suffix)]
    hf = [t for s, t in seconds.items() if s.startswith("hf")
          and s.endswith(" trimmed") == bool(suffix)]
    if not (mine and hf):
      continue
    out[work] = dict(matmul_seconds=floor, engine_over_floor=min(mine) / floor,
                     hf_best_over_floor=min(hf) / floor)
    print(f"  {label or work + ' rows'}: matmuls alone {floor:.3f} s at the "
          f"engine's peak; "
          f"ours {min(mine) / floor:.2f}x that; hf's best / it = "
          f"{min(hf) / floor:.2f}x, the most any engine could gain over hf "
          f"[{machine}]")
  return out


def main(argv=None):
  args = parse_args(argv)
  args.engine_list = [e.strip() for e in args.engines.split(",")]
  args.omp_wait_policy = set_omp_wait_policy(args.omp_wait_policy)
  machine = cpu_kind()
  print(f"{machine}; {args.size} preset, batch {args.batch_size}; "
        f"engine precision {args.precision}; PyTorch's OpenMP wait policy "
        f"{args.omp_wait_policy}", flush=True)
  # Paths relative to the repository: a record names no machine's folders.
  result = dict(machine=machine, settings={
      k: os.path.relpath(v, ROOT) if isinstance(v, str) and os.path.isabs(v)
      else v for k, v in vars(args).items() if isinstance(v, (int, str))})
  with scratch("inference_engine_") as work_dir:
    ft.prepare(args, work_dir)
    args.features, args.dev = {}, {}
    for kind in ("glue", "squad"):
      runner = ft.make_runner(kind, "float32", args)
      args.features[kind] = ft.train_features(runner, args)
      args.dev[kind] = runner.data.examples_and_features(runner.tasks[0],
                                                         "dev")
    peak = matmul_peak(resolve_precision(args.precision))
    print(f"the engine's matmul: {peak / 1e9:.0f} GFLOP/s  [{machine}]")
    result["matmul_peak_flops"] = peak
    for kind in ("glue", "squad"):
      sides, count, gemm = forward_sides(kind, args)
      seconds = best_of(sides, args.loops, lambda: hf_seconds(
          "forward", kind, args, work_dir, loops=1))
      result[f"{kind}_forward"] = report(
          f"{kind} dev forward", seconds, count, "examples", machine)
      result[f"{kind}_forward"]["ceiling"] = ceiling(seconds, gemm, peak,
                                                     machine)
    seconds = evaluation_end_to_end(args)
    seconds.update(hf_seconds("evaluation", "glue", args, work_dir))
    result["evaluation"] = report_evaluation(
        seconds, len(args.dev["glue"][0]), machine)
    seconds, count, gemm = pll_sides(args)
    seconds.update(hf_seconds("pll", "glue", args, work_dir))
  result["mlm_pll"] = report("n-pass MLM PLL", seconds, count, "sentences",
                             machine)
  result["mlm_pll"]["ceiling"] = ceiling(seconds, gemm, peak, machine,
                                         "the passes' rows")
  write_json(args.json, result)
  return result


if __name__ == "__main__":
  main()
