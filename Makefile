# Two commands set everything up on a fresh machine:
#   make serve      install, run every snippet, build the site, serve it on 127.0.0.1:8000
#                   (a snippet that fails is named, and its note says so: --keep-going)
#   make test       install, then ruff (lint, format) and the whole test suite
# Also: make site (static build into site/), make results (run-all only), make clean,
#   make check-machines  run-all on the plainest, busiest CPU a reader may have, and
#   make gpu-check  on a machine with one CUDA GPU: every GPU test, the attention
#                   TFLOP/s and the GPU snippets' results in under 8 minutes, with a
#                   report in results/gpu_check.md. Where torch is already installed and
#                   there is no network: make gpu-check GPU_PYTHON=python3

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
EXTRAS ?= site,test,triton
export NO_MKDOCS_2_WARNING := 1
export PATH := $(CURDIR)/$(BIN):$(PATH)

# The Python gpu-check runs under: this venv (installed first), or one named on the line.
GPU_PYTHON ?= $(BIN)/python

.PHONY: install results site serve test lint check-machines gpu-check clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[$(EXTRAS)]"
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

install: $(BIN)/.installed node_modules/.installed

results: install
	$(BIN)/python -m snippets run-all

site: results
	$(BIN)/mkdocs build --strict

# A reader's machine: a snippet that fails leaves a placeholder for its note, not an
# error that takes the site down. make site, make results and make test stay strict.
serve: install
	$(BIN)/python -m snippets run-all --keep-going
	$(BIN)/mkdocs serve --strict --dev-addr 127.0.0.1:8000

# Python by ruff; the site's JavaScript (ES modules) by Biome (biome.json).
lint: $(BIN)/.installed node_modules/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	node_modules/.bin/biome ci docs/assets tests/js hooks/typeset.js

# The suite runs in TEST_JOBS processes, each test file whole in one of them (a file's
# fixtures launch ranks once). run-all starts first and runs beside the suite: a test
# that reads results/ waits for it (one run-all writes a results folder at a time) and
# then finds every result cached. Its timed snippets are so measured on a busy machine,
# which their observations render as found; `make clean results` times a quiet one.
# The JavaScript ports of the sizing formulas and the viewer's overlay are held to
# goldens the Python writes now. run-all's report follows the suite's; either failing
# fails the target. The suite's workers and run-all's two jobs share the cores: each
# process gets its share of intra-op threads (one each on a 2-core machine), as ranks
# do, since threads that spin waiting for a sibling without a core cost many times the
# work (unless OMP_NUM_THREADS is set).
TEST_JOBS ?= 3

test: install lint
	@mkdir -p .cache
	@share=$$(( $$(getconf _NPROCESSORS_ONLN) / ($(TEST_JOBS) + 2) )); \
	export OMP_NUM_THREADS=$${OMP_NUM_THREADS:-$$(( share > 0 ? share : 1 ))}; \
	$(BIN)/python -m snippets run-all > .cache/run-all.log 2>&1 & runall=$$!; \
	PYTHONPATH=$(CURDIR) $(BIN)/python tests/js/write_goldens.py && \
	node --test tests/js/ && \
	$(BIN)/python -m pytest --codeblocks -n $(TEST_JOBS) --dist loadfile \
		--no-loadscope-reorder --durations=20; \
	suite=$$?; \
	wait $$runall; ran=$$?; cat .cache/run-all.log; \
	test $$suite -eq 0 && test $$ran -eq 0

# Every law must hold on any reader's CPU: run-all --force with torch's portable kernels
# only (no AVX2/AVX-512 paths), one intra-op thread, and one core kept busy by another
# program, all at once, into CHECK_DIR (results/ is untouched). The busy loop is killed
# however run-all ends, and ends by itself if this shell is gone. Exits non-zero if
# run-all fails. CHECK_ONLY="name ..." checks just those snippets; CHECK_OBSERVING=1 just
# the snippets that check an observation (what CI runs before make test).
CHECK_DIR  ?= .cache/check-machines
CHECK_ONLY ?=
CHECK_OBSERVING ?=

check-machines: install
	@sh -c 'while kill -0 $$PPID 2>/dev/null; do :; done' & busy=$$!; \
	trap 'kill $$busy 2>/dev/null' EXIT; trap 'exit 130' INT TERM HUP; \
	ATEN_CPU_CAPABILITY=default OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
	$(BIN)/python -m snippets run-all --force --results $(CHECK_DIR) \
		$(if $(strip $(CHECK_ONLY)),--only $(CHECK_ONLY)) \
		$(if $(strip $(CHECK_OBSERVING)),--observing)

gpu-check: $(if $(filter $(BIN)/python,$(GPU_PYTHON)),$(BIN)/.installed)
	$(GPU_PYTHON) -m snippets.tools.gpu_check

clean:
	rm -rf site results .cache
