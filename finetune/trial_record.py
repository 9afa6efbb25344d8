"""The record of a fine-tuning run's finished trials, OUTPUT_DIR/
<tasks>_trials.json: the same command after a kill goes on from the
first unfinished trial, and the kept model is known to be this run's."""

import json
import math
import os
import uuid

import keras
import numpy as np

from finetune.model import head_weights
from finetune.summary import format_table
from finetune.summary import versus_baselines
from interop.weights import encoder_slots
from loading import finetuned as finetuned_files
from pretrain import run_dir
from util import outputs
from util import storage
from util.errors import UserError
from util.text_files import read_json

# Where a refused run can go instead: --overwrite would replace the run's
# kept model (OUTPUT_DIR/<tasks>_model), so it is never the advice.
ELSEWHERE = ("use another --output-dir for a new run (--no-do-train "
             "evaluates the kept model)")


class TrialRecord:
  """A run's trials (their dev results), the trial whose model is kept
  (keep_model) and the results file; written after each change. With
  several processes (JAX) only process 0's writes (`writes`), and only it
  reads the folder (look, start: the loop gives its view to the others)."""

  def __init__(self, config, tasks, paths, *, pretrain_config,
               model_config, vocab_file, writes=True):
    """paths: the run's RunOutputs; the rest: what a kept model records
    of where it came from (loading/finetuned.py)."""
    self.config = config
    self.tasks = tasks
    self.paths = paths
    self.writes = writes
    self._saved = dict(pretrain_config=pretrain_config,
                       model_config=model_config, vocab_file=vocab_file)
    self.path = paths.record_path()
    self.locks = []  # held from start() to release()
    self.data = None  # look(): an earlier run's; start(): this run's

  def look(self):
    """Before any work: no other run holds the tasks' locks, and an
    earlier run of this command, if any, is read (to go on from)."""
    for lock in self._take_locks():  # another run in progress: said now
      lock.release()
    self.data = self._resumed()

  def _take_locks(self, create=False):
    """OUTPUT_DIR/<task>_finetuning.lock of each task (an flock, as
    pretraining's training.lock): a second run of a task in one output
    folder is refused, runs of other tasks may share it. Without
    `create`, only the lock files already there are tried."""
    folder, taken = self.config.output_dir, []
    try:
      for name in sorted(t.name for t in self.tasks):
        file = f"{name}_finetuning.lock"
        if create or storage.exists(os.path.join(folder, file)):
          taken.append(run_dir.RunLock(
              folder, file, what=f"fine-tuning run of {name}",
              instead="use another --output-dir", name="output_dir"))
    except BaseException:
      for lock in taken:
        lock.release()
      raise
    return taken

  def release(self):
    for lock in self.locks:
      lock.release()
    self.locks = []

  @property
  def resumed(self):
    """Whether an earlier run of this command is gone on from."""
    return self.data is not None

  def _resumed(self):
    """The record of an earlier run of this command (same tasks and
    hparams but RUN_SETTINGS) to go on from; None for a new run. One
    with other hparams is refused (--overwrite starts over)."""
    config, path = self.config, self.path
    if config.overwrite or not storage.exists(path):
      return None
    try:
      record = read_json(path)
    except UserError as e:
      raise UserError(f"{e} (the record of an earlier run: {ELSEWHERE})"
                      ) from None
    if not (isinstance(record, dict) and isinstance(record.get("config"),
                                                    dict) and
            isinstance(record.get("trials"), list)):
      raise UserError(f"{path} is not a record of trials: {ELSEWHERE}")
    saved = record["config"]
    changes = [(k, saved[k], v) for k, v in config.run_hparams().items()
               if k in saved and saved[k] != v]
    if changes:
      shown = ", ".join(f"{k} {a!r} -> {b!r}" for k, a, b in changes[:4])
      more = f" (+{len(changes) - 4} more)" if len(changes) > 4 else ""
      raise UserError(f"{path} records a run of these tasks with other "
                      f"hparams: {shown}{more}; run it with its own to go "
                      f"on, or {ELSEWHERE} (nothing was written)")
    return record

  def start(self):
    """The run's record: resumed (finished trials kept; when the kept
    model on disk is not the one recorded, as after a kill between the
    two writes, from that trial on) or new. Written at once, so that the
    files this run writes are known to be its own."""
    storage.makedirs(self.config.output_dir)
    self.locks = self._take_locks(create=True)  # released by release()
    for lock in self.locks:
      lock.keep_signature()
    if self.data is not None:  # as it is now that no other run writes it
      self.data = self._resumed()
    config, record = self.config, self.data
    if record is None:
      record = {"run": uuid.uuid4().hex, "config": config.run_hparams(),
                "trials": [], "kept": None, "results_file": ""}
    # Which backend ran the trials: a rerun on the other is refused before
    # it loads (finetune/preflight.py check_backend).
    record.setdefault("backend", keras.backend.backend())
    kept = record.get("kept")  # its trial: 1-based, as logs and files say
    if kept and kept["trial"] <= len(record["trials"]):
      path = self.paths.kept_model_path()
      on_disk = (finetuned_files.load(path).info if
                 finetuned_files.is_finetuned(path) else {})
      if (on_disk.get("run"), on_disk.get("trial")) != (record["run"],
                                                          kept["trial"]):
        print(f"note: {path} is not trial {kept['trial']}'s model as "
              "recorded (interrupted while keeping it): from that trial on "
              "again", flush=True)
        record["trials"] = record["trials"][:kept["trial"] - 1]
        record["kept"] = None
    self.data = record
    self.write()
    return record

  def done_trials(self):
    """The trials finished earlier (after start()), said in the log."""
    trials = self.data["trials"][:self.config.num_trials]
    if trials:
      n = self.config.num_trials
      print(f"{len(trials)} of {n} trial(s) done earlier (recorded in "
            f"{self.path}): " + ("going on" if len(trials) < n else
                                 "nothing left to train"), flush=True)
    return trials

  def write(self):
    if not self.writes:
      return
    storage.makedirs(self.config.output_dir)
    outputs.write_text(self.path, json.dumps(self.data, indent=2))

  def score(self, results):
    """The dev score that picks the best trial: the mean of the tasks'
    headline metrics (NaN counts as the worst); None without dev results."""
    values = [results[t.name].get(t.metric) for t in self.tasks
              if t.name in results]
    values = [v for v in values if v is not None]
    if not values:
      return None
    score = float(np.mean(values))
    return score if np.isfinite(score) else -math.inf

  def keep(self, model, trial, results):
    """Writes trial `trial`'s model (1-based) to the kept model's path
    when keep_model asks: always (last), when its dev score beats the kept one's (best;
    the last when there is no dev score), never (none)."""
    config = self.config
    if config.keep_model == "none" or not config.do_train:
      return
    score, kept = self.score(results), self.data.get("kept")
    if (config.keep_model == "best" and kept is not None and
        score is not None and kept.get("score") is not None and
        not score > kept["score"]):
      return
    self.data["kept"] = {"trial": trial, "score": score}
    if not self.writes:
      return
    path = self.paths.kept_model_path()
    finetuned_files.save(
        path, finetuning_config=config,
        tasks={t.name: t.model_info() for t in self.tasks},
        encoder={s.name: s.value() for s in encoder_slots(model.encoder)},
        heads={t.name: head_weights(model.heads[t.name]) for t in self.tasks},
        info=dict(trial=trial, seed=config.seed + trial - 1, results=results,
                  kept=config.keep_model, score=score,
                  run=self.data["run"]),
        overwrite=True,  # this run's own (checked before any work)
        **self._saved)
    why = ("" if score is None else
           f", dev score {score:.4f}" if config.keep_model == "best" else "")
    print(f"kept trial {trial}'s model{why}: {path}", flush=True)

  def write_results(self, trials, summary, done, baselines=None):
    """The results file of `trials`: written anew when this run finished
    some (`done` were recorded before it) or the recorded one is gone,
    else the recorded one. Returns its path."""
    config, kept = self.config, self.data.get("kept")
    out = {"tasks": config.tasks, "num_trials": config.num_trials,
           "summary": summary, "trials": trials,
           "baselines": baselines or {}}  # no-text, dev (summary.py)
    if kept:
      out["kept_model"] = {"path": self.paths.kept_model_path(),
                           "trial": kept["trial"], "keep": config.keep_model}
    path = self.data.get("results_file")
    if not self.writes:
      return path or "process 0's results file"
    if len(trials) > done or not (path and storage.exists(path)):
      path = self.paths.results_path()
      outputs.write_text(path, json.dumps(out, indent=2))
      self.data["results_file"] = path
      self.write()
    return path

  def report(self, trials, summary, done, baselines):
    """Writes the results file (write_results) and prints the medians,
    the no-text baselines beside them."""
    path = self.write_results(trials, summary, done, baselines)
    print(f"median over {self.config.num_trials} trial(s) (all in {path}):",
          flush=True)
    medians = {t: {k: v["median"] for k, v in m.items()}
               for t, m in summary.items()}
    print(format_table(medians), flush=True)
    if baselines:
      print(versus_baselines(medians, self.tasks, baselines),
            flush=True)
