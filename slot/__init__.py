"""A GPU slot's work (docs/gpu_slot.md): JAX on the device, no TensorFlow.

| file              | what it holds                                       |
|-------------------|-----------------------------------------------------|
| flags.py          | run_gpu_slot.py's flags                             |
| clock.py          | `Clock`: seconds since the command began, and logs  |
| plan.py           | the runs, their configs and steps at equal FLOPs    |
| measure.py        | the PyTorch baseline; fine-tuning steps compiled    |
| pretrain_phase.py | run_pretraining.py: each unit timed, then trained   |
|                   | at equal FLOPs, evaluated; the peak, MFU, targets   |
| finetune_phase.py | each model fine-tuned on each task, seed by seed    |
| run.py            | the phases in order, slot.json after each           |
| carry.py          | CPU side: the wheels, and what a run carries        |
| prepare.py        | CPU side: prepare_gpu_slot.py's exports             |
| collect.py        | CPU side: collect_gpu_slot.py's copies and report   |

What run_gpu_slot.py imports (flags.py to run.py) never imports
TensorFlow: the slot has none.
"""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
