"""Delivery-token bookkeeping: a source's delivery is released only when every trace that had
spans in it is accounted for (the basis of Kafka's commit-after-processing)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from ragmon import semconv as sc
from ragmon.agent import Agent
from ragmon.config import load_agent_config
from ragmon.testing import InMemorySource
from ragmon.types import SpanRecord
from tests.agent.conftest import ScriptedJudge
from tests.helpers.eventually import eventually


def _span(trace: str, span: str, parent: str | None, answer: str | None = None) -> SpanRecord:
    attrs = {"openinference.span.kind": "CHAIN" if parent is None else "RETRIEVER",
             "input.value": "what is the price?", "ragmon.pipeline": "p"}
    if parent is not None:
        attrs["retrieval.documents.0.document.id"] = "d0"
        attrs["retrieval.documents.0.document.content"] = "The price is 5 dollars."
    if answer is not None:
        attrs["output.value"] = answer
    return SpanRecord(trace_id=trace, span_id=span, parent_span_id=parent, name="s",
                      start_time_ns=1_000, end_time_ns=2_000_000, attributes=attrs,
                      resource={"service.name": "svc"})


async def test_delivery_released_only_after_all_its_traces_are_accounted():
    source = InMemorySource()
    judge = ScriptedJudge(delay_s=0.2)
    config = load_agent_config({"metrics_port": 0, "trace_timeout_s": 30}, environ={})
    agent = Agent(config, registry=CollectorRegistry(), judge=judge, source=source)
    await agent.start()
    try:
        t1, t2 = "a" * 32, "b" * 32
        # message A: children of two traces; message B: root of t1; message C: root of t2
        source.push([_span(t1, "1" * 16, "9" * 16), _span(t2, "2" * 16, "8" * 16)], "A")
        assert source.released == []
        source.push([_span(t1, "9" * 16, None, answer="The price is 5 dollars.")], "B")
        await eventually(lambda: "B" in source.released, timeout_s=10, what="t1 judged and B released")
        assert "A" not in source.released  # A still holds t2
        source.push([_span(t2, "8" * 16, None, answer="The price is 5 dollars.")], "C")
        assert await agent.wait_idle(10)
        assert set(source.released) == {"A", "B", "C"}
        # a delivery with only spans of an already-accounted trace is released at once
        source.push([_span(t1, "3" * 16, "9" * 16)], "D")
        assert "D" in source.released
        # redelivery of a whole accounted trace is recognised and not judged again
        source.push([_span("c" * 32, "4" * 16, None, answer="x")], "E")
        await agent.wait_idle(10)
        seen_before = len(judge.seen)
        source.push([_span("c" * 32, "4" * 16, None, answer="x")], "F")
        await agent.wait_idle(10)
        assert len(judge.seen) == seen_before
        get = agent.metrics.registry.get_sample_value
        # recognised either by the assembler's memory of closed traces or the agent's dedup
        late = get(f"{sc.M_DROPPED}_total", {"reason": "late_span"}) or 0
        dup = get(f"{sc.M_DEDUP_HITS}_total", {"service": "svc", "pipeline": "p"}) or 0
        assert late + dup >= 1
        assert "F" in source.released
    finally:
        await agent.stop()


async def test_backpressure_reports_full_backlog():
    source = InMemorySource()
    config = load_agent_config({"metrics_port": 0, "judge_backlog": 2, "judge_concurrency": 1}, environ={})
    agent = Agent(config, registry=CollectorRegistry(), judge=ScriptedJudge(delay_s=1.0), source=source)
    await agent.start()
    try:
        for i in range(4):
            source.push([_span(f"{i:032x}", "1" * 16, None, answer="ok answer")], i)
        get = agent.metrics.registry.get_sample_value
        # two traces in flight (one being judged for 1 s, one queued) fill the backlog of 2
        assert await eventually(agent.parts.router.backpressure, timeout_s=10, what="a full judge backlog") is True
        assert get(f"{sc.M_TRACES_SKIPPED}_total", {"service": "svc", "pipeline": "p", "reason": "backlog_full"}) == 2
    finally:
        await agent.stop()
    # stop() finished or accounted everything
    received = get(f"{sc.M_TRACES_RECEIVED}_total", {"service": "svc", "pipeline": "p"})
    scored = get(f"{sc.M_TRACES_SCORED}_total", {"service": "svc", "pipeline": "p", "judge": "scripted"}) or 0
    skipped = sum(get(f"{sc.M_TRACES_SKIPPED}_total", {"service": "svc", "pipeline": "p", "reason": r}) or 0
                  for r in ("backlog_full", "shutdown"))
    assert received == 4 and scored + skipped == 4
