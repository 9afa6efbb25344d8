"""Analytic FLOPs counts: the ELECTRA paper's conventions, and ours for MFU.

Paper conventions (ELECTRA appendix E; dissertation section 5.2.2):
  * a matmul of [m, k] by [k, n] is 2*m*k*n FLOPs; every other mathematical
    op (add, exp, ...) is one FLOP per element, whatever its machine cost;
  * embedding lookups are "dense": a one-hot vector times the table;
  * the backward pass costs the same as the forward pass, so one training
    example costs 2x its forward pass (PAPER_TRAIN_FACTOR);
  * the generator's softmax runs only on the masked fraction of tokens.
Table 1's shapes are Table 5.1's (small/base), its steps and batch sizes
Table 6's, sequence length 128 for Small and 512 for Base (the paper cut it
from 512 to make Small), and inference one length-128 classification input.
These reproduce BERT-Small/Base and ELECTRA-Base within 2%. ELECTRA-Small
with Table 5.1's 1/4-width generator counts 1.30e18, 7% under the 1.4e18
printed: that figure is BERT-Small's budget (section 3.3: BERT-Small's 1.45M
steps use "the same training FLOPs as ELECTRA-Small"), as its 50%..6.25%
rows show, being halvings of BERT-Small's 1.42e18 and not of 1.30e18.

`model_flops_per_step` is a different, hardware-facing count for MFU: only
the matmuls this codebase really runs (no lookups, no elementwise ops), and
3x the forward pass for training (the backward matmuls are two: gradients of
inputs and of weights).

Pure Python: configs are read by attribute, so this imports no TF or Keras.
"""

import importlib.util
import os
import sys

PAPER_TRAIN_FACTOR = 2  # forward + backward, backward = forward (appendix E)
MATMUL_TRAIN_FACTOR = 3  # forward + 2 backward matmuls per forward matmul

# Elementwise costs per element, counted as appendix E says (an exp is 1).
SOFTMAX = 5  # max, subtract, exp, sum, divide
LAYER_NORM = 7  # mean, center, square, variance, normalize, scale, shift
GELU = 5  # x/sqrt(2), erf, +1, *x, *0.5 (the exact form in model/encoder.py)
DROPOUT = 4  # random draw, compare, select, rescale
SIGMOID = 4  # negate, exp, add, divide

# Table 1 of the ELECTRA paper (train FLOPs, infer FLOPs) and what produced
# them (Table 6: steps, batch; section 3.3: sequence lengths).
PAPER_TABLE1 = {
    "BERT-Small": (1.4e18, 3.7e9),
    "ELECTRA-Small": (1.4e18, 3.7e9),
    "BERT-Base": (6.4e19, 2.9e10),
    "ELECTRA-Base": (6.4e19, 2.9e10),
}
TABLE1_RUNS = {  # name: (size, objective, train steps, batch, seq length)
    "BERT-Small": ("small", "mlm", 1_450_000, 128, 128),
    "ELECTRA-Small": ("small", "electra", 1_000_000, 128, 128),
    "BERT-Base": ("base", "mlm", 1_000_000, 256, 512),
    "ELECTRA-Base": ("base", "electra", 766_000, 256, 512),
}
# ELECTRA-Small trained for part of its steps, Table 1 (fraction: FLOPs).
PAPER_ELECTRA_SMALL_PARTIAL = {0.5: 7.1e17, 0.25: 3.6e17, 0.125: 1.8e17,
                               0.0625: 8.9e16}
PAPER_VOCAB_SIZE = 30522  # BERT's uncased WordPiece vocabulary
PAPER_MASKED_FRACTION = 0.15  # Table 5.1's mask percent for Small and Base
INFER_SEQ_LEN = 128  # "Infer FLOPs assumes single length-128 input"


# ------------------------------------------------------ paper conventions
def _layer_flops_per_token(c, seq_len):
  """One post-LN transformer layer, forward, per token (paper convention)."""
  h, i, heads = c.hidden_size, c.intermediate_size, c.num_attention_heads
  attention = (
      3 * (2 * h * h + h)  # query/key/value dense + bias
      + 2 * h * seq_len  # scores: q . k against every position
      + heads * seq_len * (2 + SOFTMAX + DROPOUT)  # scale, mask, softmax, drop
      + 2 * h * seq_len  # probabilities times values
      + 2 * h * h + h  # output dense + bias
      + h * (DROPOUT + 1 + LAYER_NORM))  # dropout, residual, LayerNorm
  ffn = (2 * h * i + i + GELU * i  # intermediate dense, bias, activation
         + 2 * i * h + h  # output dense + bias
         + h * (DROPOUT + 1 + LAYER_NORM))
  return attention + ffn


def _embedding_flops_per_token(c):
  """Dense (one-hot) lookups of token, position and type, then LN/dropout."""
  e, h = c.embedding_size, c.hidden_size
  tables = c.vocab_size + c.max_position_embeddings + c.type_vocab_size
  flops = 2 * e * tables + 2 * e + e * (LAYER_NORM + DROPOUT)
  if e != h:  # factorized embeddings are projected up to the hidden size
    flops += 2 * e * h + h
  return flops


def encoder_forward_flops(config, seq_len):
  """Embeddings + all transformer layers, forward, per example."""
  per_token = (_embedding_flops_per_token(config) +
               config.num_hidden_layers * _layer_flops_per_token(
                   config, seq_len))
  return seq_len * per_token


def _mlm_head_flops_per_token(c):
  """dense(h->e) + GELU + LN, tied vocab projection + bias, softmax."""
  h, e, v = c.hidden_size, c.embedding_size, c.vocab_size
  return (2 * h * e + e + e * (GELU + LAYER_NORM) + 2 * e * v + v +
          SOFTMAX * v)


def _disc_head_flops_per_token(c):
  """dense(h->h) + GELU, dense(h->1), sigmoid."""
  h = c.hidden_size
  return 2 * h * h + h + GELU * h + 2 * h + 1 + SIGMOID


def discriminator_forward_flops(config, seq_len):
  """ELECTRA's discriminator: encoder + replaced-token head on every token."""
  return (encoder_forward_flops(config, seq_len) +
          seq_len * _disc_head_flops_per_token(config))


def generator_forward_flops(gen_config, seq_len,
                            masked_fraction=PAPER_MASKED_FRACTION):
  """A masked LM (ELECTRA's generator, or BERT): encoder on every token, the
  vocabulary softmax on the masked fraction only."""
  return (encoder_forward_flops(gen_config, seq_len) + masked_fraction *
          seq_len * _mlm_head_flops_per_token(gen_config))


mlm_forward_flops = generator_forward_flops  # BERT is the same computation


def infer_flops(config, seq_len=INFER_SEQ_LEN, num_labels=2):
  """One classification input: encoder + dense/GELU/linear on [CLS]."""
  h = config.hidden_size
  head = 2 * h * h + h + GELU * h + 2 * h * num_labels + num_labels
  return encoder_forward_flops(config, seq_len) + head


def train_flops_per_step(hparams_or_configs, seq_len=None, batch_size=None,
                         masked_fraction=None, factor=PAPER_TRAIN_FACTOR):
  """ELECTRA training FLOPs per step: generator + discriminator, forward and
  backward (paper convention: `factor`=2; pass 3 for the matmul convention).

  `hparams_or_configs` is a PretrainingConfig (vocab_size set) or a
  (disc_config, gen_config) pair, gen_config None for a uniform generator;
  a PretrainingConfig also supplies
  seq_len, batch_size and masked_fraction (mask_prob) when they are None.
  """
  disc, gen, seq_len, batch_size, masked_fraction = _resolve(
      hparams_or_configs, seq_len, batch_size, masked_fraction)
  per_example = discriminator_forward_flops(disc, seq_len)
  if gen is not None:
    per_example += generator_forward_flops(gen, seq_len, masked_fraction)
  return factor * batch_size * per_example


def mlm_train_flops_per_step(config, seq_len, batch_size,
                             masked_fraction=PAPER_MASKED_FRACTION,
                             factor=PAPER_TRAIN_FACTOR):
  """BERT (MLM only) training FLOPs per step, paper convention."""
  return factor * batch_size * mlm_forward_flops(config, seq_len,
                                                 masked_fraction)


# -------------------------------------------- what this codebase computes
def encoder_matmul_flops(config, seq_len):
  """Matmul FLOPs of one example through model/encoder.py's Encoder: the
  lookups are gathers (not matmuls) here, so only dense + attention."""
  h, i, t = config.hidden_size, config.intermediate_size, seq_len
  flops = 0
  if config.embedding_size != h:
    flops += 2 * t * config.embedding_size * h  # embeddings_project
  per_layer = (4 * 2 * t * h * h  # query, key, value, attention_output
               + 2 * 2 * t * t * h  # scores and context, summed over heads
               + 2 * 2 * t * h * i)  # intermediate and output
  return flops + config.num_hidden_layers * per_layer


def model_flops_per_step(hparams_or_configs, seq_len=None, batch_size=None,
                         max_predictions=None, factor=MATMUL_TRAIN_FACTOR):
  """Training matmul FLOPs of one ElectraModel step as this codebase runs it.

  Both encoders run on every token; the discriminator head on every token;
  the generator's MLM head (dense, then the tied vocabulary projection) only
  at the `max_predictions` gathered positions per example. x3 for training.
  """
  disc, gen, seq_len, batch_size, _ = _resolve(hparams_or_configs, seq_len,
                                               batch_size, None)
  if max_predictions is None:
    if isinstance(hparams_or_configs, (tuple, list)):
      raise ValueError("max_predictions is needed with configs")
    hp = hparams_or_configs  # unresolved configs fall back to the default
    max_predictions = hp.max_predictions_per_seq or int(
        (hp.mask_prob + 0.005) * seq_len)
  h, t, p = disc.hidden_size, seq_len, max_predictions
  disc_head = 2 * t * h * h + 2 * t * h  # dense, dense_prediction
  per_example = encoder_matmul_flops(disc, t) + disc_head
  if gen is not None:
    per_example += (encoder_matmul_flops(gen, t) +
                    2 * p * gen.hidden_size * gen.embedding_size +
                    2 * p * gen.embedding_size * gen.vocab_size)
  return factor * batch_size * per_example


# ----------------------------------------------------------------- helpers
_CONFIG_MODULE = None


def _config_module():
  """model/config.py, loaded without model/__init__.py (which imports Keras)."""
  global _CONFIG_MODULE
  if _CONFIG_MODULE is None:
    _CONFIG_MODULE = sys.modules.get("model.config")
  if _CONFIG_MODULE is None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location(
        "_flops_model_config", os.path.join(root, "model", "config.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    _CONFIG_MODULE = module
  return _CONFIG_MODULE


def configs_for(model_size, vocab_size=PAPER_VOCAB_SIZE, generator_size=None,
                overrides=None):
  """(discriminator, generator) TransformerConfigs of a preset; the
  generator multiplier defaults to the preset's (Table 5.1)."""
  m = _config_module()
  disc = m.get_model_config(model_size, vocab_size, overrides)
  if generator_size is None:
    generator_size = m.GENERATOR_MULTIPLIER[model_size]
  return disc, m.scale_config(disc, generator_size)


def _resolve(hparams_or_configs, seq_len, batch_size, masked_fraction):
  if isinstance(hparams_or_configs, (tuple, list)):
    disc, gen = hparams_or_configs
    if seq_len is None or batch_size is None:
      raise ValueError("seq_len and batch_size are needed with configs")
    if masked_fraction is None:
      masked_fraction = PAPER_MASKED_FRACTION
    return disc, gen, seq_len, batch_size, masked_fraction
  hp = hparams_or_configs  # a PretrainingConfig, as build_model reads it
  m = _config_module()
  disc = m.get_model_config(hp.model_size, hp.vocab_size,
                            hp.model_hparam_overrides)
  gen = None  # a uniform generator is no network
  if not hp.uniform_generator:
    gen = m.scale_config(disc, hp.generator_hidden_size,
                         hp.generator_ffn_size, hp.generator_heads,
                         hp.generator_layers)
  return (disc, gen, seq_len or hp.max_seq_length,
          batch_size or hp.train_batch_size,
          hp.mask_prob if masked_fraction is None else masked_fraction)


def table1():
  """Rows of ELECTRA Table 1 recomputed: dicts of name, ours and paper's."""
  rows = []
  for name, (size, objective, steps, batch, seq_len) in TABLE1_RUNS.items():
    disc, gen = configs_for(size)
    if objective == "electra":
      train = steps * train_flops_per_step((disc, gen), seq_len, batch)
    else:
      train = steps * mlm_train_flops_per_step(disc, seq_len, batch)
    paper_train, paper_infer = PAPER_TABLE1[name]
    rows.append(dict(name=name, steps=steps, batch=batch, seq_len=seq_len,
                     train=train, paper_train=paper_train,
                     infer=infer_flops(disc), paper_infer=paper_infer))
  return rows


def main():
  print(f"{'model':<14} {'steps x batch x len':>20} {'train':>9} "
        f"{'paper':>8} {'diff':>6} {'infer':>9} {'paper':>8} {'diff':>6}")
  for r in table1():
    run = f"{r['steps'] / 1e6:g}M x {r['batch']} x {r['seq_len']}"
    train_diff = r["train"] / r["paper_train"] - 1
    infer_diff = r["infer"] / r["paper_infer"] - 1
    print(f"{r['name']:<14} {run:>20} {r['train']:9.3g} "
          f"{r['paper_train']:8.2g} {train_diff:+6.1%} {r['infer']:9.3g} "
          f"{r['paper_infer']:8.2g} {infer_diff:+6.1%}")
  rows = {r["name"]: r for r in table1()}
  budget = rows["BERT-Small"]["train"]
  print("\nELECTRA-Small's train figure is BERT-Small's budget: its partial "
        "rows are halvings of it.")
  for frac, paper in PAPER_ELECTRA_SMALL_PARTIAL.items():
    print(f"  {frac:>6.2%} trained: paper {paper:.2g}, BERT-Small budget "
          f"{frac * budget:.3g}, our ELECTRA-Small count "
          f"{frac * rows['ELECTRA-Small']['train']:.3g}")
  disc, gen = configs_for("small")
  print("\nELECTRA-Small at our defaults (seq 128, batch 128, 19 masked "
        "positions), per step:")
  print(f"  paper convention (2x fwd, dense lookups): "
        f"{train_flops_per_step((disc, gen), 128, 128):.3g}")
  print(f"  matmuls this codebase runs (3x fwd):      "
        f"{model_flops_per_step((disc, gen), 128, 128, 19):.3g}")

if __name__ == "__main__":
  main()
