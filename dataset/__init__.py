"""Building pretraining datasets: reading corpora (`corpus`), packing
sentences into `[CLS] A [SEP] B [SEP]` examples (`example_builder`), and the
build itself, raw text -> sharded TFRecords + metadata.json (`config`,
`build`; the CLI is build_pretraining_dataset.py)."""
