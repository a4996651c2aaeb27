"""ragmon's own SDK -> real OTLP/HTTP -> receiver -> assembler -> RagTrace: the SDK and the
extractor agree on every attribute (names, document ids, content hashes, errors)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Hashable, Sequence
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import ragmon
from ragmon import semconv as sc
from ragmon.config import load_agent_config
from ragmon.export.metrics import AgentMetrics
from ragmon.ingest.assembler import TraceAssembler
from ragmon.ingest.closed_trace import ClosedTrace
from ragmon.ingest.extract import content_id
from ragmon.ingest.receivers.http_receiver import OtlpHttpReceiver
from ragmon.ingest.receivers.settings import HttpReceiverSettings
from ragmon.types import SpanRecord

CORPUS = {
    "kb-1": "Passwords are reset from the account page.",
    "kb-2": "Reset links expire after 24 hours.",
}


class AssemblingSink:
    """A real SpanSink that assembles what arrives, like the agent does."""

    latency_only = None  # every span decoded in full (SpanSink.latency_only)

    def __init__(self) -> None:
        self.assembler = TraceAssembler(trace_timeout_s=30, max_open_traces=100, max_spans_per_trace=100)
        self.closed: list[ClosedTrace] = []

    def submit(self, spans: Sequence[SpanRecord], token: Hashable | None = None) -> None:
        for span in spans:
            self.closed.extend(self.assembler.add(span, token))

    def backpressure(self) -> bool:
        return False

    def admit(self, spans: Sequence[SpanRecord]) -> bool:
        return True

    async def flush_where(self, predicate: Callable[[Hashable], bool], timeout_s: float) -> None:
        self.closed.extend(self.assembler.close_where(predicate))


@pytest.fixture
async def sink_and_url() -> AsyncIterator[tuple[AssemblingSink, str]]:
    config = load_agent_config({"receiver_port": 0}, environ={})
    receiver = OtlpHttpReceiver(config.section(HttpReceiverSettings), AgentMetrics(CollectorRegistry()))
    sink = AssemblingSink()
    await receiver.start(sink)
    try:
        yield sink, f"http://127.0.0.1:{receiver.port}/v1/traces"
    finally:
        await receiver.stop()


async def _run_app(url: str, app: Callable[[], Any]) -> None:
    def run() -> None:
        provider = ragmon.init(service_name="support-bot", endpoint=url, content_rate=1.0, set_global=False)
        try:
            app()
        finally:
            provider.force_flush()
            ragmon.shutdown()

    await asyncio.to_thread(run)  # the exporter's HTTP calls block; the receiver runs on this loop


async def test_decorated_app_becomes_one_rag_trace(sink_and_url: tuple[AssemblingSink, str]) -> None:
    sink, url = sink_and_url

    @ragmon.retriever
    def search(query: str) -> list[dict[str, Any]]:
        return [{"id": doc_id, "text": text, "score": 0.9 - i / 10} for i, (doc_id, text) in enumerate(CORPUS.items())]

    @ragmon.generator
    def answer(query: str, docs: list[dict[str, Any]]) -> str:
        return "Use the reset link from the account page within 24 hours."

    @ragmon.pipeline
    def support_rag(query: str) -> str:
        return answer(query, search(query))

    await _run_app(url, lambda: support_rag("How do I reset my password?"))
    (closed,) = sink.closed
    trace = closed.trace
    assert closed.reason == "root" and trace.complete
    assert (trace.service, trace.pipeline) == ("support-bot", "support_rag")
    assert trace.question == "How do I reset my password?"
    assert trace.answer == "Use the reset link from the account page within 24 hours."
    assert [(d.id, d.content, d.rank) for d in trace.documents] == [
        ("kb-1", CORPUS["kb-1"], 0), ("kb-2", CORPUS["kb-2"], 1)]
    assert trace.documents[0].score == pytest.approx(0.9)
    assert trace.retrieval_latency_s is not None and trace.generation_latency_s is not None
    assert trace.pipeline_latency_s is not None
    assert trace.pipeline_latency_s >= trace.retrieval_latency_s
    assert trace.content_sampled and trace.error_type is None and not trace.attribute_limit_hit
    assert trace.span_count == 3


async def test_sdk_errors_and_plain_string_documents(sink_and_url: tuple[AssemblingSink, str]) -> None:
    sink, url = sink_and_url

    class IndexDown(RuntimeError):
        pass

    @ragmon.retriever
    def search(query: str) -> list[str]:
        raise IndexDown("vector index unavailable")

    @ragmon.retriever
    def fallback(query: str) -> list[str]:
        return list(CORPUS.values())

    @ragmon.pipeline
    def rag(query: str) -> str:
        try:
            return str(search(query))
        except IndexDown:
            return f"fallback: {len(fallback(query))} documents"

    await _run_app(url, lambda: rag("reset?"))
    (closed,) = sink.closed
    trace = closed.trace
    assert trace.error_type is not None and trace.error_type.endswith("IndexDown")
    assert [d.id for d in trace.documents] == [content_id(text) for text in CORPUS.values()]
    assert trace.answer == "fallback: 2 documents"
    assert trace.attributes[sc.RAGMON_DOCUMENT_COUNT] == 2
