"""transformers' side of benchmarks/inference_engine.py, in a process of its
own: only torch and transformers run in it, with PyTorch's OpenMP wait
policy as the parent sets it. In one process with our TensorFlow and
OpenVINO sides, each side's idle threads slowed the other's (Small, all
872 SST-2 dev rows, bf16, trimmed: transformers 874 ex/s alternating with
them, 1026 alone; 2026-11-29, AMD EPYC).

  python benchmarks/hf_inference.py REQUEST.json RESULT.json

REQUEST: {"job": "forward" | "evaluation" | "pll", "kind": "glue" |
"squad", "rows": dev rows (.npz of input_ids, input_mask, segment_ids[,
label_ids]), "train_rows": .npz, "examples": dev examples counted,
"pretrained": the random model's folder, "batch_size", "loops",
"torch_threads", "size", "sentences", "vocab_file"}. RESULT: {"seconds":
{side: best of loops}, "first": {side: its first call, the process's
first of the model at those shapes}, "accuracy": {side: value}}.
"""

import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

PRECISIONS = ("bfloat16", "float32")  # bf16 first: its first call is cold


def trimmed(hf, rows, b, labels=None):
  """fn() -> (seconds, accuracy or None) of transformers over the rows
  sorted by length, each batch padded to its longest row (as its
  DataCollatorWithPadding pads), the logits put back in row order."""
  import torch
  from benchmarks import finetune_throughput as ft
  order = np.argsort(rows["input_mask"].sum(axis=1), kind="stable")
  model = hf["model"]

  def run():
    model.eval()
    start = time.perf_counter()
    predictions = np.empty(len(order), np.int64)
    with torch.inference_mode(), hf["autocast"]:
      for i in range(0, len(order), b):
        idx = order[i:i + b]
        length = int(rows["input_mask"][idx].sum(axis=1).max())
        out = model(**ft.hf_inputs({k: rows[k][idx][:, :length] for k in (
            "input_ids", "input_mask", "segment_ids")}, 0, len(idx)))
        if labels is not None:
          predictions[idx] = out.logits.float().argmax(-1).numpy()
    seconds = time.perf_counter() - start
    return seconds, (None if labels is None else
                     float(np.mean(predictions == labels)))
  return run


def sides(request):
  """{side: fn() -> (seconds, accuracy or None)} of the request's job."""
  from benchmarks import finetune_throughput as ft
  from benchmarks import scoring_speed
  args = ft.parse_args([])
  args.batch_size = request["batch_size"]
  args.torch_threads = request["torch_threads"]
  args.pretrained = request["pretrained"]
  out = {}
  if request["job"] == "pll":
    sargs = scoring_speed.parse_args([
        "--sentences", str(request["sentences"]), "--model-size",
        request["size"], "--repeats", "1"])
    sentences, _ = scoring_speed.load_sentences(sargs)
    for precision in PRECISIONS:
      out[f"hf {precision}"] = lambda p=precision: (scoring_speed.time_hf(
          "hf_mlm_at_mask", sargs, sentences, precision=p)["seconds"], None)
    return out
  rows = dict(np.load(request["rows"]))
  train = dict(np.load(request["train_rows"]))
  kind, b = request["kind"], request["batch_size"]
  for precision in PRECISIONS:
    hf = ft.build_hf(kind, precision, args, train, rows, request["examples"])
    if request["job"] == "forward":
      out[f"hf {precision}"] = lambda f=hf["forward"]: (f(), None)
      out[f"hf {precision} trimmed"] = trimmed(hf, rows, b)
    else:  # the evaluation: predictions and their accuracy too
      out[f"hf {precision} trimmed"] = trimmed(hf, rows, b,
                                               rows["label_ids"])
  return out


def main(request_path, result_path):
  with open(request_path) as f:
    request = json.load(f)
  import transformers
  transformers.logging.set_verbosity_error()
  found = sides(request)
  first, accuracy, times = {}, {}, {name: [] for name in found}
  for name, fn in found.items():
    first[name], accuracy[name] = fn()  # its first call: warms it
  for _ in range(request["loops"]):  # then alternating loop by loop
    for name, fn in found.items():
      times[name].append(fn()[0])
  with open(result_path, "w") as f:
    json.dump(dict(seconds={k: min(v) for k, v in times.items()},
                   first=first, accuracy=accuracy), f, indent=2)


def run(request, work_dir):
  """The result of `request` (its arrays already written) from a child
  process; its environment is ours (the OpenMP wait policy set)."""
  import subprocess
  path = os.path.join(work_dir, f"hf_{request['job']}_{request['kind']}")
  with open(path + "_request.json", "w") as f:
    json.dump(request, f)
  subprocess.run([sys.executable, os.path.abspath(__file__),
                  path + "_request.json", path + "_result.json"], check=True)
  with open(path + "_result.json") as f:
    return json.load(f)


if __name__ == "__main__":
  main(*sys.argv[1:3])
