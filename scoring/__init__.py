"""Scoring text with a pretrained model: pseudo-log-likelihoods (PLLs).

| file            | what it holds                                           |
|-----------------|---------------------------------------------------------|
| config.py       | `ScoringConfig`, run_scoring.py's one config dataclass  |
| estimators.py   | model side (keras.ops): each objective's PLL pieces     |
| pll.py          | `Scorer`: a pretraining run -> batched per-token PLLs   |
| blimp.py        | BLiMP minimal pairs: accuracy of PLL(good) > PLL(bad)   |
| nbest.py        | n-best rescoring: acoustic + lambda * PLL, WER (jiwer)  |
| run.py          | run_scoring.py's work: inputs checked, scored, printed  |

PLL estimators, by objective (method):
  * electric: sum_t -E(x)_t, one pass (Electric paper section 3.2);
  * script: sum_t log p(real_t | x), one pass (SCRIPT paper section 3.2);
  * mlm: Salazar et al. (2020), one pass per token with it masked;
  * electra: ELECTRA paper appendix G, per masked token over the
    generator's top-k candidates (see estimators.py and pll.py).
"""
