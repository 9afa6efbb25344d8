"""The comparison's jobs in order, and the plan kept beside its results.

Order: build the data (or reuse it), then pretrain each objective and
run each checkpoint's jobs as soon as it is saved: evaluate it, fine-tune
it (the final model's are the headline table, the others the curves), score
BLiMP with the final model. The next pretraining starts only when no saved
checkpoint has a job left (Job.defer), so each row is complete hours before
the last. With --parallel-jobs N, N jobs run at once; `--only PATTERNS`
runs just the matching jobs, e.g. a saved checkpoint's while the full
command pretrains in another process. The report is rewritten after each
job, so partial results are readable early.
"""

import fnmatch
import json
import os

from comparison import plan
# Names, not the module: `jobs` is a local name below.
from comparison.jobs import (Job, JobRunner, blimp_result, data_result,
                             finetune_result, last_json_line,
                             pretrain_result)
from comparison import report
from comparison.config import TAGGING_TASKS
from finetune import data_layout
from pretrain.run_config import RUN_SETTINGS
from util import storage
from util import text_files
from util.errors import UserError
from util.tokenization import load_tokenizer

PLAN_FILE = "plan.json"


def data_job(config):
  out = os.path.join(config.data_dir, "pretrain_tfrecords")
  return Job(
      key="data", group="data", units=1,
      argv=["build_pretraining_dataset.py", "--corpus-dir", config.corpus_dir,
            "--vocab-file", config.vocab_file, "--output-dir", out,
            "--max-seq-length", str(config.max_seq_length),
            "--num-processes", str(config.num_processes),
            "--heldout-fraction", str(config.heldout_fraction)],
      parse=data_result, info={"metadata": os.path.join(out,
                                                        "metadata.json")})


def _tagging_dir(config):
  return os.path.join(config.output_dir, "tagging_data")


def prepare_tagging_data(config):
  """OUTPUT_DIR/tagging_data/{chunk,pos}/: links to CoNLL-2000's train.txt,
  and its test.txt as dev.txt (the ELECTRA release scores test)."""
  data_layout.link_conll(config.conll_dir, _tagging_dir(config),
                         [t for t in TAGGING_TASKS if t in config.task_names])


def _raw_data_dir(config, task):
  return _tagging_dir(config) if task in TAGGING_TASKS else config.glue_dir


def _model_dir(config, run):
  return os.path.join(config.output_dir, "models", run.name)


def _checkpoint(config, run, step):
  return os.path.join(_model_dir(config, run), f"ckpt-{step}")


def _saved(config, run, step):
  """The file whose existence says the checkpoint is complete."""
  return _checkpoint(config, run, step) + ".index"


def _pretrain_argv(config, run):
  hparams = os.path.join(config.output_dir, "plan", run.name + ".json")
  return ["run_pretraining.py", "--data-dir", config.data_dir,
          "--model-dir", _model_dir(config, run), "--hparams", hparams]


def blimp_jobs(config, run):
  """(--method, key) of a run's BLiMP jobs: its objective's own estimator
  (key: the run's name), and config.blimp_same_method, the one every
  objective is also scored with (key: METHOD-run), unless that is its own."""
  if not config.blimp_dir:
    return []
  own = plan.own_pll_method(run)
  jobs = [("", run.name)] if own else []
  same = config.blimp_same_method
  if same and same != own:
    jobs.append((same, f"{same}-{run.name}"))
  return jobs


def _who(run):
  """What a job's record says of its run."""
  return {"run": run.name, "objective": run.objective,
          "pretrain_seed": run.pretrain_seed}


def build_jobs(config, runs):
  """Every job after the data, in the order they run."""
  pretrain, evals, final_ft, blimp, curve_ft = [], [], [], [], []
  for run in runs:
    after = (f"pretrain-{run.name}",)  # what each of its other jobs reads
    pretrain.append(Job(
        key=f"pretrain-{run.name}", group="pretrain", units=run.flops,
        argv=_pretrain_argv(config, run), parse=pretrain_result, echo=True,
        info=dict(_who(run), steps=run.steps), defer=True))
    for step in run.checkpoint_steps:
      evals.append(Job(
          key=f"eval-{run.name}-{step}", group="eval", units=1,
          argv=_pretrain_argv(config, run) + [
              "--no-do-train", "--do-eval",
              "--eval-checkpoint", _checkpoint(config, run, step)],
          parse=last_json_line, info=dict(_who(run), step=step),
          after=after, ready_file=_saved(config, run, step)))
    for step in [run.checkpoint_steps[k - 1]
                 for k in config.finetune_indices]:
      for task in config.task_names:
        for seed in range(1, config.seeds + 1):
          out = os.path.join(config.output_dir, "finetune", run.name,
                             f"ckpt-{step}", task, f"seed-{seed}")
          argv = ["run_finetuning.py", "--init-checkpoint",
                  _checkpoint(config, run, step), "--task-names", task,
                  "--raw-data-dir", _raw_data_dir(config, task),
                  "--output-dir", out,
                  "--seed", str(seed), "--num-trials", "1",
                  "--keep-model", "none",  # scores only: no 55 MB per job
                  "--overwrite"]  # its own folder: a retry replaces it
          if config.finetune_hparams:
            argv += ["--hparams", json.dumps(config.finetune_hparams)]
          job = Job(key=f"finetune-{run.name}-{step}-{task}-{seed}",
                    group=f"finetune-{task}", units=1, argv=argv,
                    parse=finetune_result, after=after,
                    ready_file=_saved(config, run, step),
                    info=dict(_who(run), step=step, task=task,
                              seed=seed, output_dir=out))
          (final_ft if step == run.steps else curve_ft).append(job)
    for method, key in blimp_jobs(config, run):
      results = os.path.join(config.output_dir, "blimp", key + ".json")
      argv = ["run_scoring.py", "--mode", "blimp", "--init-checkpoint",
              _checkpoint(config, run, run.steps), "--blimp-dir",
              config.blimp_dir, "--blimp-limit", str(config.blimp_limit),
              "--results-file", results, "--overwrite"]
      if method:
        argv += ["--method", method]
      if config.scoring_hparams:
        argv += ["--hparams", json.dumps(config.scoring_hparams)]
      blimp.append(Job(key=f"blimp-{key}", group="blimp", units=1,
                       argv=argv, parse=blimp_result, after=after,
                       ready_file=_saved(config, run, run.steps),
                       info=dict(_who(run), results_file=results,
                                 method=method or plan.own_pll_method(run))))
  # Across objectives within each task, so the table fills evenly.
  final_ft.sort(key=lambda j: (j.info["task"], j.info["seed"]))
  curve_ft.sort(key=lambda j: (j.info["step"], j.info["task"],
                               j.info["seed"]))
  return pretrain + evals + final_ft + blimp + curve_ft


def select(jobs, only):
  """The jobs whose key matches one of the comma-separated glob patterns
  (all jobs when there are none)."""
  patterns = [p.strip() for p in only.split(",") if p.strip()]
  if not patterns:
    return jobs
  chosen = [j for j in jobs if any(fnmatch.fnmatchcase(j.key, p)
                                   for p in patterns)]
  if not chosen:
    examples = ", ".join(j.key for j in jobs[:2] + jobs[-1:])
    raise UserError(f"no planned job matches --only '{only}'; job keys look "
                    f"like {examples}")
  return chosen


# Settings that the finished jobs of a kind were run with: a rerun may add
# objectives, tasks or seeds, but not change these once such a job is done.
JOB_SETTINGS = {"finetune": ("finetune_hparams",),
                "blimp": ("scoring_hparams", "blimp_limit", "blimp_dir")}


def check_plan(config, budget, runs, runner):
  """Writes plan.json and each run's hparams; a rerun must plan the same
  runs (a changed budget or hparam would mix two experiments in one dir)."""
  path = os.path.join(config.output_dir, PLAN_FILE)
  old = text_files.read_json(path) if storage.exists(path) else None
  if old is not None and not (isinstance(old, dict) and isinstance(
      old.get("runs"), dict) and {"budget_flops", "model_size",
                                  "max_seq_length"} <= set(old)):
    raise UserError(f"{path} is not a comparison plan (edited or written "
                    "by another tool); use another --output-dir")
  new = {"budget_flops": budget, "model_size": config.model_size,
         "max_seq_length": config.max_seq_length,
         "runs": {r.name: r.hparams for r in runs}}
  for names in JOB_SETTINGS.values():
    new.update({name: getattr(config, name) for name in names})
  if old:
    for key in ("budget_flops", "model_size", "max_seq_length"):
      if old[key] != new[key]:
        raise UserError(f"{config.output_dir} holds a comparison with {key}="
                        f"{old[key]!r}, not {new[key]!r}; use another "
                        "--output-dir or the same settings")
    for kind, names in JOB_SETTINGS.items():
      changed = [n for n in names if n in old and old[n] != new[n]]
      if changed and runner.any_done(kind):
        raise UserError(f"{config.output_dir} holds {kind} results made with "
                        f"other {', '.join(changed)}; use another "
                        "--output-dir or the same settings")
    for name, hparams in new["runs"].items():
      before = old["runs"].get(name) or hparams
      # How often a run saves or logs is not the experiment.
      diff = sorted(k for k in set(before) | set(hparams)
                    if before.get(k) != hparams.get(k)
                    and k not in RUN_SETTINGS)
      if diff:
        raise UserError(f"{config.output_dir} holds run {name} planned with "
                        f"other hparams ({', '.join(diff)}); use another "
                        "--output-dir or the same settings")
    new["runs"] = dict(old["runs"], **new["runs"])
  storage.makedirs(os.path.join(config.output_dir, "plan"))
  for run in runs:
    storage.write_text_atomic(
        os.path.join(config.output_dir, "plan", run.name + ".json"),
        json.dumps(run.hparams, indent=2, sort_keys=True))
  storage.write_text_atomic(path, json.dumps(new, indent=2, sort_keys=True))


def _plan(config, metadata):
  """The runs, sized from the built data, or (dry run, no data yet) from
  the vocabulary the data will be built with."""
  if not storage.exists(metadata):
    return plan.plan_runs(config, load_tokenizer(config.vocab_file).vocab_size)
  meta = text_files.read_json(metadata)
  if meta["max_seq_length"] != config.max_seq_length:
    raise UserError(f"the data in {config.data_dir} has max_seq_length "
                    f"{meta['max_seq_length']}, not {config.max_seq_length}")
  # The builder keeps a copy of the vocabulary beside the data; each run
  # records it, so fine-tuning and scoring tokenize as pretraining did.
  vocab = os.path.join(os.path.dirname(metadata),
                       meta.get("vocab_file", "vocab.txt"))
  return plan.plan_runs(config, meta["vocab_size"], vocab)


def run(config, command=""):
  metadata = os.path.join(config.data_dir, "pretrain_tfrecords",
                          "metadata.json")
  if config.dry_run:  # prints the plan; builds and writes nothing
    print(plan.format_plan(*_plan(config, metadata)), flush=True)
    return None
  storage.makedirs(config.output_dir)
  runner = JobRunner(config.output_dir, config.parallel_jobs)
  if not storage.exists(metadata):
    # Its record may be kept without the TFRecords (jobs/ travels with the
    # results to a new machine): build them whatever the record says.
    runner.run([data_job(config)], redo=True)
  budget, runs = _plan(config, metadata)
  print(plan.format_plan(budget, runs), flush=True)
  check_plan(config, budget, runs, runner)
  storage.makedirs(os.path.join(config.output_dir, "blimp"))
  prepare_tagging_data(config)
  jobs = select(build_jobs(config, runs), config.only)

  def raw_dir(task):
    return _raw_data_dir(config, task)

  def write_report():
    try:
      report.write(config, budget, runs, runner, command, raw_dir)
    except Exception as e:  # pylint: disable=broad-except
      # A report bug must not stop hours of jobs; the final write raises.
      print(f"warning: the report was not rewritten ({e!r})", flush=True)

  runner.run(jobs, after_each=write_report)
  report.write(config, budget, runs, runner, command, raw_dir)
  return report.collect(config, budget, runs, runner)
