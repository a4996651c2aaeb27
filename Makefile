# ragmon developer entry points. `make demo` and `make test` are the README's two commands.
VENV   ?= .venv
PYTHON ?= python3
BIN    := $(VENV)/bin

.PHONY: demo install dev-install services test test-fast lint bench clean

## One command: install ragmon (agent extras) into .venv and run the embedded demo.
demo: install
	$(BIN)/ragmon demo $(DEMO_ARGS)

install: $(VENV)/.ragmon-agent
$(VENV)/.ragmon-agent: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[agent]'
	touch $@

dev-install: $(VENV)/.ragmon-dev
$(VENV)/.ragmon-dev: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.ragmon-agent

## Services the tests start themselves: Prometheus/Alertmanager (Debian), Apache Kafka jars (Maven), tmux (ragmon dataset label's terminal test).
services:
	bash scripts/install-prometheus.sh
	command -v java >/dev/null && command -v mvn >/dev/null || \
		{ apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless maven; }
	bash scripts/kafka-broker.sh fetch
	command -v tmux >/dev/null || { apt-get update && apt-get install -y --no-install-recommends tmux; }

lint: dev-install
	$(BIN)/ruff check ragmon tests bench
	$(BIN)/mypy

## One command: install everything (Python deps, Prometheus, Kafka) and run lint + the whole test suite.
test: dev-install services lint
	$(BIN)/python -m pytest -q -p no:cacheprovider

test-fast: dev-install
	$(BIN)/python -m pytest -q -m "not kafka and not prometheus"

clean:
	rm -rf $(VENV) .cache build *.egg-info .pytest_cache .mypy_cache .ruff_cache
