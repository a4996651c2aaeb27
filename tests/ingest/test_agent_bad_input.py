"""Bad input against the running agent (real receiver, real /metrics over HTTP): each gets a
clear response and a count, and the agent keeps serving. Complements tests/agent, which covers
garbage bodies, wrong content types, a root that never arrives and eviction."""

from __future__ import annotations

import asyncio
import gzip
import os

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ragmon import semconv as sc
from ragmon.agent import Agent
from tests.agent.conftest import ScriptedJudge, running_agent
from tests.helpers.eventually import eventually
from tests.helpers.scrape import Scrape, scrape
from tests.ingest.otel_helpers import SpanFactory

PROTO = {"content-type": "application/x-protobuf"}


def _url(agent: Agent) -> str:
    return f"http://127.0.0.1:{agent.receiver_port}/v1/traces"


async def _scrape_when_positive(agent: Agent, name: str, **labels: str) -> Scrape:
    """Scrape the agent's /metrics until ``name{labels}`` is above 0; return that scrape."""
    async def check() -> Scrape:
        s = await asyncio.to_thread(scrape, agent.metrics_port)
        assert s.value(name, **labels) > 0, f"{name}{labels} is still 0"
        return s

    return await eventually(check, timeout_s=10, what=f"{name}{labels} > 0", interval_s=0.1)


def _rag_trace_body(question: str = "How do I reset my password?") -> bytes:
    f = SpanFactory("bad-input-svc")
    with f.tracer.start_as_current_span("rag", attributes={
            sc.RAGMON_STAGE: "pipeline", sc.RAGMON_PIPELINE: "faq", sc.INPUT_VALUE: question,
            sc.OUTPUT_VALUE: "Use the reset link on the account page."}) as root:
        with f.tracer.start_as_current_span("search", attributes={
                sc.RAGMON_STAGE: "retriever", sc.SPAN_KIND: "RETRIEVER",
                "retrieval.documents.0.document.id": "kb-1",
                "retrieval.documents.0.document.content": "Passwords are reset from the account page.",
                "retrieval.documents.0.document.score": 0.9}):
            pass
        root.set_attribute("ragmon.content.sampled", True)
    return f.request().SerializeToString()


async def test_truncated_protobuf_zip_bomb_and_malformed_spans() -> None:
    async with running_agent(ScriptedJudge(), receiver_max_body_bytes=1 << 20) as agent:
        url = _url(agent)
        good = _rag_trace_body()
        async with httpx.AsyncClient(timeout=10) as client:
            truncated = await client.post(url, content=good[: len(good) // 3], headers=PROTO)
            bomb = await client.post(url, content=gzip.compress(b"\0" * (32 << 20)),
                                     headers={**PROTO, "content-encoding": "gzip"})
            # one trace whose child span has a broken id: the rest of the request is accepted
            request = SpanFactory().request()
            request.ParseFromString(good)
            spans = request.resource_spans[0].scope_spans[0].spans
            broken = spans.add()
            broken.CopyFrom(spans[0])
            broken.trace_id = b"\x01" * 3
            partial = await client.post(url, content=request.SerializeToString(), headers=PROTO)
        assert await agent.wait_idle(20)
        s = await asyncio.to_thread(scrape, agent.metrics_port)
    assert truncated.status_code == 400
    assert bomb.status_code == 413
    assert partial.status_code == 200
    assert ExportTraceServiceResponse.FromString(partial.content).partial_success.rejected_spans == 1
    assert s.value(f"{sc.M_DROPPED}_total", reason=sc.DROP_MALFORMED_BODY) == 1
    assert s.value(f"{sc.M_DROPPED}_total", reason=sc.DROP_BODY_TOO_LARGE) == 1
    assert s.value(f"{sc.M_DROPPED}_total", reason=sc.DROP_MALFORMED_SPAN) == 1
    assert s.value(f"{sc.M_REQUESTS_RECEIVED}_total", source="http", outcome=sc.OUTCOME_REJECTED) == 2
    assert s.value(f"{sc.M_REQUESTS_RECEIVED}_total", source="http", outcome=sc.OUTCOME_PARTIAL) == 1
    assert s.value(f"{sc.M_TRACES_SCORED}_total", service="bad-input-svc", pipeline="faq") == 1


async def test_spans_without_rag_attributes_are_accounted_not_judged() -> None:
    f = SpanFactory("plain-svc")
    with f.tracer.start_as_current_span("GET /health") as root:
        root.set_attribute("http.route", "/health")
        with f.tracer.start_as_current_span("SELECT users"):
            pass
    async with running_agent(ScriptedJudge()) as agent:
        async with httpx.AsyncClient(timeout=10) as client:
            response = await client.post(_url(agent), content=f.request().SerializeToString(), headers=PROTO)
        assert await agent.wait_idle(20)
        s = await asyncio.to_thread(scrape, agent.metrics_port)
    assert response.status_code == 200
    # not a RAG request: received under the reserved pipeline label, skipped as not_rag
    assert s.value(f"{sc.M_TRACES_RECEIVED}_total", service="plain-svc", pipeline=sc.NOT_RAG_PIPELINE_LABEL) == 1
    assert s.value(f"{sc.M_TRACES_SKIPPED}_total", service="plain-svc", reason=sc.SKIP_NOT_RAG) == 1
    assert s.value(f"{sc.M_TRACES_SCORED}_total", service="plain-svc") == 0
    assert s.value(f"{sc.M_RETRIEVAL_LATENCY}_count", service="plain-svc") == 0


async def test_ten_thousand_open_traces_and_the_agent_keeps_serving() -> None:
    # 10 000 traces whose root never comes, built from one real SDK span with fresh trace ids
    f = SpanFactory("flood-svc")
    with f.tracer.start_as_current_span("rag", attributes={sc.RAGMON_PIPELINE: "flood"}), \
            f.tracer.start_as_current_span("search", attributes={sc.SPAN_KIND: "RETRIEVER",
                                                                sc.RAGMON_PIPELINE: "flood"}):
        pass
    template = f.request()
    spans = template.resource_spans[0].scope_spans[0].spans
    child = next(s for s in spans if s.name == "search")
    flood = SpanFactory().request()
    flood.CopyFrom(template)
    out = flood.resource_spans[0].scope_spans[0].spans
    del out[:]
    for _ in range(10_000):
        span = out.add()
        span.CopyFrom(child)
        span.trace_id = os.urandom(16)

    async with running_agent(ScriptedJudge(), max_open_traces=10_000, trace_timeout_s=60,
                             sample_rate=0.0, shutdown_grace_s=30) as agent:
        url = _url(agent)
        async with httpx.AsyncClient(timeout=30) as client:
            flooded = await client.post(url, content=flood.SerializeToString(), headers=PROTO)
            # ragmon_open_traces is refreshed on the agent's 0.25 s expiry tick, which may also fall
            # between two slices of the export's submission: wait for a tick after all of it
            async def all_open() -> Scrape:
                s = await asyncio.to_thread(scrape, agent.metrics_port)
                assert s.value(sc.M_OPEN_TRACES) == 10_000
                return s

            s1 = await eventually(all_open, timeout_s=10, what="10 000 open traces", interval_s=0.1)
            # still serving: a complete trace goes through while 10 000 wait
            healthy = await client.post(url, content=_rag_trace_body(), headers=PROTO)
            s2 = await _scrape_when_positive(agent, f"{sc.M_TRACES_RECEIVED}_total", service="bad-input-svc")
    assert flooded.status_code == 200 and healthy.status_code == 200
    assert s1.value(f"{sc.M_SPANS_RECEIVED}_total", source="http") == 10_000
    assert s1.value(sc.M_OPEN_TRACES) == 10_000
    assert s2.value(f"{sc.M_TRACES_RECEIVED}_total", service="bad-input-svc", pipeline="faq") == 1
    # the healthy trace was new while the assembler was full: the stalest flood trace made room
    assert s2.value(f"{sc.M_DROPPED}_total", reason=sc.DROP_OPEN_TRACES_FULL) == 1
    assert s2.value(f"{sc.M_TRACES_INCOMPLETE}_total", service="flood-svc") == 1
    # stop() closed the rest: every one of the 10 000 is accounted for
    final = agent.metrics.registry.get_sample_value
    assert final(f"{sc.M_TRACES_RECEIVED}_total", {"service": "flood-svc", "pipeline": "flood"}) == 10_000
