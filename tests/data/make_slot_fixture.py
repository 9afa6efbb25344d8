"""Writes the two slot calls behind tests/data/slot_results/, a small
stand-in for results/comparison_tiny_gpu (RTE only, three runs, two
records) that tests/test_slot_records.py scores in seconds. From the
repository root, then (its finetune.json's paths made another machine's):

  python collect_gpu_slot.py tests/data/slot_results/source/call1 \
    tests/data/slot_results/source/call2 --output-dir tests/data/slot_results \
    --finetune-data tests/data/slot_results/source --glue-dir GLUE \
    --vocab-file VOCAB && rm -r tests/data/slot_results/source
"""

import json
import os

import numpy as np

SOURCE = "results/comparison_tiny_gpu"
OUT = "tests/data/slot_results/source"
TASK = "rte"
# (record of the source, the runs kept from it)
RECORDS = ((3, ("bert_tiny.seed3", "electra_tiny.seed3")),
           (4, ("replace_mlm_tiny.seed3",)))


def main():
  with open(os.path.join(SOURCE, "finetune.json")) as f:
    meta = json.load(f)
  meta["tasks"] = {TASK: meta["tasks"][TASK]}
  meta["config"]["task_names"] = TASK
  os.makedirs(OUT, exist_ok=True)
  with open(os.path.join(OUT, "finetune.json"), "w") as f:
    json.dump(meta, f, indent=2)
  for k, (number, runs) in enumerate(RECORDS, 1):
    folder = os.path.join(OUT, f"call{k}")
    os.makedirs(folder, exist_ok=True)
    record = os.path.join(SOURCE, "records", str(number))
    with open(os.path.join(record, "slot.json")) as f:
      slot = json.load(f)
    slot["objectives"] = [e for e in slot["objectives"]
                          if e["folder"] in runs]
    slot["finetune"] = [t for t in slot["finetune"]
                        if t["model"] in runs and t["task"] == TASK]
    with open(os.path.join(folder, "slot.json"), "w") as f:
      json.dump(slot, f, indent=2)
    with np.load(os.path.join(record, "finetune_outputs.npz")) as data:
      kept = {key: data[key] for key in data.files
              if key.split("/")[0] in runs and key.split("/")[1] == TASK}
    np.savez_compressed(os.path.join(folder, "finetune_outputs.npz"), **kept)


if __name__ == "__main__":
  main()
