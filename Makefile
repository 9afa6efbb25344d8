# One-command entry points; each creates .venv from scratch when needed.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
QS := runs/quickstart
# When make began: the quickstart summary's "done in".
QS_START := $(shell date +%s)

.PHONY: install quickstart test bench

$(VENV)/.installed: setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q .
	touch $@

# The tests also need their peers (transformers + CPU torch, JAX, jiwer);
# the quickstart does not.
$(VENV)/.installed-test: $(VENV)/.installed
	$(PY) -m pip install -q ".[test]"
	touch $@

install: $(VENV)/.installed

# Raw text -> TFRecords -> tiny ELECTRA -> eval, on the embedded sample.
# The paper's sampling temperature 1.0: in these minutes the generator
# learns and the discriminator stays at the base rate (results/README.md: the
# replaced-token plateau). To see it learn, train a new model hotter (a
# changed temperature on electra_tiny is refused: it would resume its run):
#   .venv/bin/python run_pretraining.py --data-dir runs/quickstart \
#     --model-name electra_tiny_t2 --hparams configs/electra_tiny.json \
#     --temperature 2.0 --do-eval
QS_CONFIG := configs/electra_tiny.json
QS_HPARAMS := --hparams $(QS_CONFIG)
# Extra build_pretraining_dataset.py flags (tests: a few documents).
QS_BUILD_FLAGS :=
# GLUE (a folder holding RTE/) for the printed fine-tuning command:
#   make quickstart GLUE_DIR=~/glue_data
# by default ../shared/data/glue where a clone has it beside it; without
# one the command says what it needs first.
GLUE_DIR ?= $(wildcard ../shared/data/glue)
QS_MODEL := $(QS)/models/electra_tiny

$(QS)/vocab.txt: sample_data/vocab_8k.txt
	mkdir -p $(QS)
	cp sample_data/vocab_8k.txt $@

# metadata.json is written last: its presence means a finished build, so a
# re-run skips the build (and rebuilds when the sample or vocab changes).
$(QS)/pretrain_tfrecords/metadata.json: $(QS)/vocab.txt $(wildcard sample_data/corpus/*) | install
	$(PY) build_pretraining_dataset.py --corpus-dir sample_data/corpus \
	  --vocab-file $(QS)/vocab.txt --output-dir $(QS)/pretrain_tfrecords \
	  --num-processes 1 --overwrite $(QS_BUILD_FLAGS)

# "before training" only when nothing is trained yet: a re-run resumes (or,
# when done, only evaluates) and prints the trained model's metrics once.
# Its results are kept as eval_before.json for the summary's table.
quickstart: install $(QS)/pretrain_tfrecords/metadata.json
	@if [ -f $(QS_MODEL)/checkpoint ]; then \
	  echo "== before training: skipped, $(QS_MODEL) already holds a checkpoint (remove it to start over)"; \
	else \
	  echo "== before training"; \
	  $(PY) run_pretraining.py --data-dir $(QS) --model-name electra_tiny \
	    $(QS_HPARAMS) --no-do-train --do-eval || exit $$?; \
	  cp $(QS_MODEL)/eval_results.json $(QS_MODEL)/eval_before.json; \
	fi
	@echo "== training"
	$(PY) run_pretraining.py --data-dir $(QS) --model-name electra_tiny \
	  $(QS_HPARAMS) --do-eval
	@$(PY) -m pretrain.summary --data-dir $(QS) --model-name electra_tiny \
	  --before $(QS_MODEL)/eval_before.json --started $(QS_START) \
	  --pretrain-hparams $(QS_CONFIG) --glue-dir "$(GLUE_DIR)"

test: $(VENV)/.installed-test
	$(PY) -m pytest -q -n 2 --dist loadfile --durations=15 tests

bench: $(VENV)/.installed-test
	$(PY) benchmarks/pretrain_throughput.py
