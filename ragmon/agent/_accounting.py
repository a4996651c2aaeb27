"""How a trace ends: counted as skipped{reason} or failed{reason} (scores are recorded in
``_steps``), and when a source's delivery token is released (rule 4: only once every trace
with spans in that delivery is accounted for)."""

from __future__ import annotations

from collections.abc import Hashable

from .. import semconv as sc
from ..ingest.closed_trace import AnySpan, ClosedTrace
from ..sampling.sampler import is_negative_feedback
from ..types import RagTrace
from ._state import AgentState


class AccountingMixin(AgentState):
    """Counters for how traces end, and the delivery-token release that follows."""

    def _count_feedback(self, span: AnySpan) -> None:
        # Counted per span, not per trace: feedback often comes after its trace closed (a
        # record_feedback(trace_id=...) span), when it can no longer change the sampling.
        value = span.attributes[sc.RAGMON_FEEDBACK]
        kind = sc.FEEDBACK_NEGATIVE if is_negative_feedback(value) else sc.FEEDBACK_POSITIVE
        pipeline = span.attributes.get(sc.RAGMON_PIPELINE)
        service, pipe = self.metrics.labels_sp(span.service_name, pipeline if isinstance(pipeline, str) else None)
        self.metrics.feedback.labels(service, pipe, kind).inc()

    def _skip_not_rag(self, closed: ClosedTrace, service_name: str) -> None:
        """Not a RAG request (index building, embedding batches, ...): accounted as received and
        skipped{not_rag} under the reserved pipeline label, so traffic panels can leave it out
        (pipeline!="_not_rag") and its span names never take a pipeline label; no latency."""
        service, pipeline = self.metrics.labels_sp(service_name, sc.NOT_RAG_PIPELINE_LABEL)
        self.metrics.traces_received.labels(service, pipeline).inc()
        self.metrics.traces_skipped.labels(service, pipeline, sc.SKIP_NOT_RAG).inc()
        self._account(closed)

    def _count_skip(self, trace: RagTrace, reason: str) -> None:
        service, pipeline = self.metrics.labels_sp(trace.service, trace.pipeline)
        self.metrics.traces_skipped.labels(service, pipeline, reason).inc()

    def _count_failed(self, trace: RagTrace, reason: str) -> None:
        service, pipeline = self.metrics.labels_sp(trace.service, trace.pipeline)
        judge_name = self._judge.name if self._judge is not None else sc.UNKNOWN_LABEL
        self.metrics.traces_failed.labels(service, pipeline, judge_name, reason).inc()

    def _account(self, closed: ClosedTrace, *, remember: bool = True) -> None:
        """The trace is scored, skipped or failed: release delivery tokens no longer needed."""
        trace_id = closed.trace_id
        if self._in_flight.get(trace_id) is closed:
            del self._in_flight[trace_id]
            self._stream.pop(trace_id, None)
            self.metrics.judge_backlog.set(len(self._in_flight))
        if remember:
            self._recent.add(trace_id)
        if trace_id in self._in_flight:
            return  # an earlier copy of this trace is still being judged and holds the tokens
        held = self._trace_tokens.pop(trace_id, None)
        tokens = closed.tokens if held is None else held | closed.tokens
        for token in tokens:
            holders = self._token_traces.get(token)
            if holders is None:
                continue
            holders.discard(trace_id)
            if not holders:
                del self._token_traces[token]
                self._release(token)

    def _release(self, token: Hashable) -> None:
        if self._source is None:
            return
        try:
            self._source.release(token)
        except Exception:  # noqa: BLE001  # a source bug must not leave the trace unaccounted
            self._log_once.warning("release", "source.release failed", exc_info=True)

    def _export_assembler_drops(self) -> None:
        drops = self._assembler.drop_counts
        if not drops:
            return  # (the usual case: called after every submission)
        for reason, count in drops.items():
            delta = count - self._drop_seen.get(reason, 0)
            if delta > 0:
                self.metrics.dropped.labels(reason).inc(delta)
                self._drop_seen[reason] = count

