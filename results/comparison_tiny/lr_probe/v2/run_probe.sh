#!/bin/bash
# Issue 50: tiny fine-tuning lr probe with the original's optimizer. Resumable.
cd "$(dirname "$0")/../../../.."  # the clone's root
PY=${PYTHON:-.venv/bin/python}
. results/comparison_tiny/lr_probe/probe_lib.sh
D=runs/lrprobe
if [ ! -f $D/data/pretrain_tfrecords/metadata.json ]; then
  $PY build_pretraining_dataset.py --corpus-dir $DATA/pretrain_corpus/enwiki_2015_wikiextractor \
    --vocab-file $DATA/vocab/bert-base-uncased-vocab.txt --output-dir $D/data/pretrain_tfrecords \
    --max-seq-length 128 --num-processes 2 --heldout-fraction 0.02 || exit 1
fi
pretrain_to_5000 $D/models/electra results/comparison_tiny/lr_probe/v2/pretrain_hparams.json || exit 1
finetune_probe $D/models/electra/ckpt-5000 $D/ft
echo ALLDONE
