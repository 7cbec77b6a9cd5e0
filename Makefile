# headlab — the two commands of the README: `make run` and `make test`.
# Everything a fresh machine needs is installed here (CI runs `make test` on a clean clone).

PYTHON   ?= python3
VENV     ?= .venv
BIN      := $(VENV)/bin
# torch is installed first and alone, so that no dependency range can pull another build.
TORCH    ?= torch==2.13.0
ONMT     ?= OpenNMT-py==3.5.1
CONFIG   ?= config/config.yaml
CORES    ?= all
PROFILE  ?= profiles/local
SNAKE    := $(BIN)/snakemake --profile $(PROFILE) --configfile $(CONFIG)
STAMP    := $(VENV)/.headlab-installed

export PYTHONDONTWRITEBYTECODE := 1

# the GPU configs executed on CPU: each with its overlay (config/cpu/), merged key by key
GPU_ON_CPU := config/multi30k-gpu.yaml,config/cpu/multi30k-gpu.yaml config/paper.yaml,config/cpu/paper.yaml

.PHONY: setup run test test-fast bench dryrun report clean help gpu-configs-on-cpu gpu-bundle

help:
	@echo "make run    set up, then run the workflow on $(CONFIG) (all tables and figures)"
	@echo "make test   set up, then run the test suite"
	@echo "make bench  set up, then write results/bench/*.csv"
	@echo "make dryrun print the DAG of every shipped config"
	@echo "make gpu-configs-on-cpu  run the whole DAG of both GPU configs on CPU (config/cpu/ overlays)"
	@echo "make gpu-bundle          pack wheels, prepared data and a runner for an offline GPU machine"

setup: $(STAMP)

$(STAMP): pyproject.toml requirements/constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q $(TORCH)
	$(BIN)/python -m pip install -q --no-deps $(ONMT)
	$(BIN)/python -m pip install -q -c requirements/constraints.txt -e '.[test,parse,indic,parsers]'
	$(BIN)/python -c "import torch, onmt, headlab; print('torch', torch.__version__)"
	touch $@

run: setup
	$(SNAKE) --cores $(CORES)

test: setup
	$(BIN)/python -m pytest -ra

test-fast: setup
	$(BIN)/python -m pytest -ra -m "not slow"

bench: setup
	$(SNAKE) --cores $(CORES) results/data/multi30k/de-en/full/vocab.txt
	$(BIN)/python -m headlab.bench --out results/bench

dryrun: setup
	$(BIN)/snakemake -n --quiet rules --configfile config/config.yaml
	$(BIN)/snakemake -n --quiet rules --configfile config/multi30k-gpu.yaml
	$(BIN)/snakemake -n --quiet rules --configfile config/paper.yaml
	for pair in $(GPU_ON_CPU) config/multi30k-gpu.yaml,config/gpu-30min.yaml; do \
	  $(BIN)/snakemake -n --quiet rules --configfile $$(echo $$pair | tr , ' ') || exit 1; \
	done

gpu-configs-on-cpu: setup
	for pair in $(GPU_ON_CPU); do \
	  $(BIN)/snakemake --profile $(PROFILE) --cores $(CORES) --configfile $$(echo $$pair | tr , ' ') || exit 1; \
	done

gpu-bundle: setup
	$(BIN)/headlab gpu-bundle --out gpu-bundle

report: setup
	$(SNAKE) --cores $(CORES) --report report.html

clean:
	rm -rf .snakemake results/work results/tables results/paper_A results/cpu results/gpu gpu-bundle report.html
