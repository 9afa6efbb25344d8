"""Records reference outputs of the original ELECTRA release (TF1 code).

Run once, by hand, outside CI (CI cannot fetch the original):

  python tests/reference/record_original.py /path/to/extracted/electra \
      [--items 1,2,3,4,5,6,7,8,9,10,11] [--shared /work/shared/data]

under a Python whose TensorFlow has `tensorflow.compat.v1`, plus tf-slim
(for `tensorflow.contrib.layers`) and tf-keras (for `tf.compat.v1.layers`).
It imports the original's own modules from the given path; the only shims
are module aliases so that its imports resolve on TF 2.x (see shim). No
math of the original is restated here: each fixture is what its functions
returned. Files are written beside this script; README.md there describes
them.
"""

import argparse
import collections
import json
import os
import random
import sys
import tempfile
import types
import unicodedata

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SEQ_LEN = 128
MASK_PROB = 0.15


def shim(original):
  """Lets the original's imports resolve on TF 2.x: tf.contrib is gone
  (its layers.layer_norm lives on in tf-slim, same code),
  tf.compat.v1.layers needs Keras 2 (tf-keras), and tf.estimator is gone
  (TF 2.16): its names that the original's model_fn and hooks use are
  stand-ins that only hold what they are given (no Estimator runs)."""
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  import tf_slim  # pylint: disable=g-import-not-at-top
  contrib = types.ModuleType("tensorflow.contrib")
  contrib.layers = tf_slim.layers
  sys.modules["tensorflow.contrib"] = contrib
  sys.modules["tensorflow.contrib.layers"] = tf_slim.layers
  sys.path.insert(0, original)
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  tf.disable_eager_execution()
  if not hasattr(tf, "estimator"):
    tf.estimator = types.SimpleNamespace(
        SessionRunHook=tf.train.SessionRunHook,
        SessionRunArgs=tf.train.SessionRunArgs,
        ModeKeys=types.SimpleNamespace(TRAIN="train", EVAL="eval",
                                       PREDICT="infer"),
        tpu=types.SimpleNamespace(
            TPUEstimatorSpec=lambda **kw: types.SimpleNamespace(**kw)))
  return tf


def _dump_json(name, obj):
  """One top-level key per line, and one line per element of a list of
  records: compact, yet a diff shows which record changed."""
  def dumps(value):
    return json.dumps(value, ensure_ascii=False, sort_keys=True,
                      separators=(",", ":"))
  lines = []
  for key in sorted(obj):
    value = obj[key]
    if isinstance(value, list) and value and isinstance(value[0], dict):
      body = ",\n  ".join(dumps(v) for v in value)
      lines.append(f"{dumps(key)}:[\n  {body}]")
    else:
      lines.append(f"{dumps(key)}:{dumps(value)}")
  path = os.path.join(HERE, name)
  with open(path, "w", encoding="utf-8") as f:
    f.write("{\n" + ",\n".join(lines) + "\n}\n")
  json.loads(open(path, encoding="utf-8").read())  # still valid JSON
  print("wrote", path, os.path.getsize(path), "bytes")


def _dump_npz(name, **arrays):
  path = os.path.join(HERE, name)
  np.savez_compressed(path, **arrays)
  print("wrote", path, os.path.getsize(path), "bytes")


def _se(x):
  x = np.asarray(x, np.float64)
  return float(x.std(ddof=1) / np.sqrt(len(x)))


# ------------------------------------------------------------ item 1
def _pretraining_rows(shared, tokenization, build_pretraining_dataset):
  """64 rows made by the original's ExampleBuilder from real wiki text,
  plus short rows, all [CLS] ... [SEP] (... [SEP]) and zero padding."""
  vocab_file = os.path.join(shared, "vocab", "bert-base-uncased-vocab.txt")
  tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
  random.seed(0)
  builder = build_pretraining_dataset.ExampleBuilder(tokenizer, SEQ_LEN)
  path = os.path.join(shared, "pretrain_corpus", "enwiki_2015_wikiextractor",
                      "AA", "wiki_00")
  rows = []
  with open(path, encoding="utf-8") as f:
    for line in f:
      if line.startswith(("<doc", "</doc")):
        line = ""  # documents end at blank lines, as the original expects
      example = builder.add_line(line)
      if example is not None:
        feats = example.features.feature
        rows.append([list(feats[k].int64_list.value) for k in
                     ("input_ids", "input_mask", "segment_ids")])
        if len(rows) == 56:
          break
  # Short rows: [CLS] k pieces [SEP], k from 1 to 90.
  vocab = tokenizer.vocab
  text = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(
      "Anarchism is a political philosophy that advocates stateless "
      "societies often defined as self-governed voluntary institutions, but "
      "that several authors have defined as more specific institutions "
      "based on non-hierarchical free associations. Anarchism holds the "
      "state to be undesirable, unnecessary, or harmful. While anti-statism "
      "is central, anarchism entails opposing authority or hierarchical "
      "organisation in the conduct of human relations."))
  for k in (1, 2, 3, 6, 10, 25, 50, 90):
    ids = [vocab["[CLS]"]] + text[:k] + [vocab["[SEP]"]]
    n = len(ids)
    rows.append([ids + [0] * (SEQ_LEN - n), [1] * n + [0] * (SEQ_LEN - n),
                 [0] * SEQ_LEN])
  arr = np.asarray(rows, np.int32)  # [64, 3, L]
  return arr[:, 0], arr[:, 1], arr[:, 2], vocab_file, vocab


def record_masking(tf, shared, draws):
  import build_pretraining_dataset  # pylint: disable=g-import-not-at-top
  import configure_pretraining  # pylint: disable=g-import-not-at-top
  from model import tokenization  # pylint: disable=g-import-not-at-top
  from pretrain import pretrain_data  # pylint: disable=g-import-not-at-top
  from pretrain import pretrain_helpers  # pylint: disable=g-import-not-at-top
  ids, mask, segs, vocab_file, vocab = _pretraining_rows(
      shared, tokenization, build_pretraining_dataset)
  config = configure_pretraining.PretrainingConfig(
      "fixture", tempfile.mkdtemp(), vocab_file=vocab_file,
      max_seq_length=SEQ_LEN, mask_prob=MASK_PROB)
  n_slots = config.max_predictions_per_seq

  def run_mask(ids, mask, segs, n_draws, seed):
    graph = tf.Graph()
    with graph.as_default():
      tf.set_random_seed(seed)
      inputs = pretrain_data.Inputs(
          input_ids=tf.constant(ids), input_mask=tf.constant(mask),
          segment_ids=tf.constant(segs), masked_lm_positions=None,
          masked_lm_ids=None, masked_lm_weights=None)
      out = pretrain_helpers.mask(config, inputs, config.mask_prob)
      fetch = [out.input_ids, out.masked_lm_positions, out.masked_lm_ids,
               out.masked_lm_weights]
      with tf.Session(graph=graph) as sess:
        return [sess.run(fetch) for _ in range(n_draws)]

  mask_id = vocab["[MASK]"]
  cand = ((ids != vocab["[CLS]"]) & (ids != vocab["[SEP]"]) &
          (ids != mask_id) & (mask == 1))
  num_real = mask.sum(1)
  full = num_real == SEQ_LEN
  results = run_mask(ids, mask, segs, draws, seed=1)
  per_draw = collections.defaultdict(list)
  row_distinct = np.zeros((draws, len(ids)))
  num_to_predict = None
  for d, (out_ids, pos, lm_ids, weights) in enumerate(results):
    k = weights.sum(1).astype(int)
    if num_to_predict is None:
      num_to_predict = k
    assert (k == num_to_predict).all()  # the count is not random
    distinct = np.zeros(len(ids))
    repeats = slots_masked = distinct_masked = 0
    for r in range(len(ids)):
      chosen = pos[r, :k[r]]
      assert cand[r, chosen].all()
      assert (lm_ids[r, :k[r]] == ids[r, chosen]).all()
      uniq = set(chosen.tolist())
      distinct[r] = len(uniq)
      repeats += k[r] - len(uniq)
      slots_masked += int((out_ids[r, chosen] == mask_id).sum())
      distinct_masked += sum(out_ids[r, p] == mask_id for p in uniq)
      # Everything not chosen is left alone.
      others = np.setdiff1d(np.arange(SEQ_LEN), chosen)
      assert (out_ids[r, others] == ids[r, others]).all()
    row_distinct[d] = distinct
    per_draw["distinct_fraction_of_real_tokens"].append(
        distinct.sum() / num_real.sum())
    per_draw["mean_row_distinct_fraction_of_real_tokens"].append(
        float((distinct / num_real).mean()))
    per_draw["distinct_per_full_row"].append(float(distinct[full].mean()))
    per_draw["repeated_slot_fraction"].append(repeats / k.sum())
    per_draw["slots_at_mask_fraction"].append(slots_masked / k.sum())
    per_draw["distinct_positions_at_mask_fraction"].append(
        distinct_masked / distinct.sum())
  stats = {name: {"mean": float(np.mean(v)), "se": _se(v)}
           for name, v in per_draw.items()}

  # A row with no maskable token ([CLS] [SEP]): its sampling distribution
  # is 0/0. The positions alone can be fetched; the whole op (which
  # gathers at them) is tried too.
  empty = np.zeros((1, SEQ_LEN), np.int32)
  empty[0, :2] = [vocab["[CLS]"], vocab["[SEP]"]]
  graph = tf.Graph()
  with graph.as_default():
    inputs = pretrain_data.Inputs(
        input_ids=tf.constant(empty),
        input_mask=tf.constant((empty != 0).astype(np.int32)),
        segment_ids=tf.constant(0 * empty), masked_lm_positions=None,
        masked_lm_ids=None, masked_lm_weights=None)
    out = pretrain_helpers.mask(config, inputs, config.mask_prob)
    with tf.Session(graph=graph) as sess:
      no_candidates = {"positions": sess.run(
          out.masked_lm_positions)[0].tolist()}
      try:
        sess.run(out.input_ids)
        no_candidates["full_op"] = "ran"
      except tf.errors.OpError as e:
        no_candidates["full_op"] = f"{type(e).__name__}: " + next(
            (l for l in str(e).splitlines() if "indices" in l),
            str(e).splitlines()[0])[:200]
  first = results[0]
  _dump_npz("masking_rows.npz", input_ids=ids, input_mask=mask,
            segment_ids=segs, num_to_predict=num_to_predict.astype(np.int32),
            num_candidates=cand.sum(1).astype(np.int32),
            row_mean_distinct=row_distinct.mean(0),
            row_se_distinct=row_distinct.std(0, ddof=1) / np.sqrt(draws),
            draw0_input_ids=first[0], draw0_positions=first[1],
            draw0_masked_lm_ids=first[2], draw0_weights=first[3])
  _dump_json("masking.json", {
      "config": {"max_seq_length": SEQ_LEN, "mask_prob": MASK_PROB,
                 "max_predictions_per_seq": n_slots, "draws": draws,
                 "rows": int(len(ids)), "full_rows": int(full.sum()),
                 "vocab": "bert-base-uncased-vocab.txt"},
      "stats": stats, "no_candidates_row": no_candidates})
  record_scatter_update(tf, pretrain_helpers)


def record_scatter_update(tf, pretrain_helpers):
  """The original's scatter_update on repeated positions: int ids are
  floordiv-averaged, floats averaged, position 0 ignored."""
  seq = np.arange(100, 116, dtype=np.int32).reshape(2, 8)
  positions = np.array([[3, 3, 5, 0], [2, 6, 6, 6]], np.int32)
  int_updates = np.array([[7, 10, 20, 99], [1, 2, 3, 5]], np.int32)
  float_seq = seq.astype(np.float32)
  float_updates = int_updates.astype(np.float32)
  graph = tf.Graph()
  with graph.as_default():
    out_i, mask_i = pretrain_helpers.scatter_update(
        tf.constant(seq), tf.constant(int_updates), tf.constant(positions))
    out_f, mask_f = pretrain_helpers.scatter_update(
        tf.constant(float_seq), tf.constant(float_updates),
        tf.constant(positions))
    with tf.Session(graph=graph) as sess:
      oi, mi, of, mf = sess.run([out_i, mask_i, out_f, mask_f])
  _dump_json("scatter_update.json", {
      "sequence": seq.tolist(), "positions": positions.tolist(),
      "updates": int_updates.tolist(),
      "int32": {"output": oi.tolist(), "updated_mask": mi.tolist()},
      "float32": {"output": of.tolist(), "updated_mask": mf.tolist()}})


# ------------------------------------------------------------ finetuning
def _finetune_config(shared, task, **kwargs):
  """The original's FinetuningConfig for one task, its data dir laid out
  as it expects (finetuning_data/<task>/, vocab.txt) with symlinks."""
  import configure_finetuning  # pylint: disable=g-import-not-at-top
  data_dir = tempfile.mkdtemp()
  os.symlink(os.path.join(shared, "vocab", "bert-base-uncased-vocab.txt"),
             os.path.join(data_dir, "vocab.txt"))
  raw = os.path.join(data_dir, "finetuning_data", task)
  os.makedirs(raw)
  sources = {"sts": ("glue/STS-B", {"dev.tsv": "dev.tsv"}),
             "chunk": ("chunk", {"train.txt": "train.txt",
                                 "test.txt": "test.txt"}),
             "squadv1": ("squad", {"dev.json": "dev-v1.1.json"})}
  folder, files = sources[task]
  for ours, theirs in files.items():
    os.symlink(os.path.join(shared, folder, theirs), os.path.join(raw, ours))
  config = configure_finetuning.FinetuningConfig(
      "fixture", data_dir, task_names=[task], **kwargs)
  os.makedirs(config.preprocessed_data_dir, exist_ok=True)
  return config


def record_stsb(tf, shared):
  del tf
  from finetune import task_builder  # pylint: disable=g-import-not-at-top
  config = _finetune_config(shared, "sts")
  task, = task_builder.get_tasks(config)
  examples = task.get_examples("dev")[:50]
  rows = []
  for ex in examples:
    feats = task.featurize(ex, is_training=True)
    rows.append({"raw_label": ex.label, "target": feats["sts_targets"]})
  _dump_json("stsb_labels.json", {
      "source": "glue/STS-B/dev.tsv, first 50 examples, file order",
      "examples": rows})


def record_default_lengths(tf, shared):
  del tf, shared
  import configure_finetuning  # pylint: disable=g-import-not-at-top
  out = {}
  for task in ("cola", "mrpc", "mnli", "sst", "rte", "qnli", "qqp", "sts",
               "squad", "squadv1", "newsqa", "naturalqs", "triviaqa",
               "searchqa", "chunk"):
    c = configure_finetuning.FinetuningConfig("fixture", tempfile.mkdtemp(),
                                              task_names=[task])
    out[task] = {"max_seq_length": c.max_seq_length,
                 "num_train_epochs": c.num_train_epochs}
  multi = configure_finetuning.FinetuningConfig(
      "fixture", tempfile.mkdtemp(), task_names=["chunk", "squad"])
  _dump_json("task_defaults.json", {
      "single_task": out,
      "multi_task_chunk_squad": {"max_seq_length": multi.max_seq_length}})


def record_chunking(tf, shared):
  del tf
  from finetune import task_builder  # pylint: disable=g-import-not-at-top
  config = _finetune_config(shared, "chunk")
  task, = task_builder.get_tasks(config)
  examples = task.get_examples("test")[:20]
  rows = []
  for ex in examples:
    feats = task.featurize(ex, is_training=False)
    n = int(sum(feats["input_mask"]))
    rows.append({
        "words": list(ex.words),
        "input_ids": feats["input_ids"][:n],
        "segment_ids": feats["segment_ids"][:n],
        "input_mask_length": n,
        "labeled_positions": [p for p, m in zip(feats["chunk_labeled_positions"],
                                                feats["chunk_labels_mask"])
                              if m],
        "labels": feats["chunk_labels"][:int(sum(feats["chunk_labels_mask"]))],
    })
  label_mapping = task._get_label_mapping()  # pylint: disable=protected-access
  _dump_json("chunk_features.json", {
      "max_seq_length": config.max_seq_length,
      "label_mapping": label_mapping,
      "source": "chunk/test.txt, first 20 sentences",
      "examples": rows})


def record_squad_answer_mask(tf, shared):
  from finetune import task_builder  # pylint: disable=g-import-not-at-top
  out = []
  for max_len in (512, 128):
    config = _finetune_config(shared, "squadv1", max_seq_length=max_len)
    task, = task_builder.get_tasks(config)
    examples = [task.get_examples("dev")[i] for i in (0, 100, 1000, 5000)]
    feats = []
    for ex in examples:
      feats += task.featurize(ex, is_training=False)
    allowed = _answer_positions(tf, task, config, feats)
    for f, ok in zip(feats, allowed):
      n = int(sum(f["input_mask"]))
      out.append({
          "max_seq_length": max_len,
          "question": next(e.question_text for e in examples
                           if e.eid == f["squadv1_eid"] // 1000),
          "input_ids": f["input_ids"][:n],
          "segment_ids": f["segment_ids"][:n],
          "input_mask_length": n,
          "allowed_answer_positions": ok})
  _dump_json("squad_answer_mask.json", {
      "source": "squad/dev-v1.1.json, questions 0, 100, 1000, 5000; max_query_length "
                "64, doc_stride 128",
      "features": out})


def _answer_positions(tf, task, config, feats):
  """Positions the original's QA head lets an answer start at: its
  get_prediction_module on zero hidden states (so every logit is 0 before
  the answer mask's -1000 is added)."""
  seq = config.max_seq_length
  graph = tf.Graph()
  with graph.as_default():
    b = len(feats)
    features = {
        "input_mask": tf.constant([f["input_mask"] for f in feats]),
        "segment_ids": tf.constant([f["segment_ids"] for f in feats]),
        "squadv1_start_positions": tf.zeros([b], tf.int32),
        "squadv1_end_positions": tf.zeros([b], tf.int32),
        "squadv1_is_impossible": tf.zeros([b], tf.bool),
        "squadv1_eid": tf.zeros([b], tf.int32)}
    hidden = tf.zeros([b, seq, 8])
    bert = types.SimpleNamespace(get_sequence_output=lambda: hidden)
    _, outputs = task.get_prediction_module(bert, features, True, 0.0)
    with tf.Session(graph=graph) as sess:
      sess.run(tf.global_variables_initializer())
      start_logits = sess.run(outputs["start_logits"])
  return [np.flatnonzero(row > -500).tolist() for row in start_logits]


def record_squad_head(tf, shared):
  """The original's QA head (get_prediction_module, joint_prediction and
  answerable_classifier on, as its defaults) on fixed hidden states and
  weights: per-row losses in training (gold starts/ends, is_impossible
  labels both ways) and the inference beam."""
  from finetune import task_builder  # pylint: disable=g-import-not-at-top
  config = _finetune_config(shared, "squadv1", max_seq_length=64,
                            beam_size=5)
  task, = task_builder.get_tasks(config)
  examples = [task.get_examples("dev")[i] for i in (0, 100, 1000)]
  feats = []
  for ex in examples:
    feats += task.featurize(ex, is_training=False)
  feats = feats[:4]
  b, seq, hidden_size = len(feats), config.max_seq_length, 8
  rng = np.random.default_rng(10)
  hidden = rng.standard_normal((b, seq, hidden_size)).astype(np.float32)
  allowed = [[i for i in range(seq) if f["segment_ids"][i] and
              f["input_mask"][i]] for f in feats]
  starts = np.array([a[1] for a in allowed], np.int32)
  ends = np.array([a[3] for a in allowed], np.int32)
  starts[0] = ends[0] = 0  # an answer outside the window
  impossible = np.array([False, True, False, True][:b])
  results, values = {}, {}
  for mode in ("train", "infer"):
    graph = tf.Graph()
    with graph.as_default():
      features = {
          "input_mask": tf.constant([f["input_mask"] for f in feats]),
          "segment_ids": tf.constant([f["segment_ids"] for f in feats]),
          "squadv1_start_positions": tf.constant(starts),
          "squadv1_end_positions": tf.constant(ends),
          "squadv1_is_impossible": tf.constant(impossible),
          "squadv1_eid": tf.zeros([b], tf.int32)}
      h = tf.constant(hidden)
      bert = types.SimpleNamespace(get_sequence_output=lambda: h)
      losses, outputs = task.get_prediction_module(
          bert, features, mode == "train", 0.0)
      with tf.Session(graph=graph) as sess:
        for v in tf.global_variables():
          if v.op.name not in values:
            shape = v.shape.as_list()
            scale = 1 / np.sqrt(shape[0]) if len(shape) == 2 else 0.2
            values[v.op.name] = (scale * rng.standard_normal(shape)).astype(
                np.float32)
          v.load(values[v.op.name], sess)
        if mode == "train":
          results["loss"] = sess.run(losses)
        else:
          got = sess.run({k: outputs[k] for k in (
              "start_top_log_probs", "start_top_index", "end_top_log_probs",
              "end_top_index", "answerable_logit")})
          results.update({"infer:" + k: v for k, v in got.items()})
  _dump_npz("squad_head.npz", hidden=hidden,
            input_mask=np.array([f["input_mask"] for f in feats], np.int32),
            segment_ids=np.array([f["segment_ids"] for f in feats],
                                 np.int32),
            start_positions=starts, end_positions=ends,
            is_impossible=impossible, beam_size=np.array(config.beam_size),
            answerable_weight=np.array(config.answerable_weight),
            **results, **{"weight:" + k: v for k, v in values.items()})


# ------------------------------------------------------------ item 3
def _sentences(shared):
  """(source, text) of every sentence: RTE/SST-2 dev+train text columns,
  SQuAD 1.1 dev contexts."""
  import csv  # pylint: disable=g-import-not-at-top
  out = []
  for task, cols in (("RTE", ("sentence1", "sentence2")),
                     ("SST-2", ("sentence",))):
    for split in ("dev", "train"):
      path = os.path.join(shared, "glue", task, split + ".tsv")
      with open(path, encoding="utf-8") as f:
        reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        for row in reader:
          for c in cols:
            out.append((f"{task}/{split}/{c}", row[c]))
  with open(os.path.join(shared, "squad", "dev-v1.1.json"),
            encoding="utf-8") as f:
    data = json.load(f)["data"]
  for article in data:
    for p in article["paragraphs"]:
      out.append(("squad1.1/dev/context", p["context"]))
  return out


def _unusual_char(c):
  return ord(c) > 127 or (unicodedata.category(c).startswith("C") and
                          c not in "\t\n\r")


def _snippets(text):
  """The space-separated words of `text` holding an unusual character, each
  with one word either side (overlaps merged). The original tokenizes each
  space-separated word on its own, so a snippet gets the same pieces as in
  the full text; only ASCII space is cut at, since the original drops some
  characters Python's split() would cut at (e.g. \x0c)."""
  words = text.split(" ")
  hits = [i for i, w in enumerate(words) if any(map(_unusual_char, w))]
  spans = []
  for i in hits:
    lo, hi = max(0, i - 1), min(len(words), i + 2)
    if spans and lo <= spans[-1][1]:
      spans[-1][1] = hi
    else:
      spans.append([lo, hi])
  return [" ".join(words[lo:hi]) for lo, hi in spans]


def record_tokenization(tf, shared):
  del tf
  from model import tokenization  # pylint: disable=g-import-not-at-top
  vocab_file = os.path.join(shared, "vocab", "bert-base-uncased-vocab.txt")
  tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
  sentences = _sentences(shared)
  seen_text, seen, plain = set(), {}, []
  n_unusual = 0
  for source, text in sentences:
    if text in seen_text:
      continue
    seen_text.add(text)
    snippets = _snippets(text)
    n_unusual += bool(snippets)
    for snippet in snippets:
      seen.setdefault(snippet, source)
    if not snippets and not source.startswith("squad"):
      plain.append((source, text))
  plain = random.Random(0).sample(plain, 50)
  rows = [{"source": s, "text": t, "unusual": True,
           "pieces": tokenizer.tokenize(t)} for t, s in seen.items()]
  rows += [{"source": s, "text": t, "unusual": False,
            "pieces": tokenizer.tokenize(t)} for s, t in plain]
  # Lines for the cases the issue names and other corners (whitespace and
  # control characters, compatibility forms, long words), in case the data
  # lacks one.
  for text in ("2\u00bd km\u00b2 \u2026 Stra\u00dfe \u039f\u0394\u039f\u03a3 "
               "\u03bf\u03b4\u03bf\u03c2 \u03a3\u039f\u03a3", "don\u00e2\x80\x99t",
               "caf\u00e9 na\u00efve \u00c5ngstr\u00f6m \u0130stanbul",
               "a\u2028b\u2029c\u00a0d\u3000e\x0bf\x1cg\x85h\ufeffi\u200bj\x00k"
               "\ufffdl\tm\nn",
               "\ufb01ne \u2460 \uff21\uff22 \u2163 x\u0301y \u1e9e \u00b5 \u212b",
               "\u4e2d\u6587 \u00bfqu\u00e9? \u00ab\u00bb \u201chi\u201d",
               "x" * 150 + " " + "y" * 201 + " " + "\u00e9" * 120):
    rows.append({"source": "synthetic", "text": text, "unusual": True,
                 "pieces": tokenizer.tokenize(text)})
  _dump_json("tokenization.json", {
      "vocab": "bert-base-uncased-vocab.txt", "do_lower_case": True,
      "sentences_scanned": len(sentences), "distinct_scanned": len(seen_text),
      "distinct_with_unusual_chars": n_unusual, "rows": rows})


# ------------------------------------------------------------ item 5
def record_learning_rate(tf, shared):
  del shared
  from model import optimization  # pylint: disable=g-import-not-at-top
  out = {}
  for power in (1.0, 0.5):
    graph = tf.Graph()
    with graph.as_default():
      captured = {}
      base = optimization.AdamWeightDecayOptimizer.__init__

      def capture(self, learning_rate, *args, **kwargs):
        captured["lr"] = learning_rate  # the schedule create_optimizer built
        base(self, learning_rate, *args, **kwargs)
      optimization.AdamWeightDecayOptimizer.__init__ = capture
      try:
        w = tf.get_variable("w", initializer=tf.constant(1.0))
        optimization.create_optimizer(
            tf.square(w), learning_rate=1e-3, num_train_steps=1000,
            warmup_steps=100, lr_decay_power=power)
      finally:
        optimization.AdamWeightDecayOptimizer.__init__ = base
      step = tf.train.get_or_create_global_step()
      value = tf.placeholder(tf.int64, [])
      assign = step.assign(value)
      with tf.Session(graph=graph) as sess:
        sess.run(tf.global_variables_initializer())
        lrs = []
        for s in range(1001):
          sess.run(assign, {value: s})
          lrs.append(float(sess.run(captured["lr"])))
    out[str(power)] = lrs
  _dump_json("learning_rate.json", {
      "learning_rate": 1e-3, "warmup_steps": 100, "num_train_steps": 1000,
      "steps": "0..1000", "lr_by_power": out})


# ------------------------------------------------------------ item 6
TINY = dict(vocab_size=40, hidden_size=64, num_hidden_layers=1,
            num_attention_heads=1, intermediate_size=128,
            max_position_embeddings=32, type_vocab_size=2,
            hidden_act="gelu", hidden_dropout_prob=0.1,
            attention_probs_dropout_prob=0.1, initializer_range=0.02)
TINY_EMBEDDING = 32


def record_gelu_and_logits(tf, shared):
  del shared
  from model import modeling  # pylint: disable=g-import-not-at-top
  import run_pretraining  # pylint: disable=g-import-not-at-top
  grid = np.concatenate([np.linspace(-8, 8, 321), [-30.0, -12.0, 12.0, 30.0]]
                        ).astype(np.float32)
  rng = np.random.default_rng(37)
  ids = rng.integers(5, TINY["vocab_size"], size=(2, 16)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, 11:] = 0
  ids[1, 11:] = 0
  segs = np.zeros_like(ids)
  segs[:, 9:] = 1
  segs[1, 11:] = 0
  graph = tf.Graph()
  with graph.as_default():
    gelu = modeling.gelu(tf.constant(grid))
    bert_config = modeling.BertConfig.from_dict(TINY)
    model = modeling.BertModel(
        bert_config=bert_config, is_training=False,
        input_ids=tf.constant(ids), input_mask=tf.constant(mask),
        token_type_ids=tf.constant(segs), use_one_hot_embeddings=False,
        scope="electra", embedding_size=TINY_EMBEDDING)
    fake_self = types.SimpleNamespace(
        _bert_config=bert_config,
        _config=types.SimpleNamespace(electric_objective=False))
    inputs = types.SimpleNamespace(input_mask=tf.constant(mask))
    disc = run_pretraining.PretrainingModel._get_discriminator_output(  # pylint: disable=protected-access
        fake_self, inputs, model, tf.zeros_like(ids))
    logits_t = disc.probs.op.inputs[0]  # probs = sigmoid(logits)
    variables = tf.global_variables()
    with tf.Session(graph=graph) as sess:
      sess.run(tf.global_variables_initializer())
      # Weights of order 0.1-1 stored as float16 (small fixture); the model
      # runs on exactly those values, cast to float32.
      values = {}
      for v in variables:
        shape = v.shape.as_list()
        if v.op.name.endswith("gamma"):
          val = 1.0 + 0.2 * rng.standard_normal(shape)
        elif v.op.name.endswith("kernel"):
          val = rng.standard_normal(shape) / np.sqrt(shape[0])
        elif "embeddings" in v.op.name and not v.op.name.endswith("beta"):
          val = 0.5 * rng.standard_normal(shape)
        else:
          val = 0.2 * rng.standard_normal(shape)
        values[v.op.name] = val.astype(np.float16)
        v.load(values[v.op.name].astype(np.float32), sess)
      gelu_out, logits = sess.run([gelu, logits_t])
  _dump_json("gelu.json", {"x": grid.tolist(),
                           "gelu": gelu_out.astype(np.float64).tolist()})
  _dump_npz("tiny_discriminator.npz", input_ids=ids, input_mask=mask,
            segment_ids=segs, logits=logits,
            config=np.array(json.dumps(dict(TINY,
                                            embedding_size=TINY_EMBEDDING))),
            **{"weight:" + k: v for k, v in values.items()})


# ------------------------------------------------------------ item 7
# Variables named as the original names them: the layer-wise keys of its
# _get_layer_lrs and the no-decay patterns both read these names.
OPTIMIZER_VARIABLES = (
    ("electra/embeddings/word_embeddings", [6, 4]),
    ("electra/embeddings/LayerNorm/gamma", [4]),
    ("electra/embeddings_project/kernel", [4, 3]),
    ("electra/encoder/layer_0/attention/self/query/kernel", [3, 3]),
    ("electra/encoder/layer_0/attention/self/query/bias", [3]),
    ("electra/encoder/layer_1/output/dense/kernel", [3, 3]),
    ("electra/encoder/layer_1/output/LayerNorm/beta", [3]),
    ("task_specific/classifier/kernel", [3, 2]),
    ("task_specific/classifier/bias", [2]),
)
OPTIMIZER_RUN = dict(learning_rate=1e-3, num_train_steps=100,
                     warmup_steps=10, weight_decay_rate=0.01, steps=40)


def _optimizer_run(tf, optimization, initial, grads, layerwise):
  """The original's create_optimizer on loss = sum(var * G_t): its own
  gradients are G_t, then its clipping, schedule and update. Returns the
  variables after each step and the learning rate(s) each step used (the
  schedule tensor fetched in the same run as the update)."""
  graph = tf.Graph()
  with graph.as_default():
    captured = {}
    base = optimization.AdamWeightDecayOptimizer.__init__

    def capture(self, learning_rate, *args, **kwargs):
      captured["lr"] = learning_rate
      base(self, learning_rate, *args, **kwargs)
    optimization.AdamWeightDecayOptimizer.__init__ = capture
    try:
      variables, feeds, loss = [], [], 0.0
      for (name, shape), value in zip(OPTIMIZER_VARIABLES, initial):
        v = tf.get_variable(name, initializer=tf.constant(value))
        g = tf.placeholder(tf.float32, shape)
        variables.append(v)
        feeds.append(g)
        loss += tf.reduce_sum(v * g)
      run = OPTIMIZER_RUN
      train_op = optimization.create_optimizer(
          loss, learning_rate=run["learning_rate"],
          num_train_steps=run["num_train_steps"],
          weight_decay_rate=run["weight_decay_rate"],
          warmup_steps=run["warmup_steps"],
          layerwise_lr_decay_power=0.8 if layerwise else -1,
          n_transformer_layers=2 if layerwise else None)
    finally:
      optimization.AdamWeightDecayOptimizer.__init__ = base
    lr = captured["lr"]
    lr_keys = sorted(lr) if isinstance(lr, dict) else ["all"]
    lr_fetch = [lr[k] for k in lr_keys] if isinstance(lr, dict) else [lr]
    with tf.Session(graph=graph) as sess:
      sess.run(tf.global_variables_initializer())
      values, lrs = [], []
      for step_grads in grads:
        _, used = sess.run([train_op, lr_fetch],
                           dict(zip(feeds, step_grads)))
        lrs.append([float(x) for x in used])
        values.append(sess.run(variables))
  return values, lr_keys, lrs


def record_optimizer(tf, shared):
  del shared
  from model import optimization  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(50)
  initial = [rng.standard_normal(shape).astype(np.float32)
             for _, shape in OPTIMIZER_VARIABLES]
  # Global norms from ~0.2 to ~5: some steps clip (norm > 1), some not.
  scales = np.exp(rng.uniform(np.log(0.03), np.log(0.6),
                              OPTIMIZER_RUN["steps"]))
  grads = [[(s * rng.standard_normal(shape)).astype(np.float32)
            for _, shape in OPTIMIZER_VARIABLES] for s in scales]
  arrays = {"initial:" + n: v for (n, _), v in zip(OPTIMIZER_VARIABLES,
                                                     initial)}
  for i, (name, _) in enumerate(OPTIMIZER_VARIABLES):
    arrays["grads:" + name] = np.stack([g[i] for g in grads])
  meta = dict(OPTIMIZER_RUN, variables=[n for n, _ in OPTIMIZER_VARIABLES],
              variants={})
  for variant, layerwise in (("pretraining", False), ("layerwise", True)):
    runs = [_optimizer_run(tf, optimization, initial, grads, layerwise)
            for _ in range(3)]
    # The schedule's read of global_step races its increment in the
    # original's graph (no control dependency); say if runs disagree.
    same = all(r[2] == runs[0][2] for r in runs)
    values, lr_keys, lrs = runs[0]
    for i, (name, _) in enumerate(OPTIMIZER_VARIABLES):
      arrays[f"{variant}:{name}"] = np.stack([v[i] for v in values])
    meta["variants"][variant] = {
        "layerwise_lr_decay_power": 0.8 if layerwise else -1,
        "n_transformer_layers": 2 if layerwise else None,
        "lr_keys": lr_keys, "lr_used": lrs,
        "three_runs_used_the_same_lrs": same}
  _dump_npz("optimizer_updates.npz", **arrays)
  _dump_json("optimizer.json", meta)


# ------------------------------------------------------------ item 8
def record_electric_losses(tf, shared):
  """The original's Electric losses on a tiny model (its PretrainingModel
  with electric_objective, eval mode), with what they were computed from:
  q's per-token NLL and the weights over it, log q of each shown token, the
  energy head's output and the final NCE logits. Captured by wrapping its
  get_softmax_output and reading its graph; its math is untouched."""
  import configure_pretraining  # pylint: disable=g-import-not-at-top
  import run_pretraining  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(68)
  ids = rng.integers(104, ELECTRIC_VOCAB, size=(3, 16)).astype(np.int32)
  mask = np.ones_like(ids)
  segs = np.zeros_like(ids)
  ids[:, 0] = 101  # [CLS]
  ids[0, 15] = 102  # [SEP]
  ids[1, 9], ids[1, 10:], mask[1, 10:] = 102, 0, 0
  ids[2, 6], ids[2, 15], segs[2, 7:] = 102, 102, 1
  captured = []
  original = run_pretraining.get_softmax_output

  def capture(*args, **kwargs):
    captured.append(original(*args, **kwargs))
    return captured[-1]
  run_pretraining.get_softmax_output = capture
  with tempfile.TemporaryDirectory() as data_dir:
    config = configure_pretraining.PretrainingConfig(
        "electric", data_dir, electra_objective=False, electric_objective=True,
        two_tower_generator=True, model_size="small", vocab_size=ELECTRIC_VOCAB,
        embedding_size=32, max_seq_length=16, mask_prob=MASK_PROB,
        model_hparam_overrides=dict(hidden_size=64, num_hidden_layers=1,
                                    num_attention_heads=1,
                                    intermediate_size=128),
        vocab_file=os.path.join(shared, "vocab", "bert-base-uncased-vocab.txt"))
    graph = tf.Graph()
    with graph.as_default():
      tf.set_random_seed(68)
      features = {"input_ids": tf.constant(ids),
                  "input_mask": tf.constant(mask),
                  "segment_ids": tf.constant(segs)}
      model = run_pretraining.PretrainingModel(config, features, False)
      cloze = captured[0]  # _get_cloze_outputs' call comes first
      disc_scope = "discriminator_predictions/"
      (energy,) = [op.outputs[0] for op in graph.get_operations()
                   if op.name.startswith(disc_scope) and op.type == "Squeeze"]
      (log_q,) = [op.outputs[0] for op in graph.get_operations()
                  if op.name.startswith(disc_scope)
                  and op.type == "StopGradient"]
      metric_fn, values = model.eval_metrics
      names = ("input_ids", "masked_lm_preds", "mlm_loss", "masked_lm_ids",
               "masked_lm_weights", "input_mask", "disc_loss", "disc_labels",
               "disc_probs")
      evals = dict(zip(names, values))
      fetch = {"cloze_nll": cloze.per_example_loss,
               "cloze_weights": cloze.weights, "cloze_loss": cloze.loss,
               "energy": energy, "log_q": log_q,
               "nce_logits": evals["disc_probs"].op.inputs[0],
               "nce_labels": evals["disc_labels"],
               "nce_loss_per_row": evals["disc_loss"],
               "total_loss": model.total_loss}
      with tf.Session(graph=graph) as sess:
        sess.run(tf.global_variables_initializer())
        out = sess.run(fetch)
  run_pretraining.get_softmax_output = original
  _dump_npz("electric_losses.npz", input_ids=ids, input_mask=mask,
            segment_ids=segs, mask_prob=np.float32(MASK_PROB),
            gen_weight=np.float32(config.gen_weight),
            disc_weight=np.float32(config.disc_weight), **out)


# ------------------------------------------------------------ item 9
STEPS_SIZES = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=1,
                   intermediate_size=128, max_position_embeddings=32,
                   hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
# The weights kept after the last step: the shared token table, the
# generator's output bias, a kernel of each network and the detector's.
STEPS_FINAL = ("electra/embeddings/word_embeddings",
               "generator_predictions/output_bias",
               "generator/encoder/layer_1/output/dense/kernel",
               "electra/encoder/layer_1/attention/self/query/kernel",
               "discriminator_predictions/dense_1/kernel")
STEPS_RUN = dict(steps=30, batch=8, seq=32, learning_rate=1e-3, warmup=5)
# --steps-shape: the committed recording's tiny sizes, or Table 5.1's Small
# (12 x 256, 4 heads, embeddings 128) for a recording outside the repo.
STEPS_SHAPES = {
    "tiny": (STEPS_SIZES, 32),
    "small": (dict(STEPS_SIZES, hidden_size=256, num_hidden_layers=12,
                   num_attention_heads=4, intermediate_size=1024), 128)}


def record_electra_steps(tf, shared, shape="tiny", out_dir=HERE):
  """30 whole ELECTRA training steps of the original (its PretrainingModel
  and create_optimizer, a tiny model without dropout, sampling at
  temperature 1e-6 so each sample is the generator's argmax), from
  weights of its own init rounded to float16 (kept: the run starts from
  exactly them), on fixed batches: per step its masked inputs, samples and
  losses, and the weights after the last step's update. Captured by
  wrapping its pretrain_helpers.mask and _get_fake_data. schedule_offset:
  1 when its first update (at lr(0) = 0) moved the weights, i.e. its
  global_step increment ran before the learning rate read it."""
  import configure_pretraining  # pylint: disable=g-import-not-at-top
  import run_pretraining  # pylint: disable=g-import-not-at-top
  from pretrain import pretrain_helpers  # pylint: disable=g-import-not-at-top
  r = STEPS_RUN
  sizes, embedding_size = STEPS_SHAPES[shape]
  rng = np.random.default_rng(69)
  ids = rng.integers(104, ELECTRIC_VOCAB, size=(r["steps"], r["batch"],
                                                r["seq"])).astype(np.int32)
  mask = np.ones_like(ids)
  segs = np.zeros_like(ids)
  ids[:, :, 0] = 101
  ids[:, :, -1] = 102
  lengths = rng.integers(8, r["seq"], size=(r["steps"], r["batch"]))
  for s in range(r["steps"]):
    for b in range(0, r["batch"], 2):  # every other row padded
      n = lengths[s, b]
      ids[s, b, n - 1], ids[s, b, n:], mask[s, b, n:] = 102, 0, 0
    segs[s, 1::2, r["seq"] // 2:] = 1
    ids[s, 1::2, r["seq"] // 2 - 1] = 102
  captured = {}
  model_cls = run_pretraining.PretrainingModel
  methods = {"fake": "_get_fake_data", "mlm": "_get_masked_lm_output",
             "disc": "_get_discriminator_output"}
  originals = {k: getattr(model_cls, m) for k, m in methods.items()}
  mask_fn = pretrain_helpers.mask

  def capture_mask(*args, **kwargs):
    captured["masked"] = mask_fn(*args, **kwargs)
    return captured["masked"]

  def capturing(key):
    def method(self, *args, **kwargs):
      captured[key] = originals[key](self, *args, **kwargs)
      return captured[key]
    return method
  pretrain_helpers.mask = capture_mask
  for key, name in methods.items():
    setattr(model_cls, name, capturing(key))
  with tempfile.TemporaryDirectory() as data_dir:
    config = configure_pretraining.PretrainingConfig(
        "steps", data_dir, model_size="small", vocab_size=ELECTRIC_VOCAB,
        embedding_size=embedding_size, max_seq_length=r["seq"],
        mask_prob=MASK_PROB,
        temperature=1e-6, learning_rate=r["learning_rate"],
        num_train_steps=r["steps"], num_warmup_steps=r["warmup"],
        model_hparam_overrides=sizes,
        vocab_file=os.path.join(shared, "vocab", "bert-base-uncased-vocab.txt"))
    graph = tf.Graph()
    with graph.as_default():
      tf.set_random_seed(69)
      placeholders = {k: tf.placeholder(tf.int32, ids.shape[1:])
                      for k in ("input_ids", "input_mask", "segment_ids")}
      spec = run_pretraining.model_fn_builder(config)(placeholders, None,
                                                      "train", {})
      masked, fake = captured["masked"], captured["fake"]
      model_vars = [v for v in tf.global_variables()
                    if "adam" not in v.op.name and "global_step" not in
                    v.op.name]
      fetch = {"masked_input_ids": masked.input_ids,
               "masked_lm_positions": masked.masked_lm_positions,
               "masked_lm_ids": masked.masked_lm_ids,
               "masked_lm_weights": masked.masked_lm_weights,
               "sampled_input_ids": fake.inputs.input_ids,
               "disc_labels": fake.is_fake_tokens, "total_loss": spec.loss,
               "mlm_loss": captured["mlm"].loss,
               "disc_loss": captured["disc"].loss}
      with tf.Session(graph=graph) as sess:
        sess.run(tf.global_variables_initializer())
        initial = {}
        for v in model_vars:
          initial[v.op.name] = sess.run(v).astype(np.float16)
          v.load(initial[v.op.name].astype(np.float32), sess)
        steps = collections.defaultdict(list)
        for s in range(r["steps"]):
          feed = {placeholders["input_ids"]: ids[s],
                  placeholders["input_mask"]: mask[s],
                  placeholders["segment_ids"]: segs[s]}
          out, _ = sess.run([fetch, spec.train_op], feed)
          for k, v in out.items():
            steps[k].append(v)
          if s == 0:  # lr(0) is 0: did the first update move anything?
            table = [v for v in model_vars if v.op.name == STEPS_FINAL[0]][0]
            offset = int(np.abs(sess.run(table) - initial[STEPS_FINAL[0]]
                                ).max() > 0)
        final = {v.op.name: sess.run(v) for v in model_vars
                 if v.op.name in STEPS_FINAL}
  pretrain_helpers.mask = mask_fn
  for key, name in methods.items():
    setattr(model_cls, name, originals[key])
  _dump_npz(os.path.join(out_dir, "electra_steps.npz"), input_ids=ids,
            input_mask=mask, segment_ids=segs,
            run=np.array(json.dumps(dict(r, sizes=sizes,
                                         schedule_offset=offset,
                                         embedding_size=embedding_size,
                                         vocab_size=ELECTRIC_VOCAB))),
            **{k: np.stack(v) for k, v in steps.items()},
            **{"initial:" + k: v for k, v in initial.items()},
            **{"final:" + k: v for k, v in final.items()})


ELECTRIC_VOCAB = 200  # past [CLS] 101, [SEP] 102, [MASK] 103 of the vocab


def record_small_init(tf, shared):
  """The original's initial ELECTRA-Small weights (its configure_pretraining
  defaults, Table 5.1: 12 x 256, embeddings 128, generator 1/4, the BERT
  vocab), as the statistics of each variable's draw: its shape, mean,
  std and largest |value|, from its own model_fn and initializer run."""
  import configure_pretraining  # pylint: disable=g-import-not-at-top
  import run_pretraining  # pylint: disable=g-import-not-at-top
  vocab = os.path.join(shared, "vocab", "bert-base-uncased-vocab.txt")
  with tempfile.TemporaryDirectory() as data_dir:
    config = configure_pretraining.PretrainingConfig(
        "small_init", data_dir, model_size="small", vocab_file=vocab)
    graph = tf.Graph()
    with graph.as_default():
      tf.set_random_seed(11)
      features = {k: tf.zeros([2, SEQ_LEN], tf.int32)
                  for k in ("input_ids", "input_mask", "segment_ids")}
      run_pretraining.model_fn_builder(config)(features, None, "train", {})
      model_vars = [v for v in tf.global_variables()
                    if "adam" not in v.op.name and "global_step" not in
                    v.op.name]
      with tf.Session(graph=graph) as sess:
        sess.run(tf.global_variables_initializer())
        values = sess.run({v.op.name: v for v in model_vars})
  _dump_json("small_init.json", {
      "vocab_size": config.vocab_size,
      "variables": [{"name": k, "shape": list(v.shape),
                     "mean": float(v.mean()), "std": float(v.std()),
                     "max_abs": float(np.abs(v).max())}
                    for k, v in sorted(values.items())]})


ITEMS = {
    "1": [record_masking],
    "2": [record_stsb],
    "3": [record_tokenization],
    "4": [record_chunking, record_squad_answer_mask, record_default_lengths],
    "5": [record_learning_rate],
    "6": [record_gelu_and_logits],
    "7": [record_optimizer],
    "8": [record_electric_losses],
    "9": [record_electra_steps],
    "10": [record_squad_head],
    "11": [record_small_init],
}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("original", help="extracted google-research/electra")
  parser.add_argument("--items", default="1,2,3,4,5,6,7,8,9,10,11")
  parser.add_argument("--shared", default="/work/shared/data")
  parser.add_argument("--draws", type=int, default=1000)
  parser.add_argument("--steps-shape", choices=sorted(STEPS_SHAPES),
                      default="tiny", help="item 9: the model's sizes")
  parser.add_argument("--out-dir", default=HERE,
                      help="item 9: where electra_steps.npz goes")
  args = parser.parse_args()
  tf = shim(os.path.abspath(args.original))
  for item in args.items.split(","):
    for fn in ITEMS[item]:
      if fn is record_masking:
        fn(tf, args.shared, args.draws)
      elif fn is record_electra_steps:
        fn(tf, args.shared, args.steps_shape, args.out_dir)
      else:
        fn(tf, args.shared)


if __name__ == "__main__":
  main()
