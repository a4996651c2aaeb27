"""Real OTLP traffic for agent tests: spans made by the OpenTelemetry SDK (not ragmon's SDK,
so agent tests do not depend on it) with OpenInference attributes, exported over real HTTP
by the OTLP/HTTP exporter to a running agent."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode

from ragmon import semconv as sc


@dataclass
class Request:
    question: str
    contexts: Sequence[str]
    answer: str | None
    pipeline: str = "support"
    scores: Sequence[float] | None = None
    content: bool = True  # False: ids/scores only, as with the SDK's content rate
    error: bool = False
    with_root: bool = True
    extra: dict = field(default_factory=dict)


class OtlpTraffic:
    """Send RAG requests as spans to ``endpoint`` (…/v1/traces). Synchronous: call it via
    ``asyncio.to_thread`` when the agent runs on the same event loop."""

    def __init__(self, endpoint: str, service: str = "test-svc") -> None:
        self.provider = TracerProvider(resource=Resource.create({"service.name": service}))
        self.exporter = OTLPSpanExporter(endpoint=endpoint, timeout=10)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("tests.traffic")
        self.trace_ids: list[str] = []

    def send(self, req: Request) -> str:
        tracer = self.tracer
        root_cm = tracer.start_as_current_span("rag") if req.with_root else None
        root = root_cm.__enter__() if root_cm else None
        try:
            if root is not None:
                root.set_attribute(sc.SPAN_KIND, sc.KIND_CHAIN)
                root.set_attribute(sc.RAGMON_PIPELINE, req.pipeline)
                root.set_attribute(sc.RAGMON_CONTENT_SAMPLED, req.content)
                if req.content:
                    root.set_attribute(sc.INPUT_VALUE, req.question)
                for k, v in req.extra.items():
                    root.set_attribute(k, v)
            parent_ctx = None
            if root is None:
                # A trace whose root never arrives: children of a span that is never exported.
                import random

                from opentelemetry import trace as otel_trace
                from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

                ctx = SpanContext(trace_id=random.getrandbits(128), span_id=random.getrandbits(64),
                                  is_remote=True, trace_flags=TraceFlags(1))
                parent_ctx = otel_trace.set_span_in_context(NonRecordingSpan(ctx))
            with tracer.start_as_current_span("retrieve", context=parent_ctx) as span:
                span.set_attribute(sc.SPAN_KIND, sc.KIND_RETRIEVER)
                span.set_attribute(sc.RAGMON_PIPELINE, req.pipeline)
                span.set_attribute(sc.RAGMON_CONTENT_SAMPLED, req.content)
                if req.content:
                    span.set_attribute(sc.INPUT_VALUE, req.question)
                for i, text in enumerate(req.contexts):
                    span.set_attribute(sc.retrieval_document_attr(i, sc.DOCUMENT_ID), f"doc-{i}")
                    score = req.scores[i] if req.scores else 1.0 - i * 0.1
                    span.set_attribute(sc.retrieval_document_attr(i, sc.DOCUMENT_SCORE), score)
                    if req.content:
                        span.set_attribute(sc.retrieval_document_attr(i, sc.DOCUMENT_CONTENT), text)
                trace_id = format(span.get_span_context().trace_id, "032x")
            if req.answer is not None:
                with tracer.start_as_current_span("generate", context=parent_ctx) as span:
                    span.set_attribute(sc.SPAN_KIND, sc.KIND_LLM)
                    span.set_attribute(sc.RAGMON_PIPELINE, req.pipeline)
                    span.set_attribute(sc.RAGMON_CONTENT_SAMPLED, req.content)
                    if req.content:
                        span.set_attribute(sc.INPUT_VALUE, req.question)
                        span.set_attribute(sc.OUTPUT_VALUE, req.answer)
                    if req.error:
                        span.set_status(Status(StatusCode.ERROR, "boom"))
                        span.set_attribute(sc.ERROR_TYPE, "RuntimeError")
            if root is not None and req.content and req.answer is not None:
                root.set_attribute(sc.OUTPUT_VALUE, req.answer)
        finally:
            if root_cm is not None:
                root_cm.__exit__(None, None, None)
        self.trace_ids.append(trace_id)
        return trace_id

    def close(self) -> None:
        self.provider.shutdown()


CONTEXTS = [
    "The Pro plan costs 49 dollars per month and includes 10 seats.",
    "Refunds are available within 30 days of purchase for annual plans.",
    "Single sign-on with SAML is included in the Enterprise plan only.",
]


def healthy(i: int = 0) -> Request:
    return Request(question="How much does the Pro plan cost per month?", contexts=CONTEXTS,
                   answer="The Pro plan costs 49 dollars per month and includes 10 seats.")


def contradicting(i: int = 0) -> Request:
    return Request(question="How much does the Pro plan cost per month?", contexts=CONTEXTS,
                   answer="The Pro plan costs 99 dollars per week and includes 2 seats.")


def as_json(obj: object) -> str:
    return json.dumps(obj)
