"""Admission and back-pressure (rule 3: pause the source before dropping): whether the judge
backlog can take what a source is about to hand over."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..ingest.closed_trace import AnySpan
from ..sampling import in_sample

__all__ = ["Admission"]


class Admission:
    """Answers a source's ``backpressure()`` and ``admit(spans)`` from the judge backlog.

    ``in_flight()`` counts the traces queued for or inside the judge; ``max_rate()`` is the highest
    rate any pipeline is judged at now; ``priority_errors``: errored traces are judged whatever the rate."""

    def __init__(self, backlog: int, in_flight: Callable[[], int], max_rate: Callable[[], float], *,
                 priority_errors: bool) -> None:
        self.backlog = backlog
        self._in_flight = in_flight
        self._max_rate = max_rate
        self._priority_errors = priority_errors

    def backpressure(self) -> bool:
        """The judge backlog is full: the source pauses."""
        return self._in_flight() >= self.backlog

    def admit(self, spans: Sequence[AnySpan]) -> bool:
        """Whether the judge backlog can take every trace these spans may send to the judge (the
        OTLP receiver answers 503 Retry-After otherwise, before accepting anything). The demand is
        estimated from the spans that close a trace (roots): those inside the highest sample rate,
        or carrying an error when errors are priority. An export bigger than the whole backlog is
        admitted once the backlog is empty (its overflow is skipped as backlog_full)."""
        in_flight = self._in_flight()
        free = self.backlog - in_flight
        if free <= 0:
            return False
        rate = self._max_rate()
        demand: set[str] = set()
        for span in spans:
            priority = self._priority_errors and span.status_code == "ERROR"
            closes = span.parent_span_id is None or span.parent_is_remote
            if not (closes or priority) or span.trace_id in demand:
                continue
            if priority or in_sample(span.trace_id, rate):
                demand.add(span.trace_id)
                if len(demand) > free and in_flight:
                    return False
        return True
