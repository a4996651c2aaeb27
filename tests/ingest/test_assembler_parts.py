"""A trace written in parts: the SDK's pipeline span announces its retriever and generator spans
(``ragmon.spans.retriever`` / ``.generator``), so a root that comes before them keeps the trace
open until they are in (or the timeout: ``missing_spans``, incomplete); a Kafka hand-off forgets
open traces without closing them (``drop_where``)."""

from __future__ import annotations

from ragmon import semconv as sc
from ragmon.ingest.closed_trace import REASON_MISSING, REASON_ROOT
from tests.fakes.clock import ManualClock

from .test_assembler import make, span

ANNOUNCES = {sc.RAGMON_STAGE: sc.STAGE_PIPELINE, sc.RAGMON_RETRIEVER_SPANS: 1, sc.RAGMON_GENERATOR_SPANS: 1}


def root() -> object:
    return span(1, 1, **ANNOUNCES)


def retriever() -> object:
    return span(1, 2, parent=1, **{sc.RAGMON_STAGE: sc.STAGE_RETRIEVER})


def generator() -> object:
    return span(1, 3, parent=1, **{sc.RAGMON_STAGE: sc.STAGE_GENERATOR})


def test_root_before_its_retrieval_part_waits_for_it() -> None:
    asm = make()
    assert asm.add_spans([generator(), root()], token=("t", 0, 5)).closed == []  # second part first
    assert asm.is_open(f"{1:032x}")
    (closed,) = asm.add_spans([retriever()], token=("t", 0, 4)).closed
    assert closed.reason == REASON_ROOT and closed.complete and closed.trace.complete
    assert closed.trace.span_count == 3
    assert closed.tokens == frozenset({("t", 0, 4), ("t", 0, 5)})


def test_parts_in_order_close_on_the_root_as_before() -> None:
    asm = make()
    assert asm.add_spans([retriever()], token=("t", 0, 1)).closed == []
    (closed,) = asm.add_spans([generator(), root()], token=("t", 0, 2)).closed
    assert closed.reason == REASON_ROOT and closed.trace.complete


def test_a_part_that_never_comes_closes_incomplete_as_missing_spans() -> None:
    clock = ManualClock()
    asm = make(clock, trace_timeout_s=5.0)
    assert asm.add_spans([generator(), root()]).closed == []
    clock.advance(4.9)
    assert asm.expire() == []
    clock.advance(0.2)
    (closed,) = asm.expire()
    assert closed.reason == REASON_MISSING
    assert not closed.complete and not closed.trace.complete


def test_a_root_without_counts_closes_at_once() -> None:
    asm = make()
    (closed,) = asm.add_spans([span(1, 3, parent=1), span(1, 1, **{sc.RAGMON_STAGE: sc.STAGE_PIPELINE})]).closed
    assert closed.reason == REASON_ROOT and closed.trace.complete


def test_drop_where_forgets_open_traces_of_a_partition_without_closing_them() -> None:
    asm = make()
    asm.add_spans([retriever()], token=("t", 0, 1))
    asm.add(span(2, 5, parent=4), token=("t", 1, 1))
    assert asm.drop_where(lambda tok: tok[:2] == ("t", 0)) == [f"{1:032x}"]
    assert not asm.is_open(f"{1:032x}") and asm.is_open(f"{2:032x}")
    # not remembered as closed: the same trace read again (a partition that comes back) is whole
    asm.add_spans([retriever()], token=("t", 0, 1))
    (closed,) = asm.add_spans([generator(), root()], token=("t", 0, 2)).closed
    assert closed.trace.complete and asm.drop_counts[sc.DROP_LATE_SPAN] == 0
