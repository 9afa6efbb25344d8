#!/bin/bash
# The issue-38 comparison (results/comparison_tiny_v2), resumable: rerun it.
cd "$(dirname "$0")/../.."  # the clone's root
: "${DATA:?set DATA to the shared data folder (glue/, vocab/, chunk/, blimp/, pretrain_corpus/)}"
exec "${PYTHON:-.venv/bin/python}" run_comparison.py --output-dir runs/comparison_tiny_v2 \
  --objectives mlm:2,electra:2,electra_15,replace_mlm,all_tokens_mlm --model-size tiny \
  --parallel-jobs "${PAR:-2}" \
  --corpus-dir $DATA/pretrain_corpus/enwiki_2015_wikiextractor \
  --vocab-file $DATA/vocab/bert-base-uncased-vocab.txt \
  --pretrain-hparams '{"train_batch_size": 128, "eval_batch_size": 32, "learning_rate": 0.002, "num_warmup_steps": 1000, "temperature": 1.0, "num_eval_steps": 50, "mixed_precision": "float32"}' \
  --budget-flops 5.9512e15 --num-checkpoints 4 --finetune-checkpoints final \
  --glue-dir $DATA/glue --conll-dir $DATA/chunk \
  --tasks cola,sst,mrpc,sts,rte,chunk,pos --seeds 3 \
  --finetune-hparams '{"max_seq_length": 128, "train_examples_limit": 10000, "learning_rate": 0.001, "mixed_precision": "float32"}' \
  --blimp-dir $DATA/blimp --blimp-limit 50 --scoring-hparams '{"top_k": 10}' "$@"
