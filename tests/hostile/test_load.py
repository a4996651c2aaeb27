"""Load: back-pressure must reach the client before the agent accepts work it will drop, and one
huge export must not stall the event loop."""

from __future__ import annotations

import asyncio

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ragmon import semconv as sc
from ragmon.testing import StaticJudge
from ragmon.types import RagTrace, Scores
from tests.agent.conftest import SCORES, running_agent
from tests.helpers.eventually import eventually_sync
from tests.helpers.scrape import Scrape, scrape
from tests.hostile._support import PROTO, agent_process, rag_trace, totals
from tests.ingest.otel_helpers import SpanFactory


class GatedJudge(StaticJudge):
    """Scores a trace only once the test opens the gate: the backlog fills up deterministically."""

    def __init__(self) -> None:
        super().__init__(SCORES, name="gated")
        self.gate = asyncio.Event()

    async def score(self, trace: RagTrace) -> Scores:
        await self.gate.wait()
        return await super().score(trace)


def _export(service: str, traces: int) -> bytes:
    f = SpanFactory(service)
    for i in range(traces):
        rag_trace(f, question=f"question {i}?")
    return f.request().SerializeToString()


async def test_export_the_backlog_cannot_take_is_refused_not_accepted_and_skipped() -> None:
    """Item 7: batches were answered 200 and then most of their traces skipped as backlog_full;
    exporters got success and never retried. Now the receiver answers 503 + Retry-After (OTLP's
    retryable answer) before accepting an export whose traces the judge backlog cannot take."""
    judge = GatedJudge()
    async with running_agent(judge, judge_backlog=5, judge_concurrency=1) as agent:
        url = f"http://127.0.0.1:{agent.receiver_port}/v1/traces"
        first, second = _export("load-a", 3), _export("load-b", 3)
        async with httpx.AsyncClient(timeout=10) as client:
            accepted = await client.post(url, content=first, headers=PROTO)
            refused = await client.post(url, content=second, headers=PROTO)  # 3 more do not fit in 5
            assert accepted.status_code == 200
            assert refused.status_code == 503 and int(refused.headers["retry-after"]) >= 1
            s = await asyncio.to_thread(scrape, agent.metrics_port)
            assert s.value(f"{sc.M_TRACES_RECEIVED}_total", service="load-b") == 0  # nothing of it accepted
            judge.gate.set()
            assert await agent.wait_idle(20)
            retried = await client.post(url, content=second, headers=PROTO)  # the exporter's retry
        assert retried.status_code == 200
        assert await agent.wait_idle(20)
        s = await asyncio.to_thread(scrape, agent.metrics_port)
    assert s.value(f"{sc.M_TRACES_SKIPPED}_total", reason=sc.SKIP_BACKLOG_FULL) == 0
    assert s.value(f"{sc.M_TRACES_SCORED}_total") == 6
    assert s.value(f"{sc.M_REQUESTS_RECEIVED}_total", source="http", outcome=sc.OUTCOME_THROTTLED) == 1
    assert totals(s) == (6, 6)


async def test_a_250k_span_export_does_not_stall_the_event_loop() -> None:
    """Item 6: 250,000 single-span traces in one 10 MB request kept the event loop busy for 21.6 s;
    the sidecar's liveness probe (timeout 3 s) failed meanwhile. Now the spans are handed over in
    slices: /healthz answers within the probe's timeout all along."""
    f = SpanFactory("bulk-svc")
    with f.tracer.start_as_current_span("rag", attributes={sc.RAGMON_STAGE: "pipeline", sc.RAGMON_PIPELINE: "bulk"}):
        pass
    template = f.request()
    spans = template.resource_spans[0].scope_spans[0].spans
    one = spans[0]
    request = ExportTraceServiceRequest()
    request.CopyFrom(template)
    target = request.resource_spans[0].scope_spans[0].spans
    del target[:]
    count = 250_000
    for i in range(count):
        span = target.add()
        span.CopyFrom(one)
        span.trace_id = (i + 1).to_bytes(16, "big")
        span.span_id = (i + 1).to_bytes(8, "big")
    body = request.SerializeToString()
    # a real process: a test on the agent's own event loop could not see that loop stall
    with agent_process("--sampler-rate=0", f"--assembler-max-open-traces={count}",
                       f"--receiver-max-body-bytes={32 << 20}") as agent:
        export = asyncio.create_task(asyncio.to_thread(
            httpx.post, agent.url, content=body, headers=PROTO, timeout=300))
        probes = 0
        async with httpx.AsyncClient(timeout=3) as prober:  # the liveness probe's timeout
            while not export.done():
                health = await prober.get(f"http://127.0.0.1:{agent.metrics_port}/healthz")
                assert health.status_code == 200
                probes += 1
                await asyncio.sleep(0.2)
        response = await export
        assert response.status_code == 200
        assert probes >= 2

        def all_accounted() -> Scrape:
            s = agent.scrape()
            assert totals(s) == (count, count)
            return s

        await asyncio.to_thread(eventually_sync, all_accounted, 120, "every trace accounted")
