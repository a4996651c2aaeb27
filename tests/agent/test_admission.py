"""Admission alone: back-pressure at the backlog, and an export admitted only when the backlog can
take the traces it may send to the judge."""

from __future__ import annotations

from ragmon.agent.admission import Admission
from ragmon.sampling import in_sample
from ragmon.types import SpanRecord


def _root(trace_id: str, status: str = "UNSET", parent: str | None = None) -> SpanRecord:
    return SpanRecord(trace_id=trace_id, span_id="1" * 16, parent_span_id=parent, name="rag",
                      start_time_ns=0, end_time_ns=1, status_code=status)


def _ids(n: int, rate: float, inside: bool) -> list[str]:
    """n trace ids that the ``rate`` picks (``inside``) or does not."""
    ids, i = [], 0
    while len(ids) < n:
        trace_id = f"{i:032x}"
        if in_sample(trace_id, rate) == inside:
            ids.append(trace_id)
        i += 1
    return ids


def test_backpressure_while_the_backlog_is_full():
    in_flight = [0]
    admission = Admission(3, lambda: in_flight[0], lambda: 1.0, priority_errors=True)
    assert not admission.backpressure()
    in_flight[0] = 3
    assert admission.backpressure()
    assert not admission.admit([_root("a" * 32)])


def test_an_export_is_admitted_when_its_judged_traces_fit():
    in_flight = [1]
    admission = Admission(3, lambda: in_flight[0], lambda: 0.5, priority_errors=False)
    judged = _ids(3, 0.5, inside=True)
    assert admission.admit([_root(t) for t in judged[:2]])  # 2 free places, 2 traces the rate picks
    assert not admission.admit([_root(t) for t in judged])  # 3 do not fit
    # traces outside the rate, and spans that close no trace, ask nothing of the judge
    assert admission.admit([_root(t) for t in _ids(10, 0.5, inside=False)])
    assert admission.admit([_root(t, parent="2" * 16) for t in judged])


def test_errors_are_demand_when_they_are_priority():
    in_flight = [2]
    outside = _ids(2, 0.1, inside=False)
    spans = [_root(t, status="ERROR", parent="2" * 16) for t in outside]
    assert not Admission(3, lambda: in_flight[0], lambda: 0.1, priority_errors=True).admit(spans)
    assert Admission(3, lambda: in_flight[0], lambda: 0.1, priority_errors=False).admit(spans)


def test_an_export_bigger_than_the_backlog_is_admitted_once_it_is_empty():
    admission = Admission(2, lambda: 0, lambda: 1.0, priority_errors=True)
    assert admission.admit([_root(f"{i:032x}") for i in range(5)])
