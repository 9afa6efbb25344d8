"""The training step of transformers' PyTorch ELECTRA, timed on our batches:
the baseline run_gpu_slot.py lays beside the JAX step (docs/gpu_slot.md).

  JAX_PLATFORMS=cpu KERAS_BACKEND=jax python benchmarks/hf_electra_step.py \
      --arrays .slot_data [--hparams configs/electra_small.json] \
      [--batch 128] [--steps 20] [--json out.json]

No TensorFlow: batches are the exported arrays (pretrain/arrays.py),
unpacked and masked by the same code as the JAX driver (pretrain/masking.py
under keras.ops, here on JAX's CPU, so the GPU stays PyTorch's). The model
is benchmarks/hf_electra_loop.py's: transformers' ElectraForMaskedLM
generator + ElectraForPreTraining discriminator with shared embeddings,
sampling at the config's temperature, gen_weight * MLM + disc_weight * BCE;
AdamW with no decay for LayerNorm and biases, global-norm clipping, as
transformers users train it: eager PyTorch, bfloat16 autocast on a GPU
(float32 on a CPU). Reports the best of --repeats timings of --steps steps.
"""

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

from benchmarks import write_json  # noqa: E402
from benchmarks.hf_electra_loop import Electra  # noqa: E402
from benchmarks.hf_electra_loop import optimizer_for  # noqa: E402


def masked_batches(arrays, config, batch, count, seed=0):
  """`count` masked batches of the arrays' training examples (NumPy)."""
  import jax  # pylint: disable=g-import-not-at-top
  from pretrain import arrays as arrays_lib  # pylint: disable=g-import-not-at-top
  from pretrain import masking  # pylint: disable=g-import-not-at-top
  mask_config = masking.config_from(config, arrays.meta)
  n = arrays.num_examples("train")
  out = []
  for i in range(count):
    rows = np.arange(i * batch, (i + 1) * batch) % n
    features = arrays_lib.unpack({c: v[rows] for c, v in
                                  arrays.train.items()})
    noise = jax.random.uniform(
        jax.random.PRNGKey(seed + i),
        (masking.NUM_NOISE, batch, mask_config.max_predictions))
    masked = masking.mask_batch(features, mask_config, noise)
    out.append({k: np.asarray(v) for k, v in masked.items()})
  return out


def to_device(batch, device):
  return {k: torch.from_numpy(v.astype(
      np.float32 if v.dtype.kind == "f" else np.int64)).to(device)
          for k, v in batch.items()}


def time_steps(config, batches, steps, repeats, device):
  torch.manual_seed(config.seed)
  model = Electra(config).to(device)
  model.train()
  opt, _ = optimizer_for(model, config)
  sampler = torch.Generator(device=device).manual_seed(config.seed)
  autocast = (torch.autocast("cuda", dtype=torch.bfloat16)
              if device.type == "cuda" else torch.autocast("cpu",
                                                           enabled=False))

  def step(batch):
    with autocast:
      out = model(batch, sampler)
    opt.zero_grad(set_to_none=True)
    out["loss"].backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm)
    opt.step()
    return out["loss"]

  def sync():
    if device.type == "cuda":
      torch.cuda.synchronize()

  start = time.perf_counter()
  for i in range(3):  # warm-up (kernel selection, allocator)
    loss = step(batches[i % len(batches)])
  sync()
  warmup_s = time.perf_counter() - start
  times = []
  for _ in range(repeats):
    sync()
    start = time.perf_counter()
    for i in range(steps):
      loss = step(batches[i % len(batches)])
    sync()
    times.append((time.perf_counter() - start) / steps)
  return {"step_s": min(times), "warmup_s": warmup_s,
          "loss": float(loss.detach()),
          "parameters": sum(p.numel() for p in model.parameters())}


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--arrays", required=True, help="pretrain/arrays.py folder")
  p.add_argument("--hparams", action="append", default=[],
                 help="a JSON file or string (repeatable, later wins)")
  p.add_argument("--batch", type=int, default=128)
  p.add_argument("--steps", type=int, default=20)
  p.add_argument("--repeats", type=int, default=3)
  p.add_argument("--json", default="")
  args = p.parse_args(argv)
  from pretrain import arrays as arrays_lib  # pylint: disable=g-import-not-at-top
  from pretrain.config import PretrainingConfig  # pylint: disable=g-import-not-at-top
  from util.config import apply_overrides  # pylint: disable=g-import-not-at-top
  from util.config import load_hparams  # pylint: disable=g-import-not-at-top
  arrays = arrays_lib.load(args.arrays)
  config = PretrainingConfig(objective="electra", temperature=1.0)
  for h in args.hparams:
    config = apply_overrides(config, load_hparams(h), source=h)
  config.train_batch_size = args.batch
  config.max_seq_length = arrays.meta["max_seq_length"]
  config.max_predictions_per_seq = None
  config.resolve()
  arrays.check(config)
  device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
  name = (torch.cuda.get_device_name(0) if device.type == "cuda"
          else "cpu")
  batches = [to_device(b, device)
             for b in masked_batches(arrays, config, args.batch, 4)]
  result = {"device": name, "torch": torch.__version__,
            "transformers": transformers.__version__,
            "model_size": config.model_size, "batch": args.batch,
            "seq_len": config.max_seq_length,
            "temperature": config.temperature,
            "precision": "bfloat16 autocast" if device.type == "cuda"
            else "float32"}
  result.update(time_steps(config, batches, args.steps, args.repeats,
                           device))
  result["seq_per_s"] = args.batch / result["step_s"]
  print(f"transformers {transformers.__version__} / torch {torch.__version__}"
        f" ELECTRA-{config.model_size} on {name} ({result['precision']}): "
        f"{result['step_s'] * 1e3:.1f} ms/step, {result['seq_per_s']:.1f} "
        f"seq/s, {result['parameters']:,} parameters", flush=True)
  write_json(args.json, result)
  return result


if __name__ == "__main__":
  main()
