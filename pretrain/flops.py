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

Every objective (`config.objective` and the generator/training switches of a
PretrainingConfig) is a list of parts, each an encoder or a head run on all
T tokens or on the masked ones (its class's `flops_parts`, in
pretrain/objectives/); both conventions price the same list, so they cannot
disagree on what a step runs:
  mlm             encoder + MLM head at the masked positions
  electra(_15)    generator (encoder + MLM head, masked) + discriminator
                  (encoder + disc head, all T); _15 only restricts the loss
  replace_mlm     generator + main encoder + MLM head at the masked positions
  all_tokens_mlm  generator + main encoder + MLM head and copy head on all T
  electric        two-tower generator (two causal encoders; its head, on the
                  concatenated states, at all T: the NCE loss needs q of every
                  token) + discriminator (encoder + energy head, all T)
  script          one encoder run twice: MLM head at the masked positions,
                  then the critic's vocabulary logits at all T
two_tower_generator (ELECTRA-TT) swaps in the two towers, head still masked;
uniform/unigram generators are no network (their sampling is not counted);
adversarial adds the REINFORCE baseline (dense to 1) at the masked positions;
two_stage trains the generator alone, then samples from it (forward only)
while the discriminator trains. Weight sharing, between the networks or
across layers, changes no FLOPs (a shared encoder still runs twice; GDES's
one table-sized add a step is left out).
`train_flops_per_step`, `model_flops_per_step` (run averages over the two
stages, or one `stage`) and `total_train_flops` take a PretrainingConfig.

Configs are read by attribute; the objectives' registry imports Keras.
"""

import collections
import copy
import types

from pretrain.config import PretrainingConfig
from model import config as model_config
from pretrain import load_objectives

objectives = load_objectives()
ALL = objectives.base.ALL
GENERATOR, MAIN = objectives.base.GENERATOR, objectives.base.MAIN
HeadCost = objectives.base.HeadCost

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
def _layer_flops_per_token(model_config, seq_len):
  """One post-LN transformer layer, forward, per token (paper convention)."""
  h, i = model_config.hidden_size, model_config.intermediate_size
  heads = model_config.num_attention_heads
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


def _embedding_flops_per_token(model_config):
  """Dense (one-hot) lookups of token, position and type, then LN/dropout."""
  e, h = model_config.embedding_size, model_config.hidden_size
  tables = (model_config.vocab_size + model_config.max_position_embeddings +
            model_config.type_vocab_size)
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


def _mlm_head_flops_per_token(model_config, towers=1):
  """dense(h->e) + GELU + LN, tied vocab projection + bias, softmax; a
  two-tower head's dense reads both towers' states, concatenated."""
  h = towers * model_config.hidden_size
  e, v = model_config.embedding_size, model_config.vocab_size
  return (2 * h * e + e + e * (GELU + LAYER_NORM) + 2 * e * v + v +
          SOFTMAX * v)


def _disc_head_flops_per_token(model_config):
  """dense(h->h) + GELU, dense(h->1), sigmoid."""
  h = model_config.hidden_size
  return 2 * h * h + h + GELU * h + 2 * h + 1 + SIGMOID


def _copy_head_flops_per_token(model_config):
  """all_tokens_mlm's copy probability: dense(h->1), sigmoid."""
  return 2 * model_config.hidden_size + 1 + SIGMOID


def _baseline_head_flops_per_token(model_config):
  """Adversarial training's REINFORCE baseline: dense(h->1)."""
  return 2 * model_config.hidden_size + 1


# The shared heads' costs (an objective's own head brings its HeadCost);
# matmuls: a two-tower head's dense reads both towers' states, concatenated.
HEAD_COSTS = {
    "mlm_head": HeadCost(_mlm_head_flops_per_token, lambda m: 2 * (
        m.embedding_size * (m.hidden_size + m.vocab_size))),
    "two_tower_head": HeadCost(
        lambda m: _mlm_head_flops_per_token(m, 2),
        lambda m: 2 * m.embedding_size * (2 * m.hidden_size + m.vocab_size)),
    "disc_head": HeadCost(_disc_head_flops_per_token,
                          lambda m: 2 * m.hidden_size * (m.hidden_size + 1)),
    "copy_head": HeadCost(_copy_head_flops_per_token,
                          lambda m: 2 * m.hidden_size),
    "baseline_head": HeadCost(_baseline_head_flops_per_token,
                              lambda m: 2 * m.hidden_size)}


def head_cost(kind):
  """A Part's HeadCost: its own, or a shared head's by name."""
  return kind if isinstance(kind, HeadCost) else HEAD_COSTS[kind]


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


def train_flops_per_step(config_or_model_configs, seq_len=None, batch_size=None,
                         masked_fraction=None, factor=PAPER_TRAIN_FACTOR,
                         stage=None):
  """Training FLOPs per step, paper convention (`factor` 2: backward =
  forward; `model_flops_per_step` is the matmul convention's count).

  `config_or_model_configs` is a PretrainingConfig (vocab_size set), counted as
  its objective, or a (disc_config, gen_config) pair, counted as ELECTRA
  (gen_config None for a uniform generator). A PretrainingConfig also
  supplies seq_len, batch_size and masked_fraction (mask_prob) when they are
  None. Two-stage training: `stage` 1 or 2, else the run's average step.
  """
  run = _describe(config_or_model_configs, seq_len, batch_size)
  if masked_fraction is None:
    masked_fraction = run.mask_prob
  def price(part):
    if part.kind == "encoder":
      return encoder_forward_flops(part.config, run.seq_len)
    tokens = run.seq_len * (1 if part.where == ALL else masked_fraction)
    return tokens * head_cost(part.kind).paper(part.config)

  return run.batch_size * _step_flops(run, price, factor, stage)


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


def model_flops_per_step(config_or_model_configs, seq_len=None, batch_size=None,
                         max_predictions=None, factor=MATMUL_TRAIN_FACTOR,
                         stage=None):
  """Training matmul FLOPs of one step as this codebase runs it.

  Encoders run on every token; heads on every token or only at the
  `max_predictions` gathered positions per example, as `_parts` says (for
  ELECTRA: the discriminator head everywhere, the generator's MLM head, a
  dense then the tied vocabulary projection, at the gathered positions).
  x3 for training; two-stage: `stage` 1 or 2, else the run's average step.
  """
  run = _describe(config_or_model_configs, seq_len, batch_size)
  if max_predictions is None:
    if run.max_predictions is None:
      raise ValueError("max_predictions is needed with configs")
    max_predictions = run.max_predictions
  def price(part):
    if part.kind == "encoder":
      return encoder_matmul_flops(part.config, run.seq_len)
    tokens = run.seq_len if part.where == ALL else max_predictions
    return tokens * head_cost(part.kind).matmul(part.config)

  return run.batch_size * _step_flops(run, price, factor, stage)


def total_train_flops(config):
  """Paper-convention FLOPs of a whole run: num_train_steps steps, split
  into two_stage_generator_steps of stage one and the rest of stage two."""
  run = _describe(config)
  if run.algorithm != "two_stage":
    return run.num_train_steps * train_flops_per_step(config)
  stage_one, stage_two = run.stage_steps
  return (stage_one * train_flops_per_step(config, stage=1) +
          stage_two * train_flops_per_step(config, stage=2))


# ------------------------------------------------- what each objective runs
# Each objective lists its parts (PretrainingModel.flops_parts, in its own
# file); `where` says ALL tokens or the MASKED ones, `network` which network
# two-stage training trains.
JOINT_ELECTRA = types.SimpleNamespace(two_tower_generator=False,
                                      training_algorithm="joint")


def _step_flops(run, price, factor, stage):
  """One example's training FLOPs: `factor` x the forward of what trains.
  Two-stage: stage 1 trains the generator alone; stage 2 only samples from
  it (forward, x1) while the discriminator trains."""
  generator = sum(price(p) for p in run.parts if p.network == GENERATOR)
  main = sum(price(p) for p in run.parts if p.network == MAIN)
  if run.algorithm != "two_stage":
    return factor * (generator + main)  # `stage` means nothing here
  stages = {1: factor * generator, 2: generator + factor * main}
  if stage is not None:
    if stage not in stages:
      raise ValueError(f"stage must be 1 or 2, got {stage}")
    return stages[stage]
  n1, n2 = run.stage_steps
  return (n1 * stages[1] + n2 * stages[2]) / (n1 + n2)


# ----------------------------------------------------------------- helpers
def configs_for(model_size, vocab_size=PAPER_VOCAB_SIZE, generator_size=None,
                overrides=None):
  """(discriminator, generator) TransformerConfigs of a preset; the
  generator multiplier defaults to the preset's (Table 5.1)."""
  m = model_config
  disc = m.get_model_config(model_size, vocab_size,
                            _shape_overrides(overrides))
  if generator_size is None:
    generator_size = m.GENERATOR_MULTIPLIER[model_size]
  return disc, m.scale_config(disc, generator_size)


_Run = collections.namedtuple(
    "_Run", "parts seq_len batch_size mask_prob max_predictions algorithm "
    "num_train_steps stage_steps")


def _describe(config_or_model_configs, seq_len=None, batch_size=None):
  """What a step runs and how often: a PretrainingConfig, or a
  (disc_config, gen_config) pair counted as ELECTRA."""
  if isinstance(config_or_model_configs, (tuple, list)):
    disc, gen = config_or_model_configs
    if seq_len is None or batch_size is None:
      raise ValueError("seq_len and batch_size are needed with configs")
    parts = objectives.objective_class("electra").flops_parts(
        JOINT_ELECTRA, disc, gen)
    return _Run(parts=parts, seq_len=seq_len,
                batch_size=batch_size, mask_prob=PAPER_MASKED_FRACTION,
                max_predictions=None, algorithm="joint", num_train_steps=None,
                stage_steps=None)
  raw = config_or_model_configs
  if raw.vocab_size is None:
    raise ValueError("the PretrainingConfig needs vocab_size set")
  config = copy.deepcopy(raw)  # resolve() fills the derived defaults (objective
  config.resolve()  # switches, Electric's two towers, ...); raw stays as it was
  m = model_config
  disc = m.get_model_config(config.model_size, config.vocab_size,
                            _shape_overrides(config.model_hparam_overrides))
  gen = None  # a uniform or unigram generator is no network
  if not (config.uniform_generator or config.unigram_generator):
    gen = m.scale_config(disc, config.generator_hidden_size,
                         config.generator_ffn_size, config.generator_heads,
                         config.generator_layers)
  seq_len = seq_len or config.max_seq_length
  steps, stage_one = config.num_train_steps, config.two_stage_generator_steps
  return _Run(
      parts=objectives.objective_class(config.objective).flops_parts(
          config, disc, gen),
      seq_len=seq_len, batch_size=batch_size or config.train_batch_size,
      mask_prob=config.mask_prob,
      # the unresolved default follows a seq_len given here
      max_predictions=raw.max_predictions_per_seq or int(
          (config.mask_prob + 0.005) * seq_len),
      algorithm=config.training_algorithm, num_train_steps=steps,
      stage_steps=(stage_one, steps - stage_one))


def _shape_overrides(overrides):
  """model_hparam_overrides less share_layers: ALBERT-style sharing reuses
  weights, not FLOPs, and a TransformerConfig may not know the field."""
  return {k: v for k, v in (overrides or {}).items() if k != "share_layers"}


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


# Rows of `python -m pretrain.flops`' per-objective table, beside one row
# per registered objective: PretrainingConfig fields on top of the small
# preset's defaults (seq 128, batch 128).
VARIANT_RUNS = {
    "ELECTRA-TT": dict(two_tower_generator=True),
    "uniform generator": dict(uniform_generator=True),
    "adversarial": dict(training_algorithm="adversarial"),
    # two-stage needs a discriminator-size generator (section 3.2)
    "two-stage, gen 1x": dict(training_algorithm="two_stage",
                              generator_hidden_size=1.0),
}


def objective_runs():
  runs = {name: dict(objective=name) for name in objectives.objective_names()}
  return dict(runs, **VARIANT_RUNS)


def objective_table(model_size="small", vocab_size=PAPER_VOCAB_SIZE):
  """Per-step FLOPs of each objective_runs() row (two-stage: the run's
  average step): dicts of name, train (paper), model (matmuls) and both
  as ratios to ELECTRA's."""
  rows = []
  for name, fields in objective_runs().items():
    config = PretrainingConfig(model_size=model_size, vocab_size=vocab_size,
                           **fields)
    rows.append(dict(name=name, train=train_flops_per_step(config),
                     model=model_flops_per_step(config)))
  electra = next(r for r in rows if r["name"] == "electra")
  for r in rows:
    r["train_ratio"] = r["train"] / electra["train"]
    r["model_ratio"] = r["model"] / electra["model"]
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
  print("\nEach objective, small preset (vocab 30522, seq 128, batch 128, "
        "19 masked), per step:")
  print(f"  {'objective':<18} {'paper':>9} {'ratio':>6} {'matmul':>9} "
        f"{'ratio':>6}")
  for r in objective_table():
    print(f"  {r['name']:<18} {r['train']:9.3g} {r['train_ratio']:6.2f} "
          f"{r['model']:9.3g} {r['model_ratio']:6.2f}")
  print("  (ratios to electra; two-stage: the run's average step, with a "
        "generator as big\n  as the discriminator, as section 3.2 needs)")


if __name__ == "__main__":
  main()
