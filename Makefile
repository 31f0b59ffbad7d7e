# Moldau's entry points. A fresh Debian 12 machine needs only `make cluster` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SHARED ?= $(abspath ../shared)

.PHONY: help test test-long lint unit codegen-check generate bench cluster cluster-down deps clean
.PHONY: debian-deps deploy-deps molecule dev-cluster dev-cluster-down
.PHONY: spark-deps spark-connector pipeline-demo

help:
	@echo "make cluster   seven systemd hosts in Docker (3 ZooKeeper + 3 brokers + monitoring) set up by playbooks/site.yml with TLS"
	@echo "make cluster-down  remove them"
	@echo "make test      install what the tests need, then run every suite (docs/development.md)"
	@echo "make test-long the soak-length checks CI does not run (before resolving an issue)"
	@echo "make bench     run every benchmark suite in bench/ and rewrite docs/benchmarks.md"
	@echo "make generate  regenerate the protocol messages from $(SHARED)/kafka-protocol"
	@echo "make dev-cluster  a ZooKeeper node and a broker on 127.0.0.1:9092, as local processes"
	@echo "make dev-cluster-down  stop them"
	@echo "make pipeline-demo  the Spark sensor pipeline (pipeline/examples) against the dev cluster"

# The Debian packages, before either venv (scripts/install-debian-packages installs only
# what is missing, so this is quick when nothing is).
debian-deps:
	@scripts/install-debian-packages scripts/debian-packages.txt

# The virtualenv is rebuilt when the dependencies change; the stamp records the install.
$(BIN)/.installed: broker/pyproject.toml exporters/pyproject.toml scripts/debian-packages.txt | debian-deps
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
		|| { echo "Moldau needs Python >= 3.11 ($(PYTHON) is older)"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e 'broker[test,bench]'
	$(BIN)/pip install --quiet -e 'exporters[test]'
	@touch $@

deps: $(BIN)/.installed

# The PySpark data source (pipeline/, distribution moldau-spark) and pyspark[sql] in the
# same venv, under a stamp of its own so the large Spark download happens once.
$(BIN)/.spark-installed: pipeline/pyproject.toml $(BIN)/.installed
	$(BIN)/pip install --quiet -e 'pipeline[test]'
	@touch $@

# Spark's own Kafka connector (compat/spark-pom.xml; the spark suite runs it beside
# format("moldau")): maven when missing, then its jars once into the cache outside the
# checkout, checked against compat/spark-jars.lock (a second fetch only verifies).
spark-connector: debian-deps
	@scripts/install-debian-packages compat/debian-packages.txt
	@compat/fetch spark >/dev/null

spark-deps: $(BIN)/.spark-installed spark-connector

# The deployment tooling (Ansible, Molecule; docs/distribution.md) in its own venv.
DEPLOY_VENV := .venv-deploy
$(DEPLOY_VENV)/.installed: scripts/deploy-requirements.txt scripts/debian-packages.txt | debian-deps
	@test -x $(DEPLOY_VENV)/bin/python || $(PYTHON) -m venv $(DEPLOY_VENV)
	$(DEPLOY_VENV)/bin/pip install --quiet -r scripts/deploy-requirements.txt
	@touch $@

deploy-deps: $(DEPLOY_VENV)/.installed

# ansible-lint's production profile (.ansible-lint) over the Ansible content, offline;
# the venv's bin on PATH because ansible-lint runs ansible-playbook --syntax-check.
ANSIBLE_LINT := PATH=$(CURDIR)/$(DEPLOY_VENV)/bin:$$PATH $(DEPLOY_VENV)/bin/ansible-lint roles playbooks molecule inventories

# Each suite carries a ceiling in seconds (name@ceiling, about 15% over its time in the
# rehearsal of 2026-12-06): scripts/run-suites warns loudly, without failing, when a
# suite takes longer, so drift shows the day it happens. Time is won where the machine
# would wait (docs/development.md): the Molecule host image (about 2.5 minutes of
# debootstrap on a fresh machine) is built in the background while the venvs install side
# by side, and the unit suite runs in 4 pytest-xdist workers, a test file per worker at a
# time, the longest files first (most of its time is waiting on brokers and ZooKeeper;
# broker/tests/conftest.py orders the files). scripts/molecule-test
# waits for the image under scripts/prepare-hosts' lock.
HOSTS_LOG := /tmp/moldau-prepare-hosts.log
# Present while a `make test` that started the Docker engine runs: it stops it at the end.
STOP_DOCKER_MARK := .deploy/stop-docker-after-test
test: debian-deps
	@mkdir -p .deploy; rm -f $(STOP_DOCKER_MARK); \
	docker info >/dev/null 2>&1 || touch $(STOP_DOCKER_MARK); \
	echo "building the Molecule host image in the background (log $(HOSTS_LOG))"; \
	scripts/prepare-hosts --image >$(HOSTS_LOG) 2>&1 &
	@$(MAKE) --no-print-directory -j3 deps deploy-deps spark-deps
	@test -f $(STOP_DOCKER_MARK) && stop_docker=1 || stop_docker=0; rm -f $(STOP_DOCKER_MARK); \
	MOLDAU_STOP_DOCKER=$$stop_docker scripts/run-suites \
		"lint@60:$(BIN)/ruff check ." \
		"types@90:$(BIN)/mypy" \
		"layers@30:$(BIN)/lint-imports" \
		"codegen@60:scripts/check-codegen $(SHARED)/kafka-protocol" \
		"unit@560:$(BIN)/pytest broker/tests -q -p no:cacheprovider -n 4 --dist loadfile --no-loadscope-reorder" \
		"exporters@45:$(BIN)/pytest exporters/tests -q -p no:cacheprovider -n 2" \
		"monitoring@30:$(BIN)/pytest tests/monitoring -q -p no:cacheprovider" \
		"deploy@180:$(BIN)/pytest tests/deploy -q -p no:cacheprovider -n 3" \
		"ansible-lint@75:$(ANSIBLE_LINT)" \
		"spark@240:$(BIN)/pytest pipeline/tests -q -p no:cacheprovider" \
		"compat@240:$(MAKE) --no-print-directory compat-deps && $(BIN)/pytest compat/tests -q -p no:cacheprovider" \
		"molecule@1880:scripts/molecule-test"

# atheris (the `fuzz` extra) for test-long's fuzz suite, under a stamp of its own so
# that only test-long installs it.
$(BIN)/.fuzz-installed: broker/pyproject.toml $(BIN)/.installed
	$(BIN)/pip install --quiet -e 'broker[fuzz]'
	@touch $@

.PHONY: fuzz-deps
fuzz-deps: $(BIN)/.fuzz-installed

# The soak-length checks CI does not run; run it before resolving an issue and quote its
# table in the note (docs/development.md lists what is here and why). The fuzz suite
# gives each of the 5 decoder targets of broker/fuzz/fuzz_requests.py 45 seconds.
test-long: deps deploy-deps spark-deps fuzz-deps
	@scripts/run-suites \
		"properties@1800:HYPOTHESIS_PROFILE=long $(BIN)/pytest broker/tests/protocol broker/tests/storage broker/tests/coordinator -q -p no:cacheprovider -n 2" \
		"fuzz@345:$(BIN)/python broker/fuzz/fuzz_requests.py --budget-seconds 45" \
		"authorizer@120:MOLDAU_LONG=1 $(BIN)/pytest broker/tests/authorizer/test_authorizer_long.py -q -p no:cacheprovider" \
		"quotas@300:MOLDAU_LONG=1 $(BIN)/pytest broker/tests/broker/test_client_quotas_long.py -q -p no:cacheprovider" \
		"kerberos-expiry@330:MOLDAU_LONG=1 $(BIN)/pytest broker/tests/replication/test_gssapi_ticket_expiry_long.py -q -p no:cacheprovider" \
		"transactions@305:MOLDAU_LONG=1 $(BIN)/pytest broker/tests/transactions/test_transactions_soak_long.py -q -p no:cacheprovider" \
		"zookeeper@360:MOLECULE_SCENARIOS=zookeeper scripts/molecule-test" \
		"zookeeper-life@2600:MOLECULE_SCENARIOS=zookeeper-life scripts/molecule-test" \
		"kerberos@300:MOLECULE_SCENARIOS=kerberos scripts/molecule-test" \
		"operations-full@1750:MOLDAU_OPS_FULL=1 MOLECULE_SCENARIOS=operations scripts/molecule-test" \
		"multi-instance@1650:MOLECULE_SCENARIOS=multi-instance scripts/molecule-test"

# The reference lab (docs/compat.md): Apache Kafka 3.9.1 beside Moldau, the same scenarios
# against both, differences compared under compat/allowlist.yaml. compat-deps installs
# maven and javac when missing and fetches Kafka's jars once into the cache outside the
# checkout (compat/fetch checks them against compat/jars.lock). ONLY=<scenario ...> runs
# just those (and what they read); `$(BIN)/pytest compat/tests` is the same as tests.
.PHONY: compat compat-deps
compat-deps: deps
	@scripts/install-debian-packages compat/debian-packages.txt
	@compat/fetch >/dev/null

compat: compat-deps
	@PYTHONPATH=$(CURDIR) $(BIN)/python -m compat $(if $(ONLY),--only $(ONLY))

# Client quotas measured on Kafka 3.9.1 and Moldau alike (compat/quotas.py, about 13 min
# for 3 rounds): the figures of docs/security.md's "Measured against Kafka 3.9.1".
.PHONY: compat-quotas
compat-quotas: compat-deps
	@PYTHONPATH=$(CURDIR) $(BIN)/python -m compat.quotas $(if $(ROUNDS),--rounds $(ROUNDS))

lint: deps deploy-deps
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(ANSIBLE_LINT)

generate: deps
	cd broker && ../$(BIN)/python -m codegen --protocol $(SHARED)/kafka-protocol

# ONLY=<suite> (or a space-separated list) rewrites only those sections of docs/benchmarks.md.
bench: deps spark-deps
	MOLDAU_BENCH_VIA_MAKE=1 $(BIN)/python bench/run.py $(foreach suite,$(ONLY),--only $(suite))

# The development cluster: a ZooKeeper node and a broker on 127.0.0.1:9092, state in
# .moldau-dev/ (moldau dev-cluster status|down). PORT=... moves the broker.
PORT ?= 9092
dev-cluster: deps
	$(BIN)/moldau dev-cluster up --port $(PORT)

dev-cluster-down: deps
	$(BIN)/moldau dev-cluster down

# The sensor pipeline on Spark against the dev cluster (started if it is not running).
pipeline-demo: spark-deps
	$(BIN)/moldau dev-cluster up --port $(PORT)
	PYSPARK_PYTHON=$(abspath $(BIN)/python) $(BIN)/python pipeline/examples/sensor_pipeline.py \
		--bootstrap 127.0.0.1:$(PORT)

molecule: deps deploy-deps
	scripts/molecule-test

# The cluster (the lab): the seven systemd hosts of inventories/lab (Docker containers of
# an image built here, Molecule scenario molecule/lab), converged by site.yml and kept,
# then a TLS produce/consume smoke test from this machine. The test scenarios use hosts
# and networks of their own, so `make test` leaves the lab running.
cluster: deploy-deps
	MOLECULE_SCENARIOS=lab scripts/molecule-test converge
	@scripts/lab-info

cluster-down: deploy-deps
	MOLECULE_SCENARIOS=lab scripts/molecule-test destroy
	scripts/stop-docker

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .moldau-dev
