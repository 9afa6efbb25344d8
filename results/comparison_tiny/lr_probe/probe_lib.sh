# Shared by v2/run_probe.sh and v3/run_probe.sh, sourced from the clone's
# root with PY set. Both are resumable: run again to go on.
: "${DATA:?set DATA to the shared data folder (glue/, vocab/, pretrain_corpus/)}"

# pretrain_to_5000 MODEL_DIR HPARAMS: pretrains on runs/lrprobe/data until
# ckpt-5000 exists (the schedule runs longer), then stops the run; joins a
# run of that model dir already going. Fails if there is no ckpt-5000.
pretrain_to_5000() {
  local M=$1 H=$2 P
  if [ ! -f $M/ckpt-5000.index ]; then
    P=$(pgrep -f "run_pretraining.py --data-dir runs/lrprobe/data --model-dir $M " | head -1)
    if [ -z "$P" ]; then
      $PY run_pretraining.py --data-dir runs/lrprobe/data --model-dir $M --hparams $H &
      P=$!
    fi
    while kill -0 $P 2>/dev/null; do
      if [ -f $M/ckpt-5000.index ]; then sleep 20; kill $P; break; fi
      sleep 15
    done
    wait $P 2>/dev/null
    while kill -0 $P 2>/dev/null; do sleep 2; done
  fi
  [ -f $M/ckpt-5000.index ]
}

# finetune_probe INIT OUT: fine-tunes INIT on five GLUE tasks at lr 3e-4 and
# 1e-3, 3 seeds each, into OUT/<task>-lr<lr>-seed<seed> (.done when done).
finetune_probe() {
  local init=$1 out
  mkdir -p $2
  for seed in 1 2 3; do for task in sts rte mrpc cola sst; do for lr in 0.0003 0.001; do
    out=$2/$task-lr$lr-seed$seed
    [ -f $out.done ] && continue
    $PY run_finetuning.py --init-checkpoint $init --task-names $task --raw-data-dir $DATA/glue \
      --output-dir $out --seed $seed --num-trials 1 --keep-model none --overwrite \
      --hparams "{\"learning_rate\": $lr, \"max_seq_length\": 128, \"mixed_precision\": \"bfloat16\", \"num_train_epochs\": 3.0, \"train_examples_limit\": 10000}" \
      && touch $out.done
  done; done; done
}
