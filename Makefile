# Two commands set everything up on a fresh machine:
#   make serve      install, run every snippet, build the site, serve it on 127.0.0.1:8000
#   make test       install, then ruff (lint, format) and the whole test suite
# Also: make site (static build into site/), make results (run-all only), make clean, and
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

.PHONY: install results site serve test lint gpu-check clean

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

serve: results
	$(BIN)/mkdocs serve --strict --dev-addr 127.0.0.1:8000

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The suite runs in TEST_JOBS processes, each test file whole in one of them (a file's
# fixtures launch ranks once). run-all goes first, alone: its benchmarks time on a quiet
# machine, and the suite then finds every result cached. The JavaScript ports of the
# sizing formulas and the viewer's overlay are held to goldens the Python writes now.
TEST_JOBS ?= 2

test: install lint
	$(BIN)/python -m snippets run-all
	PYTHONPATH=$(CURDIR) $(BIN)/python tests/js/write_goldens.py
	node --test tests/js/
	$(BIN)/python -m pytest --codeblocks -n $(TEST_JOBS) --dist loadfile

gpu-check: $(if $(filter $(BIN)/python,$(GPU_PYTHON)),$(BIN)/.installed)
	$(GPU_PYTHON) -m snippets.core.gpu_check

clean:
	rm -rf site results .cache
