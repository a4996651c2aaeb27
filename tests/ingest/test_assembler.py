"""Trace assembly: completion by root, grace for late children, timeouts on a manual clock,
eviction, per-trace span limits, late and duplicate spans, flushing by delivery token."""

from __future__ import annotations

import pytest

from ragmon import semconv as sc
from ragmon.ingest.assembler import TraceAssembler
from ragmon.ingest.closed_trace import ClosedTrace
from ragmon.types import SpanRecord
from tests.fakes.clock import ManualClock
from tests.ingest.otel_helpers import SpanFactory


def span(trace: int, span_id: int, parent: int | None = None, *, start: int = 0, end: int = 1000,
         **attributes: object) -> SpanRecord:
    return SpanRecord(
        trace_id=f"{trace:032x}", span_id=f"{span_id:016x}",
        parent_span_id=None if parent is None else f"{parent:016x}",
        name=f"span-{span_id}", start_time_ns=start, end_time_ns=end,
        attributes=dict(attributes), resource={"service.name": "svc"},
    )


def make(clock: ManualClock | None = None, **kw: object) -> TraceAssembler:
    settings: dict = {"trace_timeout_s": 10.0, "max_open_traces": 100, "max_spans_per_trace": 50}
    settings.update(kw)
    return TraceAssembler(clock=clock or ManualClock(), **settings)


def ids(closed: list[ClosedTrace]) -> list[str]:
    return [c.trace.trace_id for c in closed]


def test_root_completes_the_trace_with_all_tokens() -> None:
    asm = make()
    assert asm.add(span(1, 2, parent=1), token=("topic", 0, 10)) == []
    assert asm.add(span(1, 3, parent=2), token=("topic", 1, 7)) == []
    assert asm.is_open(f"{1:032x}") and asm.open_count == 1
    (closed,) = asm.add(span(1, 1), token=("topic", 0, 11))
    assert closed.reason == "root"
    assert closed.trace.complete is True
    assert closed.trace.span_count == 3
    assert closed.tokens == frozenset({("topic", 0, 10), ("topic", 1, 7), ("topic", 0, 11)})
    assert asm.open_count == 0 and not asm.is_open(f"{1:032x}")


def test_real_sdk_trace_closes_on_its_root() -> None:
    f = SpanFactory()
    with f.tracer.start_as_current_span("rag", attributes={"ragmon.pipeline": "faq"}), \
            f.tracer.start_as_current_span("search"):
        pass
    asm = make()
    closed = [c for s in f.records() for c in asm.add(s)]  # SDK order: child first, root last
    assert [c.reason for c in closed] == ["root"]
    assert closed[0].trace.pipeline == "faq" and closed[0].trace.span_count == 2
    assert closed[0].tokens == frozenset()


def test_late_span_after_root_is_counted_not_reopened() -> None:
    asm = make()
    asm.add(span(1, 1))
    assert asm.add(span(1, 2, parent=1), token="late") == []
    assert asm.open_count == 0
    assert asm.drop_counts[sc.DROP_LATE_SPAN] == 1
    assert not asm.holds_token("late")  # the agent may release that delivery at once


def test_root_grace_takes_late_children_in() -> None:
    clock = ManualClock()
    asm = make(clock, root_grace_s=1.0)
    assert asm.add(span(1, 1)) == []  # root, but grace is on
    clock.advance(0.5)
    assert asm.add(span(1, 2, parent=1)) == []
    assert asm.expire() == []
    clock.advance(0.6)  # 1.1 s after the root
    (closed,) = asm.expire()
    assert closed.reason == "root" and closed.trace.complete and closed.trace.span_count == 2
    assert asm.add(span(1, 3, parent=1)) == []
    assert asm.drop_counts[sc.DROP_LATE_SPAN] == 1


def test_trace_without_root_times_out_after_inactivity() -> None:
    clock = ManualClock()
    asm = make(clock, trace_timeout_s=10.0)
    asm.add(span(1, 2, parent=1))
    clock.advance(9.0)
    asm.add(span(1, 3, parent=1))  # activity restarts the timer
    clock.advance(9.0)
    assert asm.expire() == []
    clock.advance(1.0)
    (closed,) = asm.expire()
    assert closed.reason == "timeout"
    assert closed.trace.complete is False
    assert closed.trace.span_count == 2
    assert asm.open_count == 0


def test_expire_returns_only_stale_traces_oldest_first() -> None:
    clock = ManualClock()
    asm = make(clock, trace_timeout_s=5.0)
    for trace in range(1, 6):
        asm.add(span(trace, 100 + trace, parent=1))
        clock.advance(1.0)
    asm.add(span(2, 999, parent=1))  # trace 2 is active again: now the freshest
    clock.advance(2.5)  # now t=7.5: trace 1 idle 7.5 s, 3 idle 5.5 s, 4 idle 4.5 s, 2 idle 2.5 s
    assert ids(asm.expire()) == [f"{1:032x}", f"{3:032x}"]
    assert asm.open_count == 3


def test_full_assembler_evicts_least_recently_active_and_counts() -> None:
    clock = ManualClock()
    asm = make(clock, max_open_traces=3)
    for trace in (1, 2, 3):
        asm.add(span(trace, 10 + trace, parent=1), token=f"tok{trace}")
        clock.advance(1)
    asm.add(span(1, 99, parent=1))  # touch trace 1: trace 2 is now the stalest
    (evicted,) = asm.add(span(4, 40, parent=1))
    assert evicted.reason == "evicted"
    assert evicted.trace.trace_id == f"{2:032x}" and evicted.trace.complete is False
    assert evicted.tokens == frozenset({"tok2"})
    assert asm.drop_counts[sc.DROP_OPEN_TRACES_FULL] == 1
    assert asm.open_count == 3


def test_spans_per_trace_limit_drops_extra_spans_but_keeps_the_root() -> None:
    asm = make(max_spans_per_trace=3)
    for i in range(2, 7):
        asm.add(span(1, i, parent=1))
    assert asm.drop_counts[sc.DROP_SPANS_PER_TRACE] == 2
    (closed,) = asm.add(span(1, 1))
    assert closed.trace.span_count == 4  # 3 children + the root, which is never dropped
    assert closed.trace.complete


def test_duplicate_spans_are_counted_once() -> None:
    asm = make()
    asm.add(span(1, 2, parent=1), token="a")
    asm.add(span(1, 2, parent=1), token="b")  # redelivered
    assert asm.drop_counts[sc.DROP_DUPLICATE_SPAN] == 1
    (closed,) = asm.add(span(1, 1))
    assert closed.trace.span_count == 2
    assert closed.tokens == frozenset({"a", "b"})  # both deliveries are settled by this trace


def test_close_where_flushes_traces_holding_matching_tokens() -> None:
    asm = make()
    asm.add(span(1, 11, parent=1), token=("t", 0, 1))
    asm.add(span(2, 21, parent=1), token=("t", 1, 1))
    asm.add(span(3, 31, parent=1), token=("t", 1, 2))
    asm.add(span(3, 32, parent=1), token=("t", 0, 2))
    assert asm.holds_token(("t", 0, 1))
    closed = asm.close_where(lambda tok: isinstance(tok, tuple) and tok[1] == 0)
    assert sorted(ids(closed)) == [f"{1:032x}", f"{3:032x}"]
    assert {c.reason for c in closed} == {"flush"}
    assert asm.open_count == 1 and asm.is_open(f"{2:032x}")
    assert not asm.holds_token(("t", 0, 1))


def test_close_all_flushes_everything() -> None:
    asm = make()
    for trace in range(1, 4):
        asm.add(span(trace, 10, parent=1))
    closed = asm.close_all()
    assert len(closed) == 3 and {c.reason for c in closed} == {"flush"}
    assert all(c.trace.complete is False for c in closed)
    assert asm.open_count == 0 and asm.close_all() == []


def test_ten_thousand_open_traces() -> None:
    clock = ManualClock()
    asm = make(clock, max_open_traces=10_000, trace_timeout_s=30.0)
    for trace in range(1, 10_001):
        assert asm.add(span(trace, 2, parent=1)) == []
    assert asm.open_count == 10_000
    clock.advance(15)
    assert asm.expire() == []  # nothing stale: the check stops at the first fresh trace
    (evicted,) = asm.add(span(20_000, 2, parent=1))
    assert evicted.trace.trace_id == f"{1:032x}"
    assert asm.drop_counts[sc.DROP_OPEN_TRACES_FULL] == 1
    clock.advance(30)
    closed = asm.expire()
    assert len(closed) == 10_000 and {c.reason for c in closed} == {"timeout"}
    assert asm.open_count == 0


def test_closed_id_memory_is_bounded() -> None:
    asm = make(closed_ids_size=2)
    for trace in (1, 2, 3):
        asm.add(span(trace, 1))
    assert asm.add(span(3, 5, parent=1)) == []
    assert asm.drop_counts[sc.DROP_LATE_SPAN] == 1
    asm.add(span(1, 5, parent=1))  # trace 1 was forgotten: it opens again as a partial trace
    assert asm.is_open(f"{1:032x}")


def test_odd_attributes_never_break_assembly() -> None:
    asm = make()
    weird = span(1, 2, parent=1, **{
        "openinference.span.kind": "RETRIEVER",
        "retrieval.documents.0.document.score": "not a number",
        "retrieval.documents.0.document.id": ["a", "list"],
        "retrieval.documents.x.document.id": "bad index",
        "input.value": b"\xff\xfe bytes",
        "output.value": 42,
        "ragmon.content.sampled": "maybe",
        "gen_ai.retrieval.documents": "{not json",
    })
    asm.add(weird)
    (closed,) = asm.add(span(1, 1, **{"input.value": {"k": [1, {"x": None}]}, "ragmon.feedback": [1]}))
    assert closed.trace.span_count == 2 and closed.reason == "root"


@pytest.mark.parametrize("kw", [{"trace_timeout_s": 0}, {"max_open_traces": 0}, {"max_spans_per_trace": 0},
                                {"root_grace_s": -1}])
def test_bad_settings_are_refused(kw: dict) -> None:
    with pytest.raises(ValueError):
        make(**kw)


def _remote_parent_context():  # type: ignore[no-untyped-def]
    from opentelemetry import trace as trace_api
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    upstream = SpanContext(trace_id=0xABC, span_id=0xDEF, is_remote=True, trace_flags=TraceFlags(1))
    return trace_api.set_span_in_context(NonRecordingSpan(upstream))


def test_local_root_with_remote_parent_completes_a_rag_trace() -> None:
    """An app called through a gateway whose spans go elsewhere: its entry span is the root here."""
    f = SpanFactory()
    with f.tracer.start_as_current_span("POST /ask", context=_remote_parent_context()), \
            f.tracer.start_as_current_span("rag", attributes={"ragmon.stage": "pipeline", "ragmon.pipeline": "faq"}), \
            f.tracer.start_as_current_span("search", attributes={"ragmon.stage": "retriever"}):
        pass
    asm = make()
    closed = [c for s in f.records() for c in asm.add(s)]
    assert [c.reason for c in closed] == ["root"]
    trace = closed[0].trace
    assert trace.complete and trace.span_count == 3 and trace.pipeline == "faq"
    assert asm.open_count == 0


def test_remote_parent_without_pipeline_waits_for_the_real_root() -> None:
    """A retriever *service* called by the app: its entry span must not close the app's trace."""
    f = SpanFactory("retriever-svc")
    with f.tracer.start_as_current_span("POST /search", context=_remote_parent_context()), \
            f.tracer.start_as_current_span("search", attributes={"openinference.span.kind": "RETRIEVER"}):
        pass
    asm = make()
    assert [c for s in f.records() for c in asm.add(s)] == []
    assert asm.open_count == 1


def test_buffered_bytes_bound_evicts_least_recently_active() -> None:
    text = "x" * 10_000
    asm = make(max_buffered_bytes=35_000)
    asm.add(span(1, 2, parent=1, content=text))
    asm.add(span(2, 2, parent=1, content=text))
    asm.add(span(3, 2, parent=1, content=text))
    assert asm.open_count == 3 and 30_000 < asm.buffered_bytes <= 35_000
    (evicted,) = asm.add(span(4, 2, parent=1, content=text))
    assert evicted.reason == "evicted" and evicted.trace.trace_id == f"{1:032x}"
    assert asm.drop_counts[sc.DROP_OPEN_TRACES_FULL] == 1
    assert asm.buffered_bytes <= 35_000
    asm.close_all()
    assert asm.buffered_bytes == 0  # every byte is given back


def test_single_trace_larger_than_the_byte_bound_is_closed_not_kept() -> None:
    asm = make(max_buffered_bytes=5_000)
    (evicted,) = asm.add(span(1, 2, parent=1, content="y" * 20_000))
    assert evicted.reason == "evicted" and asm.open_count == 0 and asm.buffered_bytes == 0
