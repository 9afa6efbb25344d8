"""An independent ELECTRA loop in transformers/PyTorch on our own batches.

  python benchmarks/hf_electra_loop.py --data-dir DATA_DIR \
      --hparams configs/electra_tiny.json [--hparams '{"temperature": 1.0}']
      [--eval-every 100] [--json out.json]

A check of our ELECTRA objective against a second implementation: the same
masked batches (pretrain/data.py, same seed), the same sizes and hparams,
but the generator (`ElectraForMaskedLM`) and discriminator
(`ElectraForPreTraining`), sharing embeddings, the sampling, the loss
(gen_weight * MLM + disc_weight * replaced-token BCE over real tokens), AdamW
with warmup + linear decay and global-norm clipping all from PyTorch and
transformers. It prints the train losses and, every --eval-every steps, the
eval disc AUC/loss and generator accuracy on the eval stream, so its curve can
be laid beside `run_pretraining.py`'s for the same hparams. Needs the test
extra (transformers + CPU torch).
"""

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from sklearn import metrics  # noqa: E402

from benchmarks import write_json  # noqa: E402
from model.config import get_model_config  # noqa: E402
from model.config import scale_config  # noqa: E402


def hf_config(c):
  return transformers.ElectraConfig(
      vocab_size=c.vocab_size, embedding_size=c.embedding_size,
      hidden_size=c.hidden_size, num_hidden_layers=c.num_hidden_layers,
      num_attention_heads=c.num_attention_heads,
      intermediate_size=c.intermediate_size, hidden_act="gelu",
      hidden_dropout_prob=c.hidden_dropout_prob,
      attention_probs_dropout_prob=c.attention_probs_dropout_prob,
      max_position_embeddings=c.max_position_embeddings,
      type_vocab_size=c.type_vocab_size,
      initializer_range=c.initializer_range, layer_norm_eps=c.layer_norm_eps)


class Electra(torch.nn.Module):
  """Generator + discriminator with shared embeddings, as ELECTRA trains."""

  def __init__(self, hp):
    super().__init__()
    disc = get_model_config(hp.model_size, hp.vocab_size,
                            hp.model_hparam_overrides)
    gen = scale_config(disc, hp.generator_multiplier, hp.generator_ffn_size,
                       hp.generator_heads, hp.generator_layers)
    self.hp = hp
    self.generator = transformers.ElectraForMaskedLM(hf_config(gen))
    self.discriminator = transformers.ElectraForPreTraining(hf_config(disc))
    self.generator.electra.embeddings = self.discriminator.electra.embeddings
    self.generator.generator_lm_head.weight = (
        self.discriminator.electra.embeddings.word_embeddings.weight)

  def forward(self, batch, generator):
    hp = self.hp
    ids, mask = batch["input_ids"], batch["input_mask"]
    positions, labels = batch["masked_lm_positions"], batch["masked_lm_ids"]
    weights = batch["masked_lm_weights"]
    gen_logits = self.generator(
        input_ids=batch["masked_input_ids"], attention_mask=mask,
        token_type_ids=batch["segment_ids"]).logits
    gen_logits = torch.gather(
        gen_logits, 1, positions[..., None].expand(-1, -1,
                                                   gen_logits.shape[-1]))
    nll = torch.nn.functional.cross_entropy(
        gen_logits.transpose(1, 2), labels, reduction="none")
    mlm_loss = (nll * weights).sum() / (weights.sum() + 1e-6)
    with torch.no_grad():
      probs = torch.softmax(gen_logits.float() / hp.temperature, -1)
      sampled = torch.multinomial(probs.view(-1, probs.shape[-1]), 1,
                                  generator=generator).view(labels.shape)
      fake = batch["masked_input_ids"].clone()
      real = weights > 0
      rows = torch.arange(ids.shape[0], device=ids.device)[:, None].expand_as(
          positions)
      fake[rows[real], positions[real]] = sampled[real]
      disc_labels = (fake != ids).float() * mask
    disc_logits = self.discriminator(
        input_ids=fake, attention_mask=mask,
        token_type_ids=batch["segment_ids"]).logits
    token_loss = torch.nn.functional.binary_cross_entropy_with_logits(
        disc_logits, disc_labels, reduction="none")
    maskf = mask.float()
    disc_loss = (token_loss * maskf).sum() / maskf.sum()
    loss = hp.gen_weight * mlm_loss + hp.disc_weight * disc_loss
    mlm_hits = (gen_logits.argmax(-1) == labels).float()
    return dict(loss=loss, mlm_loss=mlm_loss, disc_loss=disc_loss,
                mlm_accuracy=(mlm_hits * weights).sum() / weights.sum(),
                replaced_fraction=disc_labels.sum() / weights.sum(),
                disc_probs=torch.sigmoid(disc_logits), disc_labels=disc_labels,
                mlm_hits=mlm_hits)


def to_torch(batch):
  out = {}
  for k, v in batch.items():
    v = v.numpy()
    out[k] = torch.from_numpy(v.astype(np.float32 if v.dtype.kind == "f"
                                       else np.int64))
  return out


def optimizer_for(model, hp):
  decay, no_decay = [], []
  for name, p in model.named_parameters():
    lower = name.lower()
    (no_decay if "layernorm" in lower or lower.endswith("bias")
     else decay).append(p)
  opt = torch.optim.AdamW(
      [{"params": decay, "weight_decay": hp.weight_decay_rate},
       {"params": no_decay, "weight_decay": 0.0}],
      lr=hp.learning_rate, betas=(hp.adam_beta1, hp.adam_beta2),
      eps=hp.adam_epsilon)

  def factor(step):  # warmup, then linear decay to 0 (our schedule)
    if step < hp.num_warmup_steps:
      return step / hp.num_warmup_steps
    return max(0.0, 1.0 - step / hp.num_train_steps)

  return opt, torch.optim.lr_scheduler.LambdaLR(opt, factor)


def evaluate(model, batches, generator):
  model.eval()
  probs, labels, masks, hits, weights, losses = [], [], [], [], [], []
  with torch.no_grad():
    for batch in batches:
      out = model(batch, generator)
      probs.append(out["disc_probs"].numpy())
      labels.append(out["disc_labels"].numpy())
      masks.append(batch["input_mask"].numpy() > 0)
      hits.append(out["mlm_hits"].numpy())
      weights.append(batch["masked_lm_weights"].numpy() > 0)
      losses.append(float(out["disc_loss"]))
  model.train()
  probs, labels = np.concatenate(probs), np.concatenate(labels)
  masks = np.concatenate(masks)
  return {"disc_auc": float(metrics.roc_auc_score(labels[masks] > 0.5,
                                                  probs[masks])),
          "disc_loss": float(np.mean(losses)),
          "masked_lm_accuracy": float(np.concatenate(hits)[
              np.concatenate(weights)].mean())}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                   allow_abbrev=False)
  parser.add_argument("--data-dir", required=True)
  parser.add_argument("--hparams", action="append", default=[])
  parser.add_argument("--eval-every", type=int, default=100)
  parser.add_argument("--threads", type=int, default=0)
  parser.add_argument("--json", default="")
  args = parser.parse_args(argv)
  # TensorFlow (the tf.data input) only here: the Electra module above is
  # imported on machines without it (benchmarks/hf_electra_step.py).
  from util.tf_quiet import import_tensorflow
  import_tensorflow()
  from pretrain import config as configure_pretraining
  from pretrain import data
  argv = ["--data-dir", args.data_dir, "--model-name", "hf_reference"]
  for h in args.hparams:
    argv += ["--hparams", h]
  hp = configure_pretraining.load_config(argv)
  meta = data.load_metadata(hp)
  data.check_metadata(meta, hp)
  if hp.objective != "electra":
    raise SystemExit("error: this reference implements objective electra")
  if args.threads:
    torch.set_num_threads(args.threads)
  torch.manual_seed(hp.seed)
  generator = torch.Generator().manual_seed(hp.seed)
  model = Electra(hp)
  opt, schedule = optimizer_for(model, hp)
  train = iter(data.make_dataset(hp, meta, hp.train_batch_size, True))
  eval_batches = [to_torch(b) for b in data.make_dataset(
      hp, meta, hp.eval_batch_size, False).take(hp.num_eval_steps)]
  print(f"transformers {transformers.__version__} / torch "
        f"{torch.__version__}: ELECTRA {hp.model_size}, "
        f"{sum(p.numel() for p in model.parameters()):,} parameters, "
        f"temperature {hp.temperature}, {hp.num_train_steps} steps",
        flush=True)
  curve, sums, start = [], {}, time.time()
  for step in range(1, hp.num_train_steps + 1):
    out = model(to_torch(next(train)), generator)
    opt.zero_grad(set_to_none=True)
    out["loss"].backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), hp.clip_norm)
    opt.step()
    schedule.step()
    for k in ("mlm_loss", "disc_loss", "mlm_accuracy", "replaced_fraction"):
      sums[k] = sums.get(k, 0.0) + float(out[k])
    if step % args.eval_every == 0 or step == hp.num_train_steps:
      n = args.eval_every if step % args.eval_every == 0 else (
          step % args.eval_every)
      point = {"step": step, **{f"train_{k}": v / n for k, v in sums.items()},
               **evaluate(model, eval_batches, generator)}
      sums = {}
      curve.append(point)
      print(" | ".join(f"{k} {v:.4f}" if isinstance(v, float) else
                       f"{k} {v}" for k, v in point.items()) +
            f" | {time.time() - start:.0f}s", flush=True)
  if args.json:
    write_json(args.json, {"hparams": {"temperature": hp.temperature,
                                       "model_size": hp.model_size},
                           "curve": curve})


if __name__ == "__main__":
  main()
