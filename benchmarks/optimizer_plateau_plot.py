"""The tiny ELECTRA pretraining of lr probes v2 (the original's optimizer)
and v3 (Keras' bias-corrected AdamW), otherwise identical, from their
committed records: train disc_skill and generator MLM loss every 200
steps, with the held-out discriminator AUC at steps 2,500 and 5,000.

  python benchmarks/optimizer_plateau_plot.py results/comparison_tiny/lr_probe
"""

import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(folder):
  v2 = json.load(open(os.path.join(folder, "v2", "pretrain.json")))
  v3 = json.load(open(os.path.join(folder, "v3", "pretrain.json")))
  sides = {"the original's optimizer (default)": (v2["train"], "default"),
           "Keras' AdamW (optimizer: adamw)": (v3["train"], "adamw")}
  fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
  for label, (train, key) in sides.items():
    steps = sorted(int(s) for s in train)
    for ax, metric in zip(axes, ("disc_skill", "mlm_loss")):
      ax.plot(steps, [train[str(s)][metric] for s in steps], label=label)
    aucs = [v3["evals"][f"{key}_ckpt-{s}"]["disc_auc"] for s in (2500, 5000)]
    print(f"{label}: held-out disc AUC at 2500, 5000: "
          f"{aucs[0]:.4f}, {aucs[1]:.4f}")
  axes[0].set_title("train disc_skill")
  axes[1].set_title("train generator MLM loss")
  for ax in axes:
    ax.set_xlabel("step")
  axes[0].legend(fontsize=8)
  fig.suptitle(f"ELECTRA tiny, batch 128, lr 2e-3 [{v3['machine']}]",
               fontsize=9)
  fig.tight_layout()
  out = os.path.join(folder, "v3", "plateau.png")
  fig.savefig(out, dpi=80)
  print("wrote", out)


if __name__ == "__main__":
  main(sys.argv[1])
