# Moldau's entry points. A fresh Debian 12 machine needs only `make cluster` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SHARED ?= $(abspath ../shared)

.PHONY: help test lint unit codegen-check generate bench cluster cluster-down deps clean

help:
	@echo "make cluster   start the local development cluster (ZooKeeper + a broker on :9092)"
	@echo "make cluster-down  stop it"
	@echo "make test      install what the tests need, then run every suite (lint, codegen, unit)"
	@echo "make bench     run every benchmark suite in bench/ and rewrite docs/benchmarks.md"
	@echo "make generate  regenerate the protocol messages from $(SHARED)/kafka-protocol"

# The virtualenv is rebuilt when the dependencies change; the stamp records the install.
$(BIN)/.installed: broker/pyproject.toml scripts/debian-packages.txt
	@scripts/install-debian-packages scripts/debian-packages.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
		|| { echo "Moldau needs Python >= 3.11 ($(PYTHON) is older)"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e 'broker[test,bench]'
	@touch $@

deps: $(BIN)/.installed

test: deps
	@scripts/run-suites \
		"lint:$(BIN)/ruff check ." \
		"codegen:scripts/check-codegen $(SHARED)/kafka-protocol" \
		"unit:$(BIN)/pytest broker/tests -q -p no:cacheprovider"

lint: deps
	$(BIN)/ruff check .

generate: deps
	cd broker && ../$(BIN)/python -m codegen --protocol $(SHARED)/kafka-protocol

# ONLY=<suite> (or a space-separated list) rewrites only those sections of docs/benchmarks.md.
bench: deps
	MOLDAU_BENCH_VIA_MAKE=1 $(BIN)/python bench/run.py $(foreach suite,$(ONLY),--only $(suite))

# The development cluster: a ZooKeeper node and a broker on 127.0.0.1:9092, state in
# .moldau-dev/ (moldau dev-cluster status|down). PORT=... moves the broker.
PORT ?= 9092
cluster: deps
	$(BIN)/moldau dev-cluster up --port $(PORT)

cluster-down: deps
	$(BIN)/moldau dev-cluster down

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .moldau-dev
