"""What both OTLP receivers do with an export around its decoding, written once: refuse it while
the agent is closed or applying back-pressure, count and log its malformed spans, admit its traces
against the judge backlog, and hand its spans to the sink.

A refusal is a ``Busy``: the export was not taken and the client should send it again later. Each
receiver answers it in its own protocol (OTLP/HTTP: 503 with ``Retry-After``; OTLP/gRPC:
``UNAVAILABLE`` with ``RetryInfo``), so an export is never answered OK and then dropped.

Both ask before they accept (``admits``, ``backpressure``: the OTLP spec's 503/UNAVAILABLE with
a retry hint must come *before* the exporter is told "accepted") and then submit the spans in
slices, yielding to the event loop between them, so one huge export never keeps health probes
and other requests waiting. A broken probe never takes a receiver down: it admits.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from ... import semconv as sc
from ..._log import LogOnce
from ...types import SpanRecord
from ..decode.otlp import SpanBatch
from ..source import LightSpan, SourceMetrics, SpanSink

log = logging.getLogger(__name__)

SUBMIT_SLICE: Final = 2_000  # spans handed to the sink between two yields to the event loop


@dataclass(frozen=True, slots=True)
class Busy:
    """The export was not taken; the client should retry it (``message`` goes in the answer)."""

    message: str


class ExportAdmission:
    """One receiver's admission (``source`` label ``name``; ``label`` and ``retry_answer`` word the
    log lines, e.g. "OTLP/gRPC receiver" and "UNAVAILABLE with RetryInfo"). Exports are handed over
    one at a time, so admission and submission of two exports cannot interleave."""

    def __init__(self, name: str, label: str, retry_answer: str, metrics: SourceMetrics, log_once: LogOnce) -> None:
        self._name = name
        self._label = label
        self._retry_answer = retry_answer
        self._metrics = metrics
        self._log_once = log_once
        self._submit_lock = asyncio.Lock()

    def count(self, outcome: str) -> None:
        self._metrics.requests_received.labels(self._name, outcome).inc()

    def before_reading(self, sink: SpanSink | None, accepting: bool) -> Busy | None:
        """Refuse before reading the export when shutting down or when the judge backlog is full."""
        if sink is None or not accepting:
            self.count(sc.OUTCOME_THROTTLED)
            return Busy("receiver is shutting down")
        if backpressure(sink):
            self.count(sc.OUTCOME_THROTTLED)
            self._log_once.warning("backpressure", "%s: judge backlog full, answering %s so exporters back off",
                                   self._label, self._retry_answer)
            return Busy("agent is busy; retry later")
        return None

    async def submit(self, sink: SpanSink, batch: SpanBatch) -> Busy | None:
        """Count the batch's malformed spans, admit its traces and submit its spans; the request is
        counted (ok, partial, throttled or rejected) either way."""
        if batch.rejected_spans:
            self._metrics.dropped.labels(sc.DROP_MALFORMED_SPAN).inc(batch.rejected_spans)
            self._log_once.warning("malformed_span", "%s: rejected %d malformed span(s): %s",
                                   self._label, batch.rejected_spans, "; ".join(batch.errors[:3]))
        if batch.spans:
            async with self._submit_lock:
                if not admits(sink, batch.spans):
                    # Nothing of this export was accepted: the client retries it later, instead of
                    # an answer OK followed by skips{backlog_full} that no exporter ever retries.
                    self.count(sc.OUTCOME_THROTTLED)
                    self._log_once.warning("admission", "%s: the judge backlog cannot take this export's traces; "
                                           "answering %s", self._label, self._retry_answer)
                    return Busy("agent is busy; retry later")
                self._metrics.spans_received.labels(self._name).inc(len(batch.spans))
                try:
                    await submit_in_slices(sink, batch.spans)
                except Exception:  # noqa: BLE001  # the sink must not raise; if it does, the client should retry
                    self.count(sc.OUTCOME_REJECTED)
                    self._log_once.warning("submit", "%s: sink.submit failed", self._label, exc_info=True)
                    return Busy("agent failed to accept spans")
        self.count(sc.OUTCOME_PARTIAL if batch.rejected_spans else sc.OUTCOME_OK)
        return None


def admits(sink: SpanSink, spans: Sequence[SpanRecord | LightSpan]) -> bool:
    """The sink's admission check for this export (``SpanSink.admit``)."""
    try:
        return bool(sink.admit(spans))
    except Exception:  # a broken admission probe must not take the receiver down
        log.debug("sink.admit() failed", exc_info=True)
        return True


def backpressure(sink: SpanSink) -> bool:
    """Whether the sink wants the source to pause (``SpanSink.backpressure``)."""
    try:
        return bool(sink.backpressure())
    except Exception:  # a broken back-pressure probe must not take the receiver down
        log.debug("sink.backpressure() failed", exc_info=True)
        return False


async def submit_in_slices(sink: SpanSink, spans: Sequence[SpanRecord | LightSpan]) -> None:
    """Hand ``spans`` over in slices of ``SUBMIT_SLICE``, yielding to the loop between them."""
    for start in range(0, len(spans), SUBMIT_SLICE):
        if start:
            await asyncio.sleep(0)
        sink.submit(spans[start:start + SUBMIT_SLICE], None)
