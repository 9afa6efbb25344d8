#!/bin/bash
# Issue 50: the v2 probe's pretraining with Keras' AdamW (optimizer: adamw, all else equal), held-out evals
# of both runs' checkpoints 2500 and 5000, then the tiny fine-tuning lr probe on this run's ckpt-5000
# (fine-tuning with the default, the original's optimizer). Resumable. Run from the clone's root,
# after v2's run_probe.sh has built runs/lrprobe/data (and, for the default_* evals, its pretraining).
cd "$(dirname "$0")/../../../.."  # the clone's root
PY=${PYTHON:-.venv/bin/python}
. results/comparison_tiny/lr_probe/probe_lib.sh
V=results/comparison_tiny/lr_probe
M=runs/optprobe/models/adamw
[ -f runs/lrprobe/data/pretrain_tfrecords/metadata.json ] || { echo "run $V/v2/run_probe.sh first"; exit 1; }
pretrain_to_5000 $M $V/v3/pretrain_hparams.json || exit 1
mkdir -p runs/optprobe/eval
for c in adamw:$M/ckpt-2500 adamw:$M/ckpt-5000 default:runs/lrprobe/models/electra/ckpt-2500 default:runs/lrprobe/models/electra/ckpt-5000; do
  name=${c%%:*}; ck=${c#*:}; out=runs/optprobe/eval/${name}_$(basename $ck).txt
  H=$V/v3/pretrain_hparams.json; [ $name = default ] && H=$V/v2/pretrain_hparams.json
  [ -s $out ] || [ ! -f $ck.index ] && continue
  $PY run_pretraining.py --data-dir runs/lrprobe/data --model-dir $(dirname $ck) --hparams $H \
    --no-do-train --do-eval --eval-checkpoint $ck > $out.tmp 2>&1 && mv $out.tmp $out
done
finetune_probe $M/ckpt-5000 runs/optprobe/ft
echo ALLDONE
