"""The report's plots carry titles, axis labels and each row's seed counts
in the legend (issue 51)."""

from matplotlib.figure import Figure

from comparison import report


def test_plots_say_what_they_show(tmp_path, monkeypatch):
  saved = []
  monkeypatch.setattr(Figure, "savefig",
                      lambda fig, path, **kw: saved.append(fig))
  point = {"flops": 1e15, "glue_score": 50.0, "glue_seeds": [49.0, 51.0],
           "eval": {"disc_auc": 0.8, "masked_lm_accuracy": 0.2}}
  results = {"model_size": "tiny", "budget_flops": 5.95e15, "seeds": 2,
             "objectives": {"electra": {"pretrain_seeds": 3,
                                        "checkpoints": [point]},
                            "mlm": {"pretrain_seeds": 2,
                                    "checkpoints": [point]}},
             "baseline": {"glue_score": 34.4}}
  report.plot(results, str(tmp_path / "g.png"), str(tmp_path / "c.png"))
  glue, curves = saved
  for fig in saved:
    for ax in fig.axes:
      assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
  labels = [t.get_text() for t in glue.axes[0].get_legend().get_texts()]
  assert "electra (3 pretraining x 2 fine-tuning seeds)" in labels
  assert "mlm (2 pretraining x 2 fine-tuning seeds)" in labels
  assert "5.95e+15 train FLOPs each" in glue.axes[0].get_title()
  labels = [t.get_text() for t in curves.axes[0].get_legend().get_texts()]
  assert "electra (mean of 3 pretraining seeds)" in labels
