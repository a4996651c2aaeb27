"""The trace router over real parts (``build_parts``) with an in-memory edge: delivery tokens go to
a list, the judge pool is never started — the router is handed judge outcomes as the pool would
hand them (``settle``). Every branch ends in exactly one outcome and one accounting call."""

from __future__ import annotations

import logging
from collections.abc import Hashable
from typing import Any

from prometheus_client import CollectorRegistry

from ragmon import semconv as sc
from ragmon._log import LogOnce
from ragmon.agent.judge_pool import JudgeOutcome
from ragmon.agent.wiring import AgentParts, build_parts
from ragmon.config import load_agent_config
from ragmon.types import Scores, SpanRecord
from tests.agent.conftest import SCORES

SP = {"service": "svc", "pipeline": "p"}


def _parts(**settings: Any) -> tuple[AgentParts, list[Hashable]]:
    released: list[Hashable] = []
    config = load_agent_config({"trace_timeout_s": 30, **settings}, environ={})
    parts = build_parts(config, registry=CollectorRegistry(), clock=lambda: 0.0, release=released.append,
                        log_once=LogOnce(logging.getLogger("test")))
    return parts, released


def _span(trace: str, span: str, parent: str | None, *, answer: str | None = "The price is 5 dollars.",
          documents: bool = True) -> SpanRecord:
    attrs: dict[str, Any] = {"openinference.span.kind": "CHAIN" if parent is None else "RETRIEVER",
                             "input.value": "what is the price?", "ragmon.pipeline": "p"}
    if parent is not None and documents:
        attrs["retrieval.documents.0.document.id"] = "d0"
        attrs["retrieval.documents.0.document.content"] = "The price is 5 dollars."
    if parent is None and answer is not None:
        attrs["output.value"] = answer
    return SpanRecord(trace_id=trace, span_id=span, parent_span_id=parent, name="s", start_time_ns=1_000,
                      end_time_ns=2_000_000, attributes=attrs, resource={"service.name": "svc"})


def _whole(trace: str, **kw: Any) -> list[SpanRecord]:
    return [_span(trace, "2" * 16, "1" * 16, **kw), _span(trace, "1" * 16, None, **kw)]


def _count(parts: AgentParts, name: str, **labels: str) -> float:
    return parts.metrics.registry.get_sample_value(f"{name}_total", {**SP, **labels}) or 0.0


def test_a_trace_outside_the_rate_is_skipped_and_its_delivery_released_at_once():
    parts, released = _parts(sample_rate=0.0, priority_errors=False)
    parts.router.submit(_whole("a" * 32), "A")
    assert released == ["A"]
    assert _count(parts, sc.M_TRACES_RECEIVED) == 1
    assert _count(parts, sc.M_TRACES_SKIPPED, reason=sc.SKIP_NOT_SAMPLED) == 1
    assert parts.metrics.registry.get_sample_value(f"{sc.M_RETRIEVAL_LATENCY}_count", SP) == 1
    assert len(parts.ledger) == 0


def test_a_sampled_trace_is_held_until_its_judgement_settles_once():
    parts, released = _parts()
    parts.router.submit(_whole("a" * 32), "A")
    assert released == [] and len(parts.ledger) == 1
    (closed,) = parts.ledger.in_flight.values()
    assert _count(parts, sc.M_TRACES_SAMPLED, reason=sc.SAMPLED_RATE) == 1
    assert parts.router.unaccounted({"a" * 32, "b" * 32}) == {"a" * 32}
    outcome = JudgeOutcome(scores=Scores(SCORES, judge="j"), elapsed_s=0.1)
    parts.router.settle(closed, outcome)
    parts.router.settle(closed, outcome)  # a worker stop() gave up on reports late: never counted twice
    assert released == ["A"]
    assert _count(parts, sc.M_TRACES_SCORED, judge=sc.UNKNOWN_LABEL) == 1
    assert parts.router.unaccounted({"a" * 32}) == set()


def test_judge_skips_and_failures_are_counted_as_such():
    parts, released = _parts()
    parts.router.submit(_whole("a" * 32), "A")
    parts.router.submit(_whole("b" * 32), "B")
    first, second = parts.ledger.in_flight.values()
    parts.router.settle(first, JudgeOutcome(skip=sc.SKIP_BUDGET))
    parts.router.settle(second, JudgeOutcome(failed=sc.FAIL_TIMEOUT))
    assert sorted(map(str, released)) == ["A", "B"]
    assert _count(parts, sc.M_TRACES_SKIPPED, reason=sc.SKIP_BUDGET) == 1
    assert _count(parts, sc.M_TRACES_FAILED, judge=sc.UNKNOWN_LABEL, reason=sc.FAIL_TIMEOUT) == 1


def test_a_redelivered_trace_is_a_duplicate():
    parts, released = _parts(sample_rate=0.0, priority_errors=False)
    parts.router.submit(_whole("a" * 32), "A")
    parts.router.submit(_whole("a" * 32), "B")
    assert released == ["A", "B"]
    skipped = _count(parts, sc.M_TRACES_SKIPPED, reason=sc.SKIP_DUPLICATE)
    late = parts.metrics.registry.get_sample_value(f"{sc.M_DROPPED}_total", {"reason": "late_span"}) or 0
    assert skipped + late >= 1  # recognised by the assembler's memory of closed traces or the ledger's


def test_retrieval_without_documents_is_its_own_verdict_and_shutdown_skips():
    parts, released = _parts()
    parts.router.submit(_whole("a" * 32, documents=False), "A")
    assert _count(parts, sc.M_TRACES_SKIPPED, reason=sc.SKIP_NO_CONTEXT) == 1
    assert _count(parts, sc.M_DIAGNOSIS, verdict=sc.VERDICT_NO_CONTEXT) == 1
    parts.pool.closed = True  # as after stop(): nothing more is judged
    parts.router.submit(_whole("b" * 32), "B")
    assert _count(parts, sc.M_TRACES_SKIPPED, reason=sc.SKIP_SHUTDOWN) == 1
    assert released == ["A", "B"]


def test_a_full_backlog_skips_and_pushes_back():
    parts, _ = _parts(judge_backlog=1)
    parts.router.submit(_whole("a" * 32))
    assert parts.router.backpressure() and not parts.router.admit(_whole("c" * 32))
    parts.router.submit(_whole("b" * 32))
    assert _count(parts, sc.M_TRACES_SKIPPED, reason=sc.SKIP_BACKLOG_FULL) == 1


async def test_a_handed_over_partition_forgets_its_open_traces_and_keeps_its_tokens():
    parts, released = _parts()
    partition = lambda token: isinstance(token, tuple) and token[:2] == ("t", 0)  # noqa: E731
    parts.router.submit([_span("a" * 32, "2" * 16, "1" * 16)], ("t", 0, 1))  # a child: the trace stays open
    parts.router.submit([_span("b" * 32, "2" * 16, "1" * 16)], ("t", 1, 1))
    assert parts.router.unaccounted({"a" * 32, "b" * 32}) == {"a" * 32, "b" * 32}
    handed = await parts.router.hand_over_where(partition, timeout_s=5.0)
    assert handed == {"a" * 32}
    assert parts.router.unaccounted({"a" * 32, "b" * 32}) == {"b" * 32}
    assert released == []  # the next owner reads partition 0 again: never released here
    parts.router.submit([_span("b" * 32, "1" * 16, None)], ("t", 1, 2))
    (closed,) = parts.ledger.in_flight.values()
    parts.router.settle(closed, JudgeOutcome(scores=Scores(SCORES, judge="j")))
    assert sorted(map(str, released)) == [str(("t", 1, 1)), str(("t", 1, 2))]


def test_not_rag_traffic_is_accounted_under_its_reserved_label():
    parts, released = _parts()
    span = SpanRecord(trace_id="a" * 32, span_id="1" * 16, parent_span_id=None, name="index", start_time_ns=0,
                      end_time_ns=1, attributes={sc.RAGMON_NOT_RAG: True}, resource={"service.name": "svc"})
    parts.router.submit([span], "A")
    assert released == ["A"]
    labels = {"service": "svc", "pipeline": sc.NOT_RAG_PIPELINE_LABEL}
    get = parts.metrics.registry.get_sample_value
    assert get(f"{sc.M_TRACES_SKIPPED}_total", {**labels, "reason": sc.SKIP_NOT_RAG}) == 1
    assert get(f"{sc.M_TRACES_RECEIVED}_total", labels) == 1
