"""Building pretraining datasets, raw text -> sharded TFRecords +
metadata.json: finding a corpus's files (`corpus_files`), reading them as
cleaned lines (`text_lines`) and documents (`corpus`), splitting sentences
(`sentences`), packing them into `[CLS] A [SEP] B [SEP]` examples
(`example_builder`), one job's writing of them (`example_writer`), the
output directory (`output_files`), metadata.json and the closing report
(`metadata`), and the build itself (`config`, `build`; the CLI is
build_pretraining_dataset.py)."""
