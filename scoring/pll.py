"""`Scorer`: per-token and per-sentence pseudo-log-likelihoods (PLLs) of a
list of sentences under a pretraining run, batched.

Each sentence is scored as one segment, `[CLS] tokens [SEP]`; PLL(x) sums
log p(x_t | x_\\t) over its tokens, never [CLS]/[SEP]. Estimators (method):
  * electric: -E(x)_t, one pass (Electric section 3.2);
  * script: log p(real_t | x) = log S_t / (S_t + 1), one pass (SCRIPT 3.2);
  * mlm: Salazar et al.: x_t replaced by [MASK], log softmax at t of x_t;
    one row per (sentence, token), all rows in big length-sorted batches;
  * electra: ELECTRA appendix G. Per token t: mask it; the generator gives
    p_G(.|c); candidates C = its top_k (never [PAD]/[CLS]/[SEP]/[MASK]) plus
    x_t if it is not among them; each v in C is put at t and the
    discriminator gives D(v, c) = 1 - sigmoid(logit_t) (= p(original));
    s(v) = D p_G / (a (1 - D) + p_G), a = (1 - p_mask) / p_mask (the run's
    mask_prob; a = 0 for electra_15, whose discriminator only sees masked
    positions, so there D itself is p_data); and
        log p(x_t | c) = log s(x_t) - log sum_{v in C} s(v),
    the optimal-discriminator estimate of p_data normalised over C. Costs
    one generator row and |C| discriminator rows per token.
Sentences longer than max_seq_length - 2 tokens are truncated (marked).
"""

import dataclasses
import itertools
import time

import numpy as np
import tensorflow as tf
from scipy.special import logsumexp

from inference.engine import Engine
from loading.scoring import load_run
from scoring import estimators
from scoring.config import TOKEN_BY_TOKEN_METHODS
from scoring.config import sentences_said
from training.progress import Progress
from util.errors import UserError

# Any method but the token-by-token ones is an objective's own one-pass PLL
# (Electric's, SCRIPT's: PretrainingModel.one_pass_pll).
CHUNK = 2048  # sentences per scoring round (bounds the row index arrays)
# Batch widths rounded up: few distinct shapes for a traced step. The
# engine's compiled step takes any width, so it runs the exact one (n-pass
# MLM PLL of 200 BLiMP sentences, Small, AMD EPYC: 9-15% faster).
WIDTH_MULTIPLE = 8
# The engine's batches run this many at a time, side by side on its
# streams (inference/openvino_engine.py CompiledFunction.map): a bound on
# the rows held at once.
IN_FLIGHT = 16


@dataclasses.dataclass
class SentenceScore:
  text: str
  token_ids: list  # the scored tokens (no [CLS]/[SEP])
  token_plls: np.ndarray  # log p(x_t | x_\t) per token, float64
  truncated: bool = False

  @property
  def pll(self):
    return float(np.sum(self.token_plls))


def resolve_method(objective, method, model):
  """The estimator for `model` (a pretraining objective's): `method`, or
  its objective's own when empty; `objective` names it in messages."""
  own = model.PLL_METHOD
  if not method:
    if not own:
      raise UserError(f"objective {objective} has no PLL estimator of its "
                      "main model; pass --method mlm to score with its "
                      "generator")
    method = own
  if method not in model.pll_methods():
    raise UserError(f"method {method} cannot score a model pretrained with "
                    f"objective {objective} (its own: {own or 'none'})")
  return method


def one_pass(method):
  return method not in TOKEN_BY_TOKEN_METHODS


def appendix_g_log_p(log_pg, disc_logits, valid, slot, log_a):
  """ELECTRA appendix G, normalised over the candidates: [N, C] log p_G
  and "replaced" logits of each candidate, valid [N, C], the original's
  slot [N] -> log p(x_t | c) [N]. log_a = log((1 - p_mask) / p_mask)."""
  log_pg = np.asarray(log_pg, np.float64)
  z = np.asarray(disc_logits, np.float64)
  log_d = -np.logaddexp(0.0, z)  # log(1 - sigmoid(z)): p(original)
  log_not_d = -np.logaddexp(0.0, -z)
  log_s = log_d + log_pg - np.logaddexp(log_a + log_not_d, log_pg)
  log_s = np.where(valid > 0, log_s, -np.inf)
  picked = np.take_along_axis(log_s, slot[:, None], axis=1)[:, 0]
  return picked - logsumexp(log_s, axis=1)


class Scorer:
  """PLLs of sentences under `model` (a pretraining objective)."""

  def __init__(self,
               model,
               pretrain_config,
               tokenizer,
               method="",
               batch_size=128,
               max_seq_length=0,
               top_k=100,
               inference_engine="auto",
               inference_precision="auto"):
    self.model = model
    self.pretrain_config = pretrain_config
    self.tokenizer = tokenizer
    self.method = resolve_method(pretrain_config.objective, method, model)
    self.batch_size = batch_size
    self.max_seq_length = max_seq_length or pretrain_config.max_seq_length
    positions = _max_positions(model)
    if self.max_seq_length > positions:
      raise UserError(f"max_seq_length {self.max_seq_length} exceeds the "
                      f"model's {positions} positions")
    ids = tokenizer.special_ids
    self.excluded_ids = np.array(sorted({ids["pad"], ids["cls"], ids["sep"],
                                         ids["mask"]}), np.int32)
    self.top_k = top_k
    if self.method == "electra":
      room = pretrain_config.vocab_size - len(self.excluded_ids)
      if not 0 < top_k <= room:
        raise UserError(f"top_k must be in [1, {room}] for this vocabulary, "
                        f"got {top_k}")
    # Appendix G's prior, read only by that estimator.
    self.log_a = (model.appendix_g_log_a() if self.method == "electra"
                  else None)
    self._steps = self._make_steps()
    # The engine's steps (inference/engine.py), compiled on first use.
    self.engine = Engine(inference_engine, inference_precision)
    self._engine_steps = {}
    self._on_engine = False  # this score() call's choice
    self.last_stats = {}
    self._progress = None  # a Progress while score() reports to a log
    self._planned = 0  # sentences in that score() call

  @classmethod
  def from_run(cls, path, vocab_file="", data_dir="", **kwargs):
    """A Scorer of the pretraining run at `path` (a model_dir or a
    checkpoint prefix); kwargs as the constructor's."""
    pretrain_config, model, tokenizer = load_run(
        path, vocab_file, data_dir, method=kwargs.get("method") or "")
    return cls(model, pretrain_config, tokenizer, **kwargs)

  # ---------------------------------------------------------------- API
  def score(self, sentences, progress=None, log=None):
    """One SentenceScore per sentence, in order; progress(done, total)
    after each chunk; with `log` (a stream), progress lines with rate and
    ETA there, counted in model passes (rows)."""
    sentences = [s if isinstance(s, str) else str(s) for s in sentences]
    start = time.perf_counter()
    tokens = self.tokenizer.tokenize_batch(sentences) if sentences else []
    limit = self.max_seq_length - 2
    out, rows = [], 0
    planned = self.passes([min(len(t), limit) for t in tokens])
    self._on_engine = self.engine.runs(planned)
    if log is not None:
      self._progress = Progress("scoring", planned, "passes", log)
      self._planned = len(sentences)
    try:
      for begin in range(0, len(sentences), CHUNK):
        chunk = [t[:limit] for t in tokens[begin:begin + CHUNK]]
        plls, n = (self._one_pass(chunk) if one_pass(self.method) else
                   getattr(self, f"_{self.method}")(chunk))
        rows += n
        for i, (ids, pll) in enumerate(zip(chunk, plls)):
          out.append(SentenceScore(sentences[begin + i], ids, pll,
                                   len(tokens[begin + i]) > limit))
        if progress:
          progress(len(out), len(sentences))
    finally:
      self._progress = None
    self.last_stats = dict(sentences=len(out), rows=rows,
                           tokens=sum(len(s.token_ids) for s in out),
                           truncated=sum(s.truncated for s in out),
                           seconds=time.perf_counter() - start)
    return out

  def sentence_plls(self, sentences, progress=None, log=None):
    return np.array([s.pll for s in self.score(sentences, progress, log)])

  def _tick(self, rows):
    p = self._progress
    p.done += rows
    per_sentence = p.total / max(self._planned, 1)  # passes
    p.update(p.done, f"~{p.rate() / per_sentence:,.1f} sentences/s")

  # --------------------------------------------------------------- cost
  def passes(self, token_counts):
    """Model passes (rows) that scoring sentences of these token counts
    takes: one per sentence (electric, script), one per token (mlm), one
    generator pass plus up to top_k + 1 discriminator passes per token
    (electra; fewer when the original is among the top k)."""
    counts = np.asarray(token_counts, np.int64)
    if one_pass(self.method):
      return int(np.count_nonzero(counts))
    per_token = 1 if self.method == "mlm" else self.top_k + 2
    return int(counts.sum()) * per_token

  def cost(self, sentences):
    """One line: what scoring `sentences` costs with this method, and the
    faster alternative when there is one."""
    limit = self.max_seq_length - 2
    # A blank line is kept (PLL 0) but costs no pass: not counted.
    sentences = [s for s in map(str, sentences) if s.strip()]
    sample = sentences[:1000]
    counts = [min(len(t), limit) for t in
              self.tokenizer.tokenize_batch(sample)] if sample else [0]
    mean = float(np.mean(counts))
    total = self.passes(counts) * len(sentences) / max(len(sample), 1)
    k = self.top_k
    if one_pass(self.method):
      line = (f"method {self.method}: 1 pass per sentence (every token at "
              f"once), {total:,.0f} passes for "
              f"{sentences_said(len(sentences))}")
    else:
      what = ("1 pass per token" if self.method == "mlm" else
              f"1 generator + up to {k + 1} discriminator passes per token")
      name = (self.method if self.method == "mlm" else
              f"electra (appendix G, top_k {k})")
      line = (f"method {name}: {what} = ~{total / max(len(sentences), 1):,.0f}"
              f" passes per sentence here ({mean:.1f} tokens on average), "
              f"~{total:,.0f} for {sentences_said(len(sentences))}")
    faster = []
    if self.method == "electra":
      if k > 10:
        faster.append("--top-k 10 (~12 passes per token)")
      if "mlm" in self.model.pll_methods():
        faster.append("--method mlm (1 pass per token: the generator alone)")
    elif self.method == "mlm" and one_pass(self.model.PLL_METHOD):
      faster.append(f"--method {self.model.PLL_METHOD} (1 pass per sentence)")
    if faster:
      line += "; faster: " + " or ".join(faster)
    return line

  def token_strings(self, ids):
    vocab = getattr(self.tokenizer, "vocab", None)
    if vocab is not None:
      return [vocab[i] for i in ids]
    tok = getattr(self.tokenizer, "_tok", None)  # SentencePiece
    if tok is not None and hasattr(tok, "id_to_string"):
      return [t.decode("utf-8", "replace") for t in
              tok.id_to_string(tf.constant(ids, tf.int32)).numpy()]
    return [str(i) for i in ids]

  # ----------------------------------------------------------- methods
  def _one_pass(self, chunk):
    packed, lengths = self._pack(chunk)
    sent = np.nonzero(lengths > 2)[0]
    plls = [np.zeros(len(t)) for t in chunk]
    for idx, out in self._run("one_pass", self._batches(packed, lengths,
                                                        sent)):
      for row, s in enumerate(sent[idx]):
        plls[s] = out[row, :lengths[s] - 2].astype(np.float64)
    return plls, len(sent)

  def _mlm(self, chunk):
    packed, lengths = self._pack(chunk)
    sent, pos = _token_rows(lengths)
    values = np.zeros(len(sent))
    mask_id = self.tokenizer.special_ids["mask"]
    for idx, out in self._run("mlm", self._batches(
        packed, lengths, sent, pos, np.full(len(sent), mask_id))):
      values[idx] = out[:, 0]
    return _per_sentence(chunk, sent, pos, values), len(sent)

  def _electra(self, chunk):
    packed, lengths = self._pack(chunk)
    sent, pos = _token_rows(lengths)
    width = self.top_k + 1
    cand = np.zeros((len(sent), width), np.int32)
    log_pg = np.zeros((len(sent), width), np.float32)
    valid = np.zeros((len(sent), width), np.float32)
    mask_id = self.tokenizer.special_ids["mask"]
    for idx, out in self._run("candidates", self._batches(
        packed, lengths, sent, pos, np.full(len(sent), mask_id))):
      cand[idx], log_pg[idx], valid[idx] = out
    item, slot = np.nonzero(valid)
    logits = np.zeros((len(sent), width), np.float32)
    for idx, out in self._run("disc", self._batches(
        packed, lengths, sent[item], pos[item], cand[item, slot])):
      logits[item[idx], slot[idx]] = out[:, 0]
    targets = packed[sent, pos]
    original = np.argmax((cand == targets[:, None]) & (valid > 0), axis=1)
    values = appendix_g_log_p(log_pg, logits, valid, original, self.log_a)
    return (_per_sentence(chunk, sent, pos, values),
            len(sent) + len(item))

  # ------------------------------------------------------------- rows
  def _pack(self, chunk):
    """[CLS] ids [SEP], padded: [N, W] ids and lengths [N] (with both)."""
    ids = self.tokenizer.special_ids
    lengths = np.array([len(t) + 2 for t in chunk], np.int64)
    width = min(_round_up(int(lengths.max(initial=2))), self.max_seq_length)
    packed = np.full((len(chunk), width), ids["pad"], np.int32)
    packed[:, 0] = ids["cls"]
    for i, t in enumerate(chunk):
      packed[i, 1:len(t) + 1] = t
      packed[i, len(t) + 1] = ids["sep"]
    return packed, lengths

  def _batches(self, packed, lengths, sent, pos=None, replace=None):
    """(row indices, features) per batch; rows sorted by length. A row is
    sentence `sent` with `replace` at `pos` (in masked_input_ids)."""
    order = np.argsort(lengths[sent], kind="stable")
    for begin in range(0, len(order), self.batch_size):
      idx = order[begin:begin + self.batch_size]
      s = sent[idx]
      width = min(_round_up(int(lengths[s].max()),
                            1 if self._on_engine else WIDTH_MULTIPLE),
                  packed.shape[1])
      ids = packed[s, :width]
      batch = {"input_ids": ids,
               "input_mask": (np.arange(width)[None] <
                              lengths[s][:, None]).astype(np.int32),
               "segment_ids": np.zeros_like(ids)}
      if pos is not None:
        rows, p = np.arange(len(idx)), pos[idx]
        masked = ids.copy()
        masked[rows, p] = replace[idx]
        batch.update(masked_input_ids=masked, positions=p[:, None],
                     targets=ids[rows, p][:, None])
      else:  # every scored token: positions 1 .. the longest's last
        tokens = int(lengths[s].max()) - 2
        batch.update(masked_input_ids=ids, positions=np.broadcast_to(
            np.arange(1, tokens + 1, dtype=np.int32), (len(idx), tokens)))
      yield idx, (batch if self._on_engine else
                  {k: tf.constant(v) for k, v in batch.items()})

  def _run(self, name, batches):
    """(row indices, NumPy outputs of step `name`) per (indices, features)
    of `batches`, in order: the engine's IN_FLIGHT batches at a time side
    by side on its streams (EngineFunction.map), TensorFlow's one by one."""
    step = self._step(name)
    batches = iter(batches)
    while True:
      group = list(itertools.islice(
          batches, IN_FLIGHT if self._on_engine else 1))
      if not group:
        return
      outs = (step.map(b for _, b in group) if self._on_engine else
              [step(group[0][1])])
      for (idx, _), out in zip(group, outs):
        yield idx, out
        if self._progress is not None:
          self._tick(len(idx))

  def _step(self, name):
    """fn(batch) -> NumPy outputs of step `name`: TensorFlow's traced
    step, or the engine's compilation of the same function."""
    if not self._on_engine:
      return lambda batch: tf.nest.map_structure(
          np.asarray, self._steps[name](batch))
    if name not in self._engine_steps:
      self._engine_steps[name] = self.engine.wrap(
          self._steps[name].python_function, dynamic="all",
          variables=self.model.variables, throughput=True)
    return self._engine_steps[name]

  def _make_steps(self):
    model, k = self.model, self.top_k
    excluded = tf.constant(self.excluded_ids)
    fns = {
        "one_pass": lambda b: estimators.one_pass(model, b,
                                                  b["positions"]),
        "mlm": lambda b: estimators.masked_lm(model, b, b["positions"],
                                              b["targets"]),
        "candidates": lambda b: estimators.generator_candidates(
            model, b, b["positions"], b["targets"], k, excluded),
        "disc": lambda b: estimators.discriminator_logits(
            model, b, b["positions"]),
    }
    return {name: tf.function(fn, reduce_retracing=True)
            for name, fn in fns.items()}


def _round_up(n, multiple=WIDTH_MULTIPLE):
  return -(-n // multiple) * multiple


def _token_rows(lengths):
  """(sentence, position) of every scored token: positions 1 .. len - 2."""
  counts = lengths - 2
  sent = np.repeat(np.arange(len(lengths)), counts)
  starts = np.cumsum(counts) - counts
  return sent, np.arange(len(sent)) - starts[sent] + 1


def _per_sentence(chunk, sent, pos, values):
  """Row values -> one float64 array per sentence, in token order."""
  counts = np.array([len(t) for t in chunk], np.int64)
  starts = np.concatenate([[0], np.cumsum(counts)])
  flat = np.zeros(starts[-1])
  flat[starts[sent] + pos - 1] = values
  return [flat[starts[i]:starts[i + 1]] for i in range(len(chunk))]


def _max_positions(model):
  """The positions of the network the model scores with (its main one)."""
  encoder, _ = model.networks()[model.MAIN_NETWORK]
  return encoder.config.max_position_embeddings
