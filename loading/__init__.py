"""The loading layer: a pretrained model as the scripts open it, whatever
its format, above `pretrain` and `interop`.

| file        | what it holds                                                |
|-------------|--------------------------------------------------------------|
| runs.py     | one of our runs: find it (its config and latest checkpoint), |
|             | restore its model (or a Source's networks), its tokenizer    |
| sources.py  | any format (ours, transformers, KerasHub, the TF1 release,   |
|             | SavedModel, .keras) as one Source; `find_pretrained`         |
| scoring.py  | `load_run`: (hparams, model, tokenizer) as scoring needs it  |
| finetuned.py| a fine-tuned model's folder (run_finetuning.py keeps it):    |
|             | its record, weights and vocabulary, read and written        |

It imports `pretrain` (a run's config file: pretrain/run_config.py) and
`interop` (the formats themselves); neither imports it. Fine-tuning
(`finetune/`) and export_model.py read fine-tuned models through
finetuned.py, which imports no fine-tuning code (finetune/model.py builds
the Keras model from what it reads). run_pretraining.py
hands `sources.open_source` to the pretraining Trainer for init_checkpoint.
"""
