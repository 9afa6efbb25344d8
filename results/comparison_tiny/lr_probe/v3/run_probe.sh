#!/bin/bash
# Issue 50: the v2 probe's pretraining with Keras' AdamW (optimizer: adamw, all else equal), held-out evals
# of both runs' checkpoints 2500 and 5000, then the tiny fine-tuning lr probe on this run's ckpt-5000
# (fine-tuning with the default, the original's optimizer). Resumable. Run from the clone's root,
# after v2's run_probe.sh has built runs/lrprobe/data (and, for the default_* evals, its pretraining).
cd "$(dirname "$0")/../../../.."  # the clone's root
PY=${PYTHON:-.venv/bin/python}
V=results/comparison_tiny/lr_probe
M=runs/optprobe/models/adamw
[ -f runs/lrprobe/data/pretrain_tfrecords/metadata.json ] || { echo "run $V/v2/run_probe.sh first"; exit 1; }
if [ ! -f $M/ckpt-5000.index ]; then
  $PY run_pretraining.py --data-dir runs/lrprobe/data --model-dir $M --hparams $V/v3/pretrain_hparams.json &
  P=$!
  while kill -0 $P 2>/dev/null; do
    if [ -f $M/ckpt-5000.index ]; then sleep 20; kill $P; break; fi
    sleep 15
  done
  wait $P 2>/dev/null
  while kill -0 $P 2>/dev/null; do sleep 2; done
fi
[ -f $M/ckpt-5000.index ] || exit 1
mkdir -p runs/optprobe/eval runs/optprobe/ft
for c in adamw:$M/ckpt-2500 adamw:$M/ckpt-5000 default:runs/lrprobe/models/electra/ckpt-2500 default:runs/lrprobe/models/electra/ckpt-5000; do
  name=${c%%:*}; ck=${c#*:}; out=runs/optprobe/eval/${name}_$(basename $ck).txt
  H=$V/v3/pretrain_hparams.json; [ $name = default ] && H=$V/v2/pretrain_hparams.json
  [ -s $out ] || [ ! -f $ck.index ] && continue
  $PY run_pretraining.py --data-dir runs/lrprobe/data --model-dir $(dirname $ck) --hparams $H \
    --no-do-train --do-eval --eval-checkpoint $ck > $out.tmp 2>&1 && mv $out.tmp $out
done
for seed in 1 2 3; do for task in sts rte mrpc cola sst; do for lr in 0.0003 0.001; do
  out=runs/optprobe/ft/$task-lr$lr-seed$seed
  [ -f $out.done ] && continue
  $PY run_finetuning.py --init-checkpoint $M/ckpt-5000 --task-names $task --raw-data-dir /work/shared/data/glue \
    --output-dir $out --seed $seed --num-trials 1 --keep-model none --overwrite \
    --hparams "{\"learning_rate\": $lr, \"max_seq_length\": 128, \"mixed_precision\": \"bfloat16\", \"num_train_epochs\": 3.0, \"train_examples_limit\": 10000}" \
    && touch $out.done
done; done; done
echo ALLDONE
