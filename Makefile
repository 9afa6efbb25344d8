# One-command entry points; each creates .venv from scratch when needed.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
QS := runs/quickstart

.PHONY: install quickstart test bench

$(VENV)/.installed: setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $@

# The tests also need their peers (transformers + CPU torch, JAX, jiwer);
# the quickstart does not.
$(VENV)/.installed-test: $(VENV)/.installed
	$(PY) -m pip install -q -e ".[test]"
	touch $@

install: $(VENV)/.installed

# Raw text -> TFRecords -> tiny ELECTRA -> eval, on the embedded sample.
# Sampling temperature 2: in a few CPU minutes a 2-layer discriminator can
# learn to spot hotter samples; at 1.0 (the paper's) it needs far longer.
QS_HPARAMS := --hparams configs/electra_tiny.json --hparams '{"temperature": 2.0}'
quickstart: install
	mkdir -p $(QS)
	cp sample_data/vocab_8k.txt $(QS)/vocab.txt
	$(PY) build_pretraining_dataset.py --corpus-dir sample_data/corpus \
	  --vocab-file $(QS)/vocab.txt --output-dir $(QS)/pretrain_tfrecords \
	  --num-processes 1 --overwrite
	@echo "== before training"
	$(PY) run_pretraining.py --data-dir $(QS) --model-name electra_tiny \
	  $(QS_HPARAMS) --no-do-train --do-eval
	@echo "== training"
	$(PY) run_pretraining.py --data-dir $(QS) --model-name electra_tiny \
	  $(QS_HPARAMS) --do-eval

test: $(VENV)/.installed-test
	$(PY) -m pytest -q tests

bench: $(VENV)/.installed-test
	$(PY) benchmarks/pretrain_throughput.py
