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

.PHONY: setup browser run test test-fast bench dryrun report clean help gpu-configs-on-cpu gpu-bundle gpu-rehearsal gpu-rehearsal-plan

help:
	@echo "make run    set up, then run the workflow on $(CONFIG) (all tables and figures)"
	@echo "make test   set up, then run the test suite"
	@echo "make bench  set up, then write results/bench/*.csv (BENCH=\"--what parts\": its options)"
	@echo "make dryrun print the DAG of every shipped config"
	@echo "make test-fast  the tests without the slow end-to-end runs"
	@echo "make report  snakemake's HTML report of the last run (report.html)"
	@echo "make docs   the Sphinx site (docs/_build/html)"
	@echo "make clean  remove every output under results/ but published/ (a later run starts anew)"
	@echo "make gpu-configs-on-cpu  run the whole DAG of both GPU configs on CPU (config/cpu/ overlays)"
	@echo "make gpu-bundle          the GPU sitting's bundle of the plan's next slice (SLICE=NAME: that one; prints its command)"
	@echo "make gpu-rehearsal       the sitting on this CPU, in a venv of the GPU machine's Python and packages"
	@echo "make gpu-rehearsal-plan  every slice of config/gpu-plan.yaml rehearsed in turn (~6 min each)"

setup: $(STAMP)

# Set-up says what it does in a few lines; each step's own output goes to $(SETUP_LOG) and is
# shown only when the step fails. pip's "ERROR: pip's dependency resolver ..." about
# OpenNMT-py's pins (torch<2.3, ctranslate2, flask, waitress) comes with exit status 0: they
# are bypassed on purpose (--no-deps; headlab.engine.compat runs OpenNMT-py on this torch), so
# it stays in the log; `pip check` then reports any OTHER conflict on screen.
SETUP_LOG := $(VENV)/setup.log
EXTRAS    := test,parse,indic,parsers,docs
step = echo "setup: $(1)"; $(2) >> $(SETUP_LOG) 2>&1 || { echo "setup: FAILED: $(1); the end of $(SETUP_LOG):" >&2; tail -n 30 $(SETUP_LOG) >&2; exit 1; }

$(STAMP): pyproject.toml requirements/constraints.txt
	@test -x $(BIN)/python || { echo "setup: virtual environment $(VENV) ($(PYTHON) -m venv)"; $(PYTHON) -m venv $(VENV); }
	@: > $(SETUP_LOG)
	@$(call step,$(TORCH) (installed first and alone: no dependency range can pull another build),$(BIN)/python -m pip install -q $(TORCH))
	@$(call step,$(ONMT) without its dependency pins (they ask for torch<2.3),$(BIN)/python -m pip install -q --no-deps $(ONMT))
	@$(call step,headlab (editable) and its dependencies,$(BIN)/python -m pip install -q -c requirements/constraints.txt -e '.[$(EXTRAS)]')
	@$(BIN)/python -m pip check 2>/dev/null | grep -v -i -e '^opennmt-py ' -e '^No broken requirements' | sed 's/^/setup: dependency conflict: /' >&2 || true
	@$(BIN)/python -c "import headlab.engine.plugin, torch, onmt; print('setup: ready: torch', torch.__version__, '+ OpenNMT-py', onmt.__version__, '+ headlab (log: $(SETUP_LOG))')"
	@touch $@

# The config files are read first (snakemake's own error for a YAML syntax error, an empty
# or a missing file names no line: headlab.workflow.configfile). A lock left by a killed run
# is cleared next (a live run's stops here); when snakemake fails, the failed jobs are listed
# with their logs (headlab.workflow.runlock) and make fails too.
run: setup
	@$(BIN)/python -m headlab.workflow.configfile $(CONFIG)
	@$(BIN)/python -m headlab.workflow.runlock unlock
	start=$$(date +%s); $(SNAKE) --cores $(CORES) || $(BIN)/python -m headlab.workflow.runlock failures --since $$start

# Test files run on TEST_WORKERS processes (pytest-xdist, one file per worker at a time: a
# module's fixtures are built once); the slowest tests are listed at the end, by wall time
# and by CPU with their subprocesses (tests/cputime.py: what to cut when the suite runs
# long on two cores is the CPU, not the wall time of a test that waited). Three on two
# cores: the SLURM run's worker mostly waits for the executor's polls (~14 s a job); whether
# this beats two is within this VM's run-to-run spread (the README's timing table has the runs).
TEST_WORKERS ?= 3
PYTEST := $(BIN)/python -m pytest -ra -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15 --cpu-durations=15

# the atlas browser test's Chromium (Debian's, with its driver): installed when missing and
# root; make test requires it (the test fails instead of skipping without it)
browser:
	@test -x /usr/bin/chromium -a -x /usr/bin/chromedriver || { test "$$(id -u)" = 0 && command -v apt-get > /dev/null \
	  && echo "setup: chromium + chromium-driver (apt-get, for the atlas browser test)" \
	  && DEBIAN_FRONTEND=noninteractive apt-get update -qq >> $(SETUP_LOG) 2>&1 \
	  && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >> $(SETUP_LOG) 2>&1; } \
	  || echo "setup: no /usr/bin/chromium: install Debian's chromium chromium-driver, or the atlas browser test fails" >&2

# OMP_WAIT_POLICY=PASSIVE: three workers on two cores run several trainings at once, each
# with OpenMP threads that would spin at every barrier waiting for a descheduled sibling,
# CPU time taken from the other tests; passive threads sleep instead (results unchanged)
test: setup browser
	HEADLAB_REQUIRE_BROWSER=1 OMP_WAIT_POLICY=PASSIVE $(PYTEST)

test-fast: setup
	$(PYTEST) -m "not slow"

# the documentation site (docs/): warnings are errors, as in make test (tests/test_docs.py)
.PHONY: docs
docs: setup
	$(BIN)/sphinx-build -W --keep-going -q -b html docs docs/_build/html
	@echo "docs: docs/_build/html/index.html"

bench: setup
	$(SNAKE) --cores $(CORES) results/data/multi30k/de-en/full/vocab.txt
	$(BIN)/python -m headlab.bench --out results/bench $(BENCH)

dryrun: setup
	$(BIN)/snakemake -n --quiet rules --configfile config/config.yaml
	$(BIN)/snakemake -n --quiet rules --configfile config/multi30k-gpu.yaml
	$(BIN)/snakemake -n --quiet rules --configfile config/paper.yaml
	for pair in $(GPU_ON_CPU) config/multi30k-gpu.yaml,config/gpu-sitting.yaml config/config.yaml,config/wide.yaml; do \
	  $(BIN)/snakemake -n --quiet rules --configfile $$(echo $$pair | tr , ' ') || exit 1; \
	done

gpu-configs-on-cpu: setup
	for pair in $(GPU_ON_CPU); do \
	  $(BIN)/snakemake --profile $(PROFILE) --cores $(CORES) --configfile $$(echo $$pair | tr , ' ') || exit 1; \
	done

# the GPU plan's next slice (config/gpu-plan.yaml, read against results/published/), or SLICE=NAME
SLICE ?=
gpu-bundle: setup
	$(BIN)/headlab gpu-bundle --out gpu-bundle $(if $(SLICE),--slice $(SLICE))

# the sitting rehearsed on the CPU (src/headlab/workflow/rehearsal.py): a venv of CPython 3.12
# with the GPU machine's torch, numpy and other packages (requirements/gpu-machine.txt)
REHEARSAL_BUDGET ?= 300
gpu-rehearsal: gpu-bundle
	$(BIN)/python -m headlab.workflow.rehearsal --bundle gpu-bundle --venv .venv-rehearsal --budget $(REHEARSAL_BUDGET)

# every slice of the plan rehearsed in turn (~6 min each): what each later sitting will meet,
# found before a GPU minute is spent on it (the bundle left behind is the last slice's)
gpu-rehearsal-plan: setup
	for slice in $$($(BIN)/python -c "from headlab.workflow import gpu_plan; print(*(s.name for s in gpu_plan.load().slices))"); do \
	  $(MAKE) --no-print-directory gpu-rehearsal SLICE=$$slice || exit 1; \
	done

report: setup
	$(SNAKE) --cores $(CORES) --report report.html

# everything the workflow wrote under results/ (data, models, scores, tables, atlas, every
# study's folder) but published/, which git tracks; a run after it starts from scratch
clean:
	find results -mindepth 1 -maxdepth 1 ! -name published -exec rm -rf {} +
	rm -rf .snakemake gpu-bundle report.html
