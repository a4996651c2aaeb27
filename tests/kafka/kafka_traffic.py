"""RAG traffic made by the real OpenTelemetry SDK and written to Kafka by ragmon's exporter."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter

from ragmon.sdk.kafka_exporter import KafkaSpanExporter
from tests.helpers.traffic import OtlpTraffic, Request

__all__ = ["KafkaTraffic", "Request", "SpansTo", "rag_request"]


class SpansTo(OtlpTraffic):
    """``OtlpTraffic`` (same spans and attributes) exporting to any ``SpanExporter``."""

    def __init__(self, exporter: SpanExporter, service: str = "kafka-svc", batch: bool = True) -> None:
        self.provider = TracerProvider(resource=Resource.create({"service.name": service}))
        self.exporter = exporter
        processor = (BatchSpanProcessor(exporter, schedule_delay_millis=50) if batch
                     else SimpleSpanProcessor(exporter))
        self.provider.add_span_processor(processor)
        self.tracer = self.provider.get_tracer("tests.kafka")
        self.trace_ids: list[str] = []

    def flush(self, timeout_ms: int = 30_000) -> bool:
        return self.provider.force_flush(timeout_ms)


class KafkaTraffic(SpansTo):
    """Spans -> ``KafkaSpanExporter`` -> topic."""

    exporter: KafkaSpanExporter

    def __init__(self, bootstrap: str, topic: str, service: str = "kafka-svc", batch: bool = True,
                 **exporter_kw: Any) -> None:
        super().__init__(KafkaSpanExporter(bootstrap, topic=topic, **exporter_kw), service, batch)

    def flush(self, timeout_ms: int = 30_000) -> bool:
        return self.provider.force_flush(timeout_ms) and self.exporter.force_flush(timeout_ms)


CONTEXTS = [
    "The Pro plan costs 49 dollars per month and includes 10 seats.",
    "Refunds are available within 30 days of purchase for annual plans.",
    "Single sign-on with SAML is included in the Enterprise plan only.",
]


def rag_request(i: int, pipeline: str = "support", answer: str | None = None) -> Request:
    return Request(question=f"How much does the Pro plan cost per month? (#{i})", contexts=CONTEXTS,
                   answer=answer or "The Pro plan costs 49 dollars per month and includes 10 seats.",
                   pipeline=pipeline)
