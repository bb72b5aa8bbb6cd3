# Two commands set everything up on a fresh machine:
#   make serve   install, run every snippet, build the site, serve it on http://127.0.0.1:8000
#   make test    install, then the whole test suite
# Also: make site (static build into site/), make results (run-all only), make clean.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
EXTRAS ?= site,test,triton
export NO_MKDOCS_2_WARNING := 1
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: install results site serve test clean

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

test: install
	$(BIN)/python -m pytest --codeblocks

clean:
	rm -rf site results .cache
