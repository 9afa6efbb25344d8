"""SQuAD 1.1 ("squadv1") and 2.0 ("squad") with the ELECTRA release's head.

The task ties together qa_data (examples and feature rows), qa_head (the
release's, XLNet's or BERT's head and its loss helpers) and qa_scorer
(n-best spans, null score, EM/F1).
"""

import sys

from keras import ops

from finetune import data_layout
from finetune import task
from finetune.qa import qa_data
from finetune.qa import qa_head
from finetune.qa import qa_scorer
from util.errors import UserError


class QATask(task.Task):
  """SQuAD-format span extraction; `v2` adds unanswerable questions."""

  metric = "f1"
  v2 = False
  predictions_ext = ".json"

  def __init__(self, config, tokenizer):
    super().__init__(config, tokenizer)
    self._examples = {}

  # -- examples

  def data_path(self, split):
    """RAW_DATA_DIR/<task>/<split>.json, or SQuAD's own file name there."""
    return data_layout.require(self.config.raw_data_dir, self.name, split)

  def get_examples(self, split):
    if split not in self._examples:
      path = self.data_path(split)
      limit = (self.config.train_examples_limit if split == "train" else
               self.config.eval_examples_limit)
      self._examples[split] = self._read_examples(
          qa_data.read_squad_file(path), path, split == "train", limit)
    return self._examples[split]

  def read_file(self, path):
    """Any SQuAD-layout JSON file; labelled when every question has its
    answers (or, 2.0, is marked unanswerable)."""
    examples = self._read_examples(qa_data.read_squad_file(path), path,
                                   False, 0)
    if not examples:
      raise UserError(f"{path} has no questions")
    return examples, all(e.answers or e.is_impossible for e in examples)

  @property
  def head_kind(self):
    """squad (the end conditioned on the start: qa_head electra or xlnet)
    or squad_linear (qa_head linear); + _answerable with the 2.0
    answerability classifier (what predictions use)."""
    kind = "squad_linear" if self.config.qa_head == "linear" else "squad"
    return kind + ("_answerable" if (
        self.v2 and self.config.answerable_classifier) else "")

  def _read_examples(self, articles, path, is_train, limit):
    examples, self._unfound = [], 0
    for a, article in enumerate(articles):
      paragraphs = qa_data.field(article, "paragraphs", list, path,
                                 f"article {a}")
      for p, paragraph in enumerate(paragraphs):
        where = f"article {a} paragraph {p}"
        self._add_paragraph(paragraph, path, where, is_train, examples)
        if limit and len(examples) >= limit:
          break
      if limit and len(examples) >= limit:
        break
    if self._unfound:  # BERT drops them too, but says so
      print(f"warning: {path}: left out {self._unfound} training "
            "question(s) whose answer text is not at its answer_start",
            file=sys.stderr, flush=True)
    return examples[:limit] if limit else examples

  def _add_paragraph(self, paragraph, path, where, is_train, examples):
    context = qa_data.field(paragraph, "context", str, path, where)
    doc_tokens, word_spans, char_to_word = qa_data.split_context(context)
    qas = qa_data.field(paragraph, "qas", list, path, where)
    if qas and not context.strip():
      raise UserError(f'{path}: {where} has an empty "context" (and '
                      f"{len(qas)} question(s) about it)")
    for q, qa in enumerate(qas):
      qwhere = f"{where} question {q}"
      qid = str(qa_data.field(qa, "id", (str, int), path, qwhere))
      answers = qa.get("answers") or []
      if not isinstance(answers, list) or not all(
          isinstance(x, dict) and isinstance(x.get("text"), str)
          for x in answers):
        raise UserError(f'{path}: {qwhere} has a malformed "answers" list')
      for x in answers:  # an offset past the context is a broken file
        start = x.get("answer_start")
        if isinstance(start, int) and not 0 <= start <= (
            len(context) - len(x["text"])):
          raise UserError(f"{path}: {qwhere}: answer_start {start} (of "
                          f"{x['text'][:40]!r}) lies outside its context "
                          f"of {len(context)} characters")
      impossible = bool(qa.get("is_impossible", False)) or (
          self.v2 and "is_impossible" not in qa and "answers" in qa and
          not answers)
      if impossible and not self.v2:
        continue  # a 2.0 question has no place in 1.1
      example = qa_data.QAExample(
          guid=qid, qid=qid,
          question=qa_data.field(qa, "question", str, path, qwhere),
          context=context, doc_tokens=doc_tokens, word_spans=word_spans,
          answers=[] if impossible else [x["text"] for x in answers],
          is_impossible=impossible)
      if answers and not impossible:
        words = qa_data.answer_words(context, char_to_word, doc_tokens,
                                     answers[0])
        if words is None and is_train:
          self._unfound += 1
          continue  # unrecoverable annotation: BERT drops it too
        if words is not None:
          example.start_word, example.end_word = words
          example.answer_text = answers[0]["text"]
      examples.append(example)

  # -- features

  def featurize(self, examples, is_training):
    """Rows as described in qa_data's docstring. Gold positions are
    filled whenever known (also at eval, for the eval loss)."""
    del is_training  # the same rows serve training and evaluation
    config, tok = self.config, self.tokenizer
    contexts = {}
    for ex in examples:
      contexts.setdefault(ex.context, ex)
    words = sorted({w for ex in contexts.values() for w in ex.doc_tokens})
    # Three batched calls: every distinct word, every question, answers.
    pieces = dict(zip(words, tok.tokenize_batch(words)))
    queries = tok.tokenize_batch([ex.question for ex in examples])
    answers = tok.tokenize_batch([ex.answer_text for ex in examples])
    docs = {text: qa_data.build_doc(tok, ex.doc_tokens, ex.word_spans,
                                    pieces)
            for text, ex in contexts.items()}
    rows = qa_data.Rows(config.max_seq_length, tok.special_ids)
    for i, ex in enumerate(examples):
      doc = docs[ex.context]
      query = queries[i][:config.max_query_length]
      spans = qa_data.doc_spans(
          len(doc.ids), config.max_seq_length - len(query) - 3,
          config.doc_stride)
      best = qa_data.max_context_span(spans, len(doc.ids))
      answer = qa_data.answer_pieces(doc, ex, answers[i])
      for s, span in enumerate(spans):
        rows.add(doc, query, span, best == s, answer, i, ex.is_impossible)
    return rows.arrays()

  # -- model

  # Its inference outputs are the beam's (top-k starts and ends) per row;
  # the top-k needs k tokens.
  per_row_outputs = True

  @property
  def min_trimmed_length(self):
    return self.config.beam_size

  def build_head(self, model_config):
    config = self.config
    dropout = (
        config.hidden_dropout_prob if config.hidden_dropout_prob is not None
        else model_config.hidden_dropout_prob)
    return qa_head.SQuADHead(
        model_config, config.beam_size, self.v2,
        answerable_classifier=config.answerable_classifier,
        answerable_uses_start_logits=config.answerable_uses_start_logits,
        style=config.qa_head, dropout=dropout,
        name=f"{self.name}_head")

  def loss_and_outputs(self, head, hidden, features, training):
    """Per-row loss: (CE(start) + CE(end | gold start)) / 2, plus
    answerable_weight x sigmoid CE(is_impossible) with the classifier
    (qa_head electra: 1.1 too, as the release).
    Outputs (inference only) are the head's beam and answerability."""
    starts = features.get("start_positions")
    if starts is not None:
      starts = ops.cast(starts, "int32")
    res = head(hidden, features["answer_mask"], start_positions=starts,
               training=training)
    if starts is None:
      loss = ops.zeros((ops.shape(hidden)[0],), "float32")
    else:
      ends = ops.cast(features["end_positions"], "int32")
      loss = -(qa_head.gather(res["start_log_probs"], starts) +
               qa_head.gather(res["end_log_probs"], ends)) / 2.0
      if "answerable_logit" in res:
        labels = ops.cast(features["is_impossible"], "float32")
        loss = loss + self.config.answerable_weight * qa_head.sigmoid_ce(
            labels, res["answerable_logit"])
    if training:
      return loss, {}
    keys = ("start_top_index", "start_top_log_probs", "end_top_index",
            "end_top_log_probs", "answerable_logit", "cls_log_prob")
    # 1.1's answerability logit (the release's head) is its loss's only.
    outputs = {k: res[k] for k in keys
               if k in res and (self.v2 or k != "answerable_logit")}
    outputs["example_index"] = features["example_index"]
    return loss, outputs

  def get_scorer(self, examples, features):
    return qa_scorer.SQuADScorer(self.config, examples, features, self.v2)

  def output_files(self, path):
    return qa_scorer.prediction_files(path, self.v2)


class SQuADv1(QATask):
  name = "squadv1"
  v2 = False


class SQuAD(QATask):
  name = "squad"
  v2 = True
