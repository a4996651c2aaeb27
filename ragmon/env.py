"""Every ``RAGMON_*`` environment variable outside the agent's settings table (the SDK's, ``ragmon
dataset synth``'s, the compiled ingest path's switch), ``read`` for them, and the one boolean parser.

Explicit argument > environment variable > default, everywhere. The agent's variables are one
per setting of its table (``ragmon.config.agent_settings()``: name, env var and flag generated
together, so they cannot drift); the SDK's, which run inside the user's process and must not
import the agent's configuration, are named here. Standard ``OTEL_*`` variables are left to the
OpenTelemetry SDK. This module imports only the standard library.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

PREFIX: Final = "RAGMON_"

# --- SDK (ragmon.init) ----------------------------------------------------------------------
SDK_ENABLED: Final = "RAGMON_SDK_ENABLED"
"""Kill switch: ``false`` turns every decorator into a plain call and ``init()`` into a no-op."""
SDK_EXPORTER: Final = "RAGMON_SDK_EXPORTER"
"""``otlp`` (default), ``console``, ``none`` or ``kafka``."""
SDK_CONTENT_RATE: Final = "RAGMON_SDK_CONTENT_RATE"
"""Fraction of traces (by trace id) that carry text: question, contexts, answer. Default 1.0."""
SDK_MAX_FIELD_CHARS: Final = "RAGMON_SDK_MAX_FIELD_CHARS"
"""Cap on one text attribute, in characters; longer text is cut and marked. Default 16384."""
SDK_MAX_DOCUMENTS: Final = "RAGMON_SDK_MAX_DOCUMENTS"
"""Most documents recorded on one retriever span. Default 128."""
DOC_ID_KEYS: Final = "RAGMON_DOC_ID_KEYS"
"""Metadata keys that name a document without an id (comma separated, in order; ``key#`` names a
source shared by chunks). The agent's setting of the same name: one variable configures both, so
the SDK and the agent give a document the same id (:mod:`ragmon.doc_ids`)."""

# --- the SDK's Kafka exporter: the same variables the agent's Kafka source reads ----------------
KAFKA_BOOTSTRAP_SERVERS: Final = "RAGMON_KAFKA_BOOTSTRAP_SERVERS"
KAFKA_TOPIC: Final = "RAGMON_KAFKA_TOPIC"
"""The exporter's topic; else the first of ``RAGMON_KAFKA_TOPICS`` (the agent's list)."""
KAFKA_TOPICS: Final = "RAGMON_KAFKA_TOPICS"
# KafkaSpanExporter keyword <- env var
KAFKA_EXPORTER_OPTIONS: Final[Mapping[str, str]] = {
    "compression": "RAGMON_KAFKA_COMPRESSION",
    "security_protocol": "RAGMON_KAFKA_SECURITY_PROTOCOL",
    "sasl_mechanism": "RAGMON_KAFKA_SASL_MECHANISM",
    "sasl_plain_username": "RAGMON_KAFKA_SASL_USERNAME",
    "sasl_plain_password": "RAGMON_KAFKA_SASL_PASSWORD",
    "ssl_cafile": "RAGMON_KAFKA_SSL_CAFILE",
    "ssl_certfile": "RAGMON_KAFKA_SSL_CERTFILE",
    "ssl_keyfile": "RAGMON_KAFKA_SSL_KEYFILE",
}

# --- ragmon dataset synth: the question generator's LLM (else the judge's settings) -----------
SYNTH_BASE_URL: Final = "RAGMON_SYNTH_BASE_URL"
"""OpenAI-compatible base URL of the generator; else ``RAGMON_JUDGE_BASE_URL``."""
SYNTH_MODEL: Final = "RAGMON_SYNTH_MODEL"
"""The generator's chat model."""
SYNTH_API_KEY: Final = "RAGMON_SYNTH_API_KEY"
"""The generator's API key (never logged); else ``RAGMON_JUDGE_API_KEY``."""

# --- the compiled ingest path (ingest/_native.py at run time, setup.py at build time) ------------
PURE_PYTHON: Final = "RAGMON_PURE_PYTHON"
"""True: run (or build) the ingest hot path as pure Python, not its mypyc-compiled modules."""


def read(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The variable's value with surrounding blanks removed; None when unset or blank."""
    value = (os.environ if environ is None else environ).get(name, "").strip()
    return value or None


_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"0", "false", "no", "off"})


def parse_bool(text: str) -> bool:
    """``1/true/yes/on`` or ``0/false/no/off`` (any case, surrounding blanks ignored); ValueError otherwise."""
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"expected true/false, got {text!r}")
# --- the reader's training recipe (scoring/reader/, `make train-reader`) and the benches ----------
BENCHDATA: Final = "RAGMON_BENCHDATA"
"""A local folder holding the benchmark data (the RAGTruth dev halves, ...): used instead of fetching it."""
READER_DATA: Final = "RAGMON_READER_DATA"
"""Where the reader's training files are fetched to / read from (default ``.cache/reader-data``)."""
TRAIN_THREADS: Final = "RAGMON_TRAIN_THREADS"
"""CPU threads of the reader's training (default 2)."""
