"""Real OTLP bytes from the real OpenTelemetry SDK, for the ingest tests.

``SpanFactory`` is a TracerProvider with an in-memory exporter; ``encode`` turns its finished
spans into the exact ``ExportTraceServiceRequest`` the OTLP/HTTP exporter sends, and
``to_otlp_json`` renders that as OTLP/JSON (hex trace/span ids, as the OTLP spec requires —
protobuf's own JSON mapping would write base64).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from ragmon.ingest.decode.otlp import decode_export_request
from ragmon.types import SpanRecord

_ID_KEYS = ("traceId", "spanId", "parentSpanId")


class SpanFactory:
    def __init__(self, service: str = "support-bot", *, max_attributes: int | None = None,
                 resource: Mapping[str, Any] | None = None) -> None:
        attrs = {"service.name": service, **(resource or {})}
        limits = SpanLimits(max_span_attributes=max_attributes) if max_attributes else None
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create(attrs), span_limits=limits)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer: Tracer = self.provider.get_tracer("tests.ingest", "1.0")

    def finished(self) -> tuple[ReadableSpan, ...]:
        return self.exporter.get_finished_spans()

    def request(self) -> ExportTraceServiceRequest:
        return encode(self.finished())

    def records(self) -> list[SpanRecord]:
        """Finished spans after a real protobuf round trip through ragmon's decoder."""
        body = self.request().SerializeToString()
        batch = decode_export_request(body, content_type="application/x-protobuf")
        assert batch.rejected_spans == 0, batch.errors
        return batch.spans

    def clear(self) -> None:
        self.exporter.clear()


def encode(spans: Sequence[ReadableSpan]) -> ExportTraceServiceRequest:
    return encode_spans(spans)


def to_otlp_dict(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """OTLP/JSON as an SDK sends it: camelCase keys, hex ids, enums as ints, int64 as strings."""
    document = json_format.MessageToDict(request, use_integers_for_enums=True)
    for resource_spans in document.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                _hexify(span)
                for link in span.get("links", []):
                    _hexify(link)
    return document


def to_otlp_json(request: ExportTraceServiceRequest) -> bytes:
    return json.dumps(to_otlp_dict(request)).encode()


def _hexify(obj: dict[str, Any]) -> None:
    for key in _ID_KEYS:
        if key in obj:
            obj[key] = base64.b64decode(obj[key]).hex()
