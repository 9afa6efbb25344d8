"""Objectives compared at equal pretraining compute (run_comparison.py).

config.py  what to compare (ComparisonConfig)
plan.py    each objective's pretraining hparams, steps set by pretrain/flops.py
jobs.py    the resumable list of jobs (build data, pretrain, eval, fine-tune,
           BLiMP), each a subprocess of the project's own scripts
report.py  results.json, the Markdown table and the matplotlib plots
"""
