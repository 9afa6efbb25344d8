"""The loading layer: a pretrained model as the scripts open it, whatever
its format, above `pretrain` and `interop`.

| file        | what it holds                                                |
|-------------|--------------------------------------------------------------|
| runs.py     | one of our runs: find it (its config and latest checkpoint), |
|             | restore its model (or a Source's networks), its tokenizer    |
| sources.py  | any format (ours, transformers, KerasHub, the TF1 release,   |
|             | SavedModel, .keras) as one Source; `find_pretrained`         |
| scoring.py  | `load_run`: (hparams, model, tokenizer) as scoring needs it  |

It imports `pretrain` (a run's config file: pretrain/run_config.py) and
`interop` (the formats themselves); neither imports it. run_pretraining.py
hands `sources.open_source` to the pretraining Trainer for init_checkpoint.
"""
