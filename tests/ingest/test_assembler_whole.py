"""``TraceAssembler.add_spans``: a trace that comes whole in one submission is closed without the
open-trace bookkeeping, and everything it does equals ``add`` span by span — on real SDK traces,
and in each case where the shortcut must not apply (root not last, duplicate span, trace already
open or just closed, grace, full assembler, byte bound, span limit, a local root)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ragmon import semconv as sc
from ragmon.ingest.assembler import TraceAssembler
from ragmon.ingest.closed_trace import ClosedTrace
from ragmon.ingest.decode.otlp import decode_export_request
from ragmon.ingest.extract import LatencyOnly, latency_keys
from ragmon.types import SpanRecord
from tests.fakes.clock import ManualClock

from .otel_helpers import SpanFactory
from .test_fast_path import _bodies

LIGHT = LatencyOnly(0.0, latency_keys())
Message = tuple[bytes, Hashable]


def _decode(body: bytes) -> list[Any]:
    return list(decode_export_request(body, content_type="application/x-protobuf", latency_only=LIGHT).spans)


def _summary(closed: ClosedTrace) -> tuple[Any, ...]:
    trace = closed.trace  # built from the light spans on demand: compared too
    return (closed.trace_id, closed.reason, closed.tokens, closed.latency, trace, closed.text_truncated)


def _make(**kw: Any) -> TraceAssembler:
    settings: dict[str, Any] = {"trace_timeout_s": 10.0, "max_open_traces": 100, "max_spans_per_trace": 50}
    settings.update(kw)
    return TraceAssembler(clock=ManualClock(), **settings)


def _both(messages: list[Message], **kw: Any) -> TraceAssembler:
    """Feed ``messages`` to one assembler through ``add_spans`` and to another span by span;
    assert they did the same; return the first."""
    whole, single = _make(**kw), _make(**kw)
    for body, token in messages:
        spans = _decode(body)
        closed, touched, failed = whole.add_spans(spans, token)
        expected: list[ClosedTrace] = []
        for span in spans:
            expected.extend(single.add(span, token))
        assert [_summary(c) for c in closed] == [_summary(c) for c in expected]
        assert touched == list(dict.fromkeys(s.trace_id for s in spans))
        assert failed == []
        assert whole.drop_counts == single.drop_counts
        assert whole.open_count == single.open_count and whole.buffered_bytes == single.buffered_bytes
        assert all(whole.is_open(t) == single.is_open(t) for t in touched)
    flushed = whole.close_all(), single.close_all()
    assert [_summary(c) for c in flushed[0]] == [_summary(c) for c in flushed[1]]
    counts = dict(whole.path_counts)
    assert counts.pop("whole_traces", 0) >= 0
    assert counts == dict(single.path_counts)
    return whole


def test_real_sdk_traces_close_whole_and_as_span_by_span() -> None:
    bodies = _bodies()
    asm = _both([(body, ("topic", 0, i)) for i, body in enumerate(bodies)])
    assert asm.path_counts["whole_traces"] >= len(bodies) // 2  # most messages hold whole traces


def _trace(f: SpanFactory, name: str = "faq") -> ExportTraceServiceRequest:
    f.clear()
    with f.tracer.start_as_current_span("rag", attributes={sc.RAGMON_STAGE: sc.STAGE_PIPELINE,
                                                            sc.RAGMON_PIPELINE: name}), \
            f.tracer.start_as_current_span("search", attributes={sc.RAGMON_STAGE: "retriever"}):
        pass
    return f.request()


def _spans(request: ExportTraceServiceRequest) -> Any:
    return request.resource_spans[0].scope_spans[0].spans


def _root_first(request: ExportTraceServiceRequest) -> None:
    spans = _spans(request)
    spans.extend([spans[0]])
    del spans[0]


def _duplicate_child(request: ExportTraceServiceRequest) -> None:
    spans = _spans(request)
    spans.insert(0, spans[0])


def _child_only(request: ExportTraceServiceRequest) -> None:
    del _spans(request)[1]


def _remote_local_root(request: ExportTraceServiceRequest) -> None:
    root = _spans(request)[1]
    root.parent_span_id = b"\x07" * 8
    root.flags = 0x300  # parent is remote


CASES: dict[str, tuple[list[Callable[[ExportTraceServiceRequest], None] | None], dict[str, Any], bool]] = {
    # name: (one edit per message of the same trace — None: unchanged, twice: sent again), settings, whole
    "whole": ([None], {}, True),
    "root first": ([_root_first], {}, False),
    "duplicate span": ([_duplicate_child], {}, False),
    "already open": ([_child_only, None], {}, False),
    "sent again": ([None, None], {}, True),  # the second copy: late spans, span by span
    "grace": ([None], {"root_grace_s": 1.0}, False),
    "span limit": ([None], {"max_spans_per_trace": 1}, False),
    "byte bound": ([None], {"max_buffered_bytes": 10}, False),
    "local root": ([_remote_local_root], {}, True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_case_equals_span_by_span(case: str) -> None:
    edits, settings, whole = CASES[case]
    f = SpanFactory()
    messages: list[Message] = []
    for _ in range(3):  # three traces, each sent as the case says
        base = _trace(f)
        for i, edit in enumerate(edits):
            request = ExportTraceServiceRequest()
            request.CopyFrom(base)
            if edit is not None:
                edit(request)
            messages.append((request.SerializeToString(), ("t", 0, len(messages) + i)))
    asm = _both(messages, **settings)
    assert (asm.path_counts["whole_traces"] == 3) is whole, dict(asm.path_counts)


def test_a_full_assembler_evicts_span_by_span() -> None:
    f = SpanFactory()
    open_child = _trace(f)
    _child_only(open_child)
    messages: list[Message] = [(open_child.SerializeToString(), "a"), (_trace(f).SerializeToString(), "b")]
    asm = _both(messages, max_open_traces=1)
    assert asm.path_counts["whole_traces"] == 0 and asm.drop_counts[sc.DROP_OPEN_TRACES_FULL] == 1


def test_a_span_add_rejects_is_reported_and_the_rest_go_on() -> None:
    f = SpanFactory()
    good = _decode(_trace(f).SerializeToString())
    # a span id that cannot be hashed: add() raises on it (no decoder makes one; a buggy source could)
    bad = SpanRecord(trace_id="ab" * 16, span_id=["cd"], parent_span_id=None, name="x",  # type: ignore[arg-type]
                     start_time_ns=0, end_time_ns=1, attributes={}, resource={})
    asm = _make(max_buffered_bytes=1 << 20)
    closed, touched, failed = asm.add_spans([bad, *good], "tok")
    assert [span for span, _ in failed] == [bad] and isinstance(failed[0][1], Exception)
    assert [c.trace_id for c in closed] == [good[0].trace_id] and touched == [good[0].trace_id]


def test_the_agent_counts_a_span_it_cannot_assemble_and_keeps_the_rest(caplog: pytest.LogCaptureFixture) -> None:
    from prometheus_client import CollectorRegistry

    from ragmon.agent import Agent
    from ragmon.config import load_agent_config
    from ragmon.testing import StaticJudge

    config = load_agent_config({"receiver_port": 0, "metrics_port": 0, "sample_rate": 0.0}, environ={})
    registry = CollectorRegistry()
    agent = Agent(config, registry=registry, judge=StaticJudge({"faithfulness": 1.0}))
    good = _decode(_trace(SpanFactory()).SerializeToString())
    bad = SpanRecord(trace_id="ab" * 16, span_id=["cd"], parent_span_id=None, name="x",  # type: ignore[arg-type]
                     start_time_ns=0, end_time_ns=1, attributes={}, resource={})
    with caplog.at_level("WARNING"):
        agent.parts.router.submit([bad, *good])
    assert registry.get_sample_value(f"{sc.M_DROPPED}_total", {"reason": sc.DROP_MALFORMED_SPAN}) == 1
    assert registry.get_sample_value(f"{sc.M_TRACES_RECEIVED}_total",
                                     {"service": "support-bot", "pipeline": "faq"}) == 1
    (record,) = [r for r in caplog.records if "could not assemble span" in r.getMessage()]
    assert record.exc_info is not None and record.exc_info[0] is TypeError  # with its traceback
