#!/usr/bin/env bash
# The prepared command of a GPU slot (docs/gpu_slot.md): on the device
# machine, in the repository root, with .whl and .slot_data carried:
#   bash gpu_slot.sh [run_gpu_slot.py flags]
# Installs the carried wheels (keras and what the slot lacks), then runs
# run_gpu_slot.py, its log teed to $OUT/slot.log. Prepare both folders on
# the CPU machine first: python prepare_gpu_slot.py --data-dir DATA_DIR.
# SLOT_USE_INSTALLED_KERAS=1 skips the wheels (a machine that has keras:
# the CPU test); SLOT_PYTHON picks the interpreter (default python3);
# SLOT_WHEELS and SLOT_DATA other folders than .whl and .slot_data.
set -o pipefail
STARTED=$(date +%s.%N)
cd "$(dirname "$0")" || exit 2
if [ -z "${OUT:-}" ]; then
  echo "error: set OUT to the folder whose files come back" >&2; exit 2
fi
PY=${SLOT_PYTHON:-python3}
DATA=${SLOT_DATA:-.slot_data}
WHEELS=${SLOT_WHEELS:-.whl}
if [ "${SLOT_USE_INSTALLED_KERAS:-0}" != 1 ]; then
  if ! ls "$WHEELS"/keras-*.whl >/dev/null 2>&1; then
    echo "error: no keras wheel in $WHEELS/: run 'python" \
         "prepare_gpu_slot.py --wheels' on the CPU machine and name" \
         "$WHEELS in the run's carry" >&2
    exit 2
  fi
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
      --upgrade --target /tmp/site "$WHEELS"/*.whl || {
    echo "error: pip could not install $WHEELS/*.whl" >&2; exit 2; }
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
if [ ! -f "$DATA/arrays.json" ] && [ ! -f "$DATA/finetune/finetune.json" ]; then
  echo "error: no pretraining arrays in $DATA/: run 'python" \
       "prepare_gpu_slot.py --data-dir DATA_DIR' on the CPU machine and" \
       "name $DATA in the run's carry" >&2
  exit 2
fi
mkdir -p "$OUT" || exit 2
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
KERAS_BACKEND=jax PYTHONUNBUFFERED=1 "$PY" run_gpu_slot.py --data "$DATA" \
    --out "$OUT" --started-at "$STARTED" "$@" 2>&1 | tee "$OUT/slot.log"
