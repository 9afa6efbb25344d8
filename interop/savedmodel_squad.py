"""A fine-tuned SQuAD head's SavedModel signatures: answers from raw text.

serve_text(question, context: strings [B]) does in the graph what
finetune/qa does in Python, step for step, so the answer is the one
`run_finetuning.py --do-predict` writes:
  words      the context split at whitespace (qa_data.split_context);
  pieces     each word tokenized, with the characters each piece covers
             (qa_data.build_doc: a piece's own length where the pieces
             spell out the word, else the whole word);
  windows    [CLS] question [SEP] doc window [SEP], max_seq_length wide,
             doc_stride apart, each token scored in the window where it
             has the most context (qa_data.doc_spans, max_context_span);
  spans      the head's beam (beam_size starts x ends) of every window;
             valid spans as qa_scorer._candidates; the best over all the
             example's windows;
  null       2.0: the scorer's null score; the answer is "" above
             qa_na_threshold.
Outputs: answer [B] (the prediction), best_span [B] (the best span even
where the answer is ""), answer_start [B] (its first character in the
context, -1 for none, as SQuAD's answer_start), span_score [B] (log p
start + log p end) and, for 2.0, null_score [B].
serving_default takes the features instead (input_ids, input_mask,
segment_ids, answer_mask [B, T]) and gives the head's beam as the
fine-tuning scorer reads it.
"""

from keras import ops

from util.errors import UserError

SQUAD_KINDS = ("squad", "squad_answerable", "squad_linear",
               "squad_linear_answerable")
# qa_data._is_whitespace
_SPACES = (" ", "\t", "\r", "\n", "\u202f")
_MAX_NULL = 1e30  # qa_scorer's cap for "no window"


def check_lengths(max_len, config):
  if config.max_query_length >= max_len - 3:
    raise UserError(f"max_seq_length {max_len} leaves no room for the "
                    f"context after max_query_length "
                    f"{config.max_query_length} (+3 special tokens)")


def _words(tf, context):
  """Whitespace words: (row [W], first char [W], length in chars [W])."""
  chars = tf.strings.unicode_split(context, "UTF-8", errors="replace")
  flat, row = chars.flat_values, chars.value_rowids()
  pos = tf.range(tf.size(flat, tf.int64)) - tf.gather(chars.row_starts(),
                                                      row)
  space = tf.reduce_any(tf.equal(flat[:, None], tf.constant(_SPACES)[None]),
                        axis=1)
  prev_space = tf.where(pos == 0, True,
                        tf.concat([[True], space[:-1]], axis=0))
  start = tf.logical_and(tf.logical_not(space), prev_space)
  num_words = tf.reduce_sum(tf.cast(start, tf.int32))
  word_of_char = tf.where(space, num_words,
                          tf.cumsum(tf.cast(start, tf.int32)) - 1)
  length = tf.math.unsorted_segment_sum(
      tf.cast(tf.logical_not(space), tf.int32), word_of_char,
      num_words + 1)[:num_words]
  return (tf.boolean_mask(row, start),
          tf.cast(tf.boolean_mask(pos, start), tf.int32), length)


def _doc(tf, tokenizer, context, piece_chars):
  """The context's pieces per example: ids, first char, end char (ragged
  [B, (N)]), as qa_data.build_doc."""
  word_row, word_start, word_len = _words(tf, context)
  words = tf.strings.substr(tf.gather(context, word_row), word_start,
                            word_len, unit="UTF8_CHAR")
  pieces = tokenizer.tokenize_tensor(words)  # [W, (P)]
  piece_word = pieces.value_rowids()
  start = tf.gather(word_start, piece_word)
  end = tf.gather(word_start + word_len, piece_word)
  if piece_chars is not None:
    lengths = tf.gather(piece_chars, pieces.flat_values)
    running = tf.cumsum(lengths, exclusive=True)
    # The characters of the word's earlier pieces.
    before = running - tf.gather(running, tf.gather(
        tf.cast(pieces.row_starts(), tf.int32), piece_word))
    spelled = tf.logical_and(
        tf.equal(tf.reduce_sum(pieces.with_flat_values(lengths), axis=1),
                 word_len),
        tf.logical_not(tf.reduce_any(tf.equal(
            pieces, tokenizer.special_ids["unk"]), axis=1)))
    exact = tf.gather(spelled, piece_word)
    start = tf.where(exact, start + before, start)
    end = tf.where(exact, start + lengths, end)
  by_row = lambda x: tf.RaggedTensor.from_value_rowids(  # noqa: E731
      x, tf.gather(word_row, piece_word), nrows=tf.size(context,
                                                         tf.int64))
  return by_row(pieces.flat_values), by_row(start), by_row(end)


def _windows(tf, num_tokens, max_tokens, stride):
  """qa_data.doc_spans for each example: starts and lengths [B, K] and
  whether window k exists [B, K]."""
  step = tf.minimum(max_tokens, stride)
  count = 1 + tf.maximum(num_tokens - max_tokens + step - 1, 0) // step
  k = tf.range(tf.reduce_max(count))[None]
  starts = k * step[:, None]
  lengths = tf.maximum(tf.minimum(num_tokens[:, None] - starts,
                                  max_tokens[:, None]), 0)
  return starts, lengths, k < count[:, None]


def _max_context(tf, starts, lengths, exists, width):
  """[B, K, N]: whether window k is token n's max-context window
  (qa_data.max_context_span: first window on ties, float64 as NumPy)."""
  pos = tf.range(width)[None, None]
  starts, lengths = starts[..., None], lengths[..., None]
  inside = tf.logical_and(tf.logical_and(pos >= starts,
                                         pos < starts + lengths),
                          exists[..., None])
  score = tf.cast(tf.minimum(pos - starts, starts + lengths - 1 - pos),
                  tf.float64) + 0.01 * tf.cast(lengths, tf.float64)
  score = tf.where(inside, score, tf.constant(-float("inf"), tf.float64))
  best = tf.argmax(score, axis=1, output_type=tf.int32)  # [B, N]
  return tf.equal(tf.range(tf.shape(starts)[1])[None, :, None],
                  best[:, None])


def _rows(tf, special, max_len, query, doc_ids, starts, lengths):
  """The feature rows of every (example, window) [B, K, T], as
  qa_data.Rows.add; and where the doc window is [B, K, T] with each
  position's doc token index."""
  t = tf.range(max_len)[None, None]
  q_len = tf.cast(query.row_lengths(), tf.int32)[:, None, None]
  off = q_len + 2
  end = off + lengths[..., None]
  in_doc = tf.logical_and(t >= off, t < end)
  doc_index = tf.clip_by_value(starts[..., None] + t - off, 0,
                               tf.shape(doc_ids)[1] - 1)
  doc = tf.gather(doc_ids, doc_index, batch_dims=1)
  q = query.to_tensor(shape=[None, max_len])
  q = tf.gather(q, tf.clip_by_value(t - 1, 0, max_len - 1)[0, 0],
                axis=1)[:, None]
  ids = tf.where(t == 0, special["cls"], tf.where(
      t <= q_len, q, tf.where(t == q_len + 1, special["sep"], tf.where(
          in_doc, doc, tf.where(t == end, special["sep"], special["pad"])))))
  shape = tf.shape(ids)
  broadcast = lambda x: tf.cast(tf.broadcast_to(x, shape), tf.int32)  # noqa
  return {"input_ids": ids,
          "input_mask": broadcast(t <= end),
          "segment_ids": broadcast(tf.logical_and(t >= off, t <= end)),
          "answer_mask": broadcast(tf.logical_or(
              t == 0, tf.logical_and(t >= off, t <= end)))}, (
              tf.broadcast_to(in_doc, shape), doc_index)


def squad_signatures(tf, encode, head, tokenizer, max_len, config, v2):
  """(serve_ids, serve_text) tf.functions. encode(ids, mask, segments):
  the encoder's states; config: the fine-tuning's (max_query_length,
  doc_stride, max_answer_length, qa_na_threshold)."""
  check_lengths(max_len, config)
  special = tokenizer.special_ids
  vocab = getattr(tokenizer, "vocab", None)
  piece_chars = None if vocab is None else tf.constant(
      [len(v) - 2 * v.startswith("##") for v in vocab], tf.int32)
  keys = ("start_top_index", "start_top_log_probs", "end_top_index",
          "end_top_log_probs", "answerable_logit", "cls_log_prob")

  def beam(input_ids, input_mask, segment_ids, answer_mask):
    out = head(encode(input_ids, input_mask, segment_ids), answer_mask,
               training=False)
    return {k: ops.cast(out[k], "int32" if k.endswith("index") else
                        "float32") for k in keys if k in out}

  ids_spec = lambda name: tf.TensorSpec([None, None], tf.int32, name)  # noqa
  serve_ids = tf.function(
      beam, autograph=False, input_signature=[
          ids_spec(k) for k in ("input_ids", "input_mask", "segment_ids",
                                "answer_mask")])

  def answers(question, context):
    batch = tf.size(context)
    query = tokenizer.tokenize_tensor(question)[:, :config.max_query_length]
    doc_ids, char_start, char_end = _doc(tf, tokenizer, context, piece_chars)
    num_tokens = tf.cast(doc_ids.row_lengths(), tf.int32)
    width = tf.maximum(tf.reduce_max(num_tokens), 1)

    def dense(ragged):  # [B, width], zero-padded
      x = ragged.to_tensor()
      return tf.pad(x, [[0, 0], [0, width - tf.shape(x)[1]]])

    max_tokens = max_len - tf.cast(query.row_lengths(), tf.int32) - 3
    starts, lengths, exists = _windows(tf, num_tokens, max_tokens,
                                       config.doc_stride)
    is_max = _max_context(tf, starts, lengths, exists, width)
    rows, (in_doc, doc_index) = _rows(tf, special, max_len, query,
                                      dense(doc_ids), starts, lengths)
    where = tf.where(exists)  # [R, 2]: (example, window), in order
    out = beam(*(tf.gather_nd(rows[k], where) for k in (
        "input_ids", "input_mask", "segment_ids", "answer_mask")))
    # qa_scorer._candidates, for every row at once
    in_doc, doc_index = (tf.gather_nd(x, where) for x in (in_doc, doc_index))
    row_max = tf.gather(tf.gather_nd(is_max, where), doc_index,
                        batch_dims=1)
    k = tf.shape(out["end_top_index"])[1]
    s = tf.broadcast_to(out["start_top_index"][:, :, None],
                        tf.shape(out["end_top_index"]))
    e = out["end_top_index"]
    at = lambda x, i: tf.gather(x, i, batch_dims=1)  # noqa: E731
    valid = (at(in_doc, s) & at(in_doc, e) & at(row_max & in_doc, s) &
             (e >= s) & (e - s < config.max_answer_length))
    score = out["start_top_log_probs"][:, :, None] + out["end_top_log_probs"]
    score = tf.where(valid, score, -float("inf"))
    num_windows = tf.shape(exists)[1]
    flat = lambda x, fill: tf.reshape(tf.tensor_scatter_nd_update(  # noqa
        tf.fill([batch, num_windows, k, k], fill), where, x), [batch, -1])
    scores = flat(score, tf.constant(-float("inf")))
    best = tf.argmax(scores, axis=1, output_type=tf.int32)
    span_score = tf.gather(scores, best, batch_dims=1)
    found = span_score > -float("inf")
    # The winning row's start and end tokens, and their characters.
    first, last = (tf.gather(flat(at(doc_index, x), 0), best, batch_dims=1)
                   for x in (s, e))
    begin = tf.gather(dense(char_start), first, batch_dims=1)
    stop = tf.gather(dense(char_end), last, batch_dims=1)
    begin = tf.where(found, begin, 0)
    best_span = tf.strings.substr(
        context, begin, tf.where(found, stop - begin, 0), unit="UTF8_CHAR")
    result = {"best_span": best_span, "answer": best_span,
              "answer_start": tf.where(found, begin, -1),
              "span_score": span_score}
    if v2:
      example = tf.cast(where[:, 0], tf.int32)
      if "answerable_logit" in out:
        null = tf.math.unsorted_segment_min(out["answerable_logit"], example,
                                            batch)
      else:
        null = tf.math.unsorted_segment_min(out["cls_log_prob"], example,
                                            batch) - span_score
      null = tf.minimum(null, _MAX_NULL)
      result["null_score"] = null
      result["answer"] = tf.where(null > config.qa_na_threshold, "",
                                  best_span)
    return result

  text_spec = lambda name: tf.TensorSpec([None], tf.string, name)  # noqa
  serve_text = tf.function(answers, autograph=False, input_signature=[
      text_spec("question"), text_spec("context")])
  return serve_ids, serve_text

