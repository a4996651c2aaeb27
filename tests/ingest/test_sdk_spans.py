"""The in-process converter gives exactly what the OTLP protobuf round trip gives.

``ragmon eval --app`` reads the app's spans without encoding them (ingest/sdk_spans.py); the
agent reads the same spans as OTLP bytes. Both must produce identical records, on spans made by
the real OpenTelemetry SDK and by ragmon's own decorators.
"""

from __future__ import annotations

from opentelemetry import trace as otel_trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

import ragmon
from ragmon.ingest.decode.sdk_spans import records_from_sdk_spans
from tests.ingest.otel_helpers import SpanFactory


def _same(factory: SpanFactory) -> None:
    spans = factory.finished()
    assert spans
    assert records_from_sdk_spans(spans) == factory.records()


def test_plain_sdk_spans_with_every_attribute_shape_events_status_and_kinds() -> None:
    factory = SpanFactory(resource={"deployment.environment": "prod", "host.cores": 2})
    tracer = factory.tracer
    with tracer.start_as_current_span("root", kind=SpanKind.SERVER) as root:
        root.set_attributes({"s": "text", "i": 7, "f": 0.25, "b": True, "neg": -3, "big": 2**62,
                             "strs": ["a", "b"], "ints": [1, 2], "floats": [0.5], "bools": [True, False],
                             "empty": [], "unicode": "naïve ✓"})
        root.add_event("feedback", {"score": 1.0, "tags": ["x"]})
        with tracer.start_as_current_span("child", kind=SpanKind.CLIENT) as child:
            child.set_status(Status(StatusCode.ERROR, "boom"))
            child.record_exception(ValueError("bad"))
        with tracer.start_as_current_span("ok-child", kind=SpanKind.CONSUMER) as ok:
            ok.set_status(Status(StatusCode.OK))
    _same(factory)


def test_remote_parent_and_dropped_attributes() -> None:
    factory = SpanFactory(max_attributes=3)
    remote = SpanContext(trace_id=0x1234, span_id=0x99, is_remote=True, trace_flags=TraceFlags(1))
    ctx = otel_trace.set_span_in_context(NonRecordingSpan(remote))
    with factory.tracer.start_as_current_span("local-root", context=ctx) as span:
        span.set_attributes({f"a{i}": i for i in range(6)})  # 3 dropped
    (record,) = records_from_sdk_spans(factory.finished())
    assert record.parent_is_remote and record.parent_span_id == f"{0x99:016x}"
    assert record.dropped_attributes_count == 3
    _same(factory)


def test_ragmon_decorated_pipeline_with_documents() -> None:
    factory = SpanFactory()
    ragmon.init(service_name="conv", exporter="none", tracer_provider=factory.provider, set_global=False)
    try:
        @ragmon.retriever
        def search(q: str) -> list[dict]:
            return [{"id": f"d{i}", "text": f"document {i} about {q}", "score": 1.0 / (i + 1),
                     "metadata": {"source": f"s{i}.md", "page": i}} for i in range(40)]

        @ragmon.generator(model="m-1")
        def answer(q: str, docs: list[dict]) -> str:
            return f"{len(docs)} documents about {q}."

        @ragmon.pipeline(name="rag")
        def rag(q: str) -> str:
            return answer(q, search(q))

        rag("tides")
        ragmon.flush()
    finally:
        ragmon.shutdown()
    assert len(factory.finished()) == 3
    _same(factory)
