#!/bin/bash
# Issue 50: tiny fine-tuning lr probe with the original's optimizer. Resumable.
cd "$(dirname "$0")/../../../.."  # the clone's root
PY=${PYTHON:-.venv/bin/python}
D=runs/lrprobe
M=$D/models/electra
mkdir -p $D/ft
if [ ! -f $D/data/pretrain_tfrecords/metadata.json ]; then
  $PY build_pretraining_dataset.py --corpus-dir /work/shared/data/pretrain_corpus/enwiki_2015_wikiextractor \
    --vocab-file /work/shared/data/vocab/bert-base-uncased-vocab.txt --output-dir $D/data/pretrain_tfrecords \
    --max-seq-length 128 --num-processes 2 --heldout-fraction 0.02 || exit 1
fi
if [ ! -f $M/ckpt-5000.index ]; then
  P=$(pgrep -f "run_pretraining.py --data-dir runs/lrprobe" | head -1)
  if [ -z "$P" ]; then
    $PY run_pretraining.py --data-dir $D/data --model-dir $M --hparams results/comparison_tiny/lr_probe/v2/pretrain_hparams.json &
    P=$!
  fi
  while kill -0 $P 2>/dev/null; do
    if [ -f $M/ckpt-5000.index ]; then sleep 20; kill $P; break; fi
    sleep 15
  done
  wait $P 2>/dev/null
  while kill -0 $P 2>/dev/null; do sleep 2; done
fi
[ -f $M/ckpt-5000.index ] || exit 1
for seed in 1 2 3; do for task in sts rte mrpc cola sst; do for lr in 0.0003 0.001; do
  out=$D/ft/$task-lr$lr-seed$seed
  [ -f $out.done ] && continue
  $PY run_finetuning.py --init-checkpoint $M/ckpt-5000 --task-names $task --raw-data-dir /work/shared/data/glue \
    --output-dir $out --seed $seed --num-trials 1 --keep-model none --overwrite \
    --hparams "{\"learning_rate\": $lr, \"max_seq_length\": 128, \"mixed_precision\": \"bfloat16\", \"num_train_epochs\": 3.0, \"train_examples_limit\": 10000}" \
    && touch $out.done
done; done; done
echo ALLDONE
