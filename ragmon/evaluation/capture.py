"""Capture an in-process app's spans in memory and turn them into ``RagTrace``s the agent's way.

Offline must equal online, so finished SDK spans become exactly the records the agent would
decode from their OTLP bytes (``ingest.decode.sdk_spans``, which a test holds equal to the exporter's
encoder + ``ingest.decode.otlp``'s decoder) and are assembled by ``ingest.extract.build_rag_trace``.

Routing concurrent calls: each call runs in a context whose current span is a non-recording,
*remote* parent with a fresh trace id (:func:`call_context`). Every span the call starts — with
ragmon's tracer or any other OpenTelemetry tracer — joins that trace id, so spans of concurrent
calls never mix, and no wrapper span of ours enters the trace: the app's ``@ragmon.pipeline``
span is the trace's local root, the way the extractor treats an app called through a gateway.

What is captured (:class:`CaptureSession`):

* ragmon's spans, always: ragmon's SDK is (re)configured for the session with a private
  ``TracerProvider``, ``exporter="none"``, content rate 1.0 (every text recorded), a high
  ``max_documents`` (recall@100 needs 100 documents) and a high ``max_field_chars``;
* spans of the application's own OpenTelemetry instrumentation (OpenInference, OpenLLMetry...),
  when it goes to the global *SDK* ``TracerProvider``: a capture processor is added to it for the
  session (an SDK provider cannot drop a processor; after the session it ignores everything).
  Spans of a provider that is neither — a private provider the app built itself, a vendor's
  provider — are not seen.

The session replaces any ragmon configuration the app made at import time (its exporter is
flushed and detached) and leaves ragmon's SDK shut down afterwards; the app must not call
``ragmon.init()`` inside the entry point itself.
"""

from __future__ import annotations

import dataclasses
import random
import threading
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider

from .. import semconv as sc
from ..ingest.decode.sdk_spans import records_from_sdk_spans
from ..ingest.extract import build_rag_trace
from ..sdk import setup as sdk_setup
from ..types import RagTrace, SpanRecord
from .responses import EVAL_SERVICE

__all__ = [
    "DEFAULT_MAX_DOCUMENTS",
    "DEFAULT_MAX_FIELD_CHARS",
    "CaptureSession",
    "SpanCapture",
    "call_context",
    "has_rag_data",
    "to_rag_trace",
    "to_span_records",
    "with_question",
]

DEFAULT_MAX_DOCUMENTS = 1000  # recall@100 and beyond: never cut a retrieval short
DEFAULT_MAX_FIELD_CHARS = 1 << 20  # judges see the text the generator saw, not a cut copy
MAX_SPANS_PER_TRACE = 10_000  # bound memory against an app that loops; the rest is counted


class SpanCapture(SpanProcessor):
    """Keeps the finished spans of the trace ids it was told to expect, grouped by trace id.

    Spans of other traces are ignored, as is everything after :meth:`close` — so processors
    left on a global provider cost nothing, and spans a timed-out call ends later never leak
    into memory. Thread-safe: apps end spans on any thread.
    """

    def __init__(self, max_spans_per_trace: int = MAX_SPANS_PER_TRACE) -> None:
        self._lock = threading.Lock()
        self._spans: dict[int, list[ReadableSpan]] = {}
        self._max = max_spans_per_trace
        self._closed = False
        self.dropped = 0  # spans beyond max_spans_per_trace

    def expect(self, trace_id: int) -> None:
        with self._lock:
            self._spans.setdefault(trace_id, [])

    def take(self, trace_id: int) -> list[ReadableSpan]:
        """The spans finished so far for ``trace_id``; the trace is forgotten afterwards."""
        with self._lock:
            return self._spans.pop(trace_id, [])

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._spans.clear()

    def on_start(self, span: Span, parent_context: otel_context.Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None:
            return
        with self._lock:
            if self._closed:
                return
            spans = self._spans.get(context.trace_id)
            if spans is None:
                return
            if len(spans) >= self._max:
                self.dropped += 1
                return
            spans.append(span)

    def shutdown(self) -> None:
        self.close()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def call_context(rng: random.Random | None = None) -> tuple[int, otel_context.Context]:
    """(trace id, a context whose current span is a sampled remote parent in that trace)."""
    rng = rng or _RNG
    trace_id = rng.getrandbits(128) or 1
    parent = otel_trace.SpanContext(
        trace_id=trace_id,
        span_id=rng.getrandbits(64) or 1,
        is_remote=True,
        trace_flags=otel_trace.TraceFlags(otel_trace.TraceFlags.SAMPLED),
    )
    return trace_id, otel_trace.set_span_in_context(otel_trace.NonRecordingSpan(parent), otel_context.Context())


_RNG = random.SystemRandom()


def to_span_records(spans: Sequence[ReadableSpan]) -> list[SpanRecord]:
    """Finished SDK spans -> ``SpanRecord``s: the records the agent decodes from the same spans'
    OTLP bytes (``ingest.decode.sdk_spans``, tested equal to the protobuf round trip), without the
    round trip."""
    return records_from_sdk_spans(spans)


def to_rag_trace(spans: Sequence[ReadableSpan]) -> RagTrace | None:
    """The ``RagTrace`` of one call's spans, or None when there are none."""
    records = to_span_records(spans)
    if not records:
        return None
    return build_rag_trace(records, complete=True)


def has_rag_data(trace: RagTrace) -> bool:
    """Whether the spans described a RAG request at all (a question, documents or an answer)."""
    return bool(trace.question or trace.documents or trace.answer)


class CaptureSession:
    """``with CaptureSession() as capture:`` — ragmon's SDK (and the global SDK provider, if any)
    feed ``capture`` (a :class:`SpanCapture`) for the duration of the block. Not reentrant."""

    def __init__(self, *, service_name: str = EVAL_SERVICE, max_documents: int = DEFAULT_MAX_DOCUMENTS,
                 max_field_chars: int = DEFAULT_MAX_FIELD_CHARS) -> None:
        self.capture = SpanCapture()
        self._service_name = service_name
        self._max_documents = max_documents
        self._max_field_chars = max_field_chars
        self._provider: TracerProvider | None = None

    def __enter__(self) -> SpanCapture:
        self._provider = TracerProvider(resource=Resource.create({sc.SERVICE_NAME: self._service_name}))
        sdk_setup.init(
            self._service_name,
            exporter="none",
            span_processor=self.capture,
            tracer_provider=self._provider,
            set_global=False,
            content_rate=1.0,
            max_documents=self._max_documents,
            max_field_chars=self._max_field_chars,
            enabled=True,
        )
        global_provider: Any = otel_trace.get_tracer_provider()
        if isinstance(global_provider, TracerProvider) and global_provider is not self._provider:
            global_provider.add_span_processor(self.capture)  # the app's own instrumentation
        return self.capture

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        sdk_setup.shutdown()
        self.capture.close()
        if self._provider is not None:
            self._provider.shutdown()
            self._provider = None


def with_question(trace: RagTrace, question: str) -> RagTrace:
    """The trace, with ``question`` filled in when the spans recorded none."""
    return trace if trace.question else dataclasses.replace(trace, question=question)
