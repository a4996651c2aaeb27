"""SDK test fixtures: a real TracerProvider with an in-memory exporter, and clean global state.

OpenTelemetry allows the global TracerProvider to be set once per process, so ``clean_sdk``
swaps the API module's private slots for every test and puts the previous ones back afterwards.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

import ragmon
from ragmon._log import LogOnce
from ragmon.sdk import _runtime, setup

SDK_ENV = (
    _runtime.ENV_ENABLED, _runtime.ENV_EXPORTER, _runtime.ENV_CONTENT_RATE, _runtime.ENV_MAX_FIELD_CHARS,
    _runtime.ENV_MAX_DOCUMENTS, "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT", "OTEL_SERVICE_NAME",
    "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT",
    setup.ENV_KAFKA_BOOTSTRAP, setup.ENV_KAFKA_TOPIC, setup.ENV_KAFKA_TOPICS, *setup.KAFKA_ENV_OPTIONS.values(),
)


@pytest.fixture(autouse=True)
def clean_sdk(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts as a fresh process would: no SDK env, no global provider, no ragmon state.

    Whatever another test module (e.g. the demo) installed globally is put back afterwards.
    """
    for name in SDK_ENV:
        monkeypatch.delenv(name, raising=False)
    saved_global = (trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE)
    saved_state = (setup.STATE.owned_provider, setup.STATE.owned_is_global)
    ragmon.shutdown()
    trace._TRACER_PROVIDER = None
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    setup.STATE.owned_provider, setup.STATE.owned_is_global = None, False
    _runtime.RUNTIME.reset()
    _runtime._log_once = LogOnce(_runtime.logger)  # each test sees its own "first" warnings
    try:
        yield
    finally:
        ragmon.shutdown()
        trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = saved_global
        setup.STATE.owned_provider, setup.STATE.owned_is_global = saved_state
        _runtime.RUNTIME.reset()


class Spans:
    """The in-memory exporter plus lookups by span name."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.exporter = exporter

    def all(self) -> tuple[ReadableSpan, ...]:
        return self.exporter.get_finished_spans()

    def one(self, name: str) -> ReadableSpan:
        found = [s for s in self.all() if s.name == name]
        assert len(found) == 1, f"expected one span {name!r}, got {[s.name for s in self.all()]}"
        return found[0]

    def clear(self) -> None:
        self.exporter.clear()


def init_memory(**kwargs: object) -> Spans:
    exporter = InMemorySpanExporter()
    ragmon.init(service_name="test-svc", exporter="none", span_processor=SimpleSpanProcessor(exporter),
                set_global=False, **kwargs)  # type: ignore[arg-type]
    return Spans(exporter)


@pytest.fixture
def spans() -> Spans:
    return init_memory()


@pytest.fixture
def fresh_global_otel() -> None:
    """Documents that a test sets or reads the global provider (``clean_sdk`` resets it)."""


# --- a real OTLP/HTTP endpoint: records what the SDK's exporter POSTs --------------------------------
class _Collector(BaseHTTPRequestHandler):
    requests: list[tuple[str, dict[str, str], bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()
        self.wfile.write(b"")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[tuple[str, list[tuple[str, dict[str, str], bytes]]]]:
    received: list[tuple[str, dict[str, str], bytes]] = []
    handler = type("Handler", (_Collector,), {"requests": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", received
    finally:
        server.shutdown()
        server.server_close()
