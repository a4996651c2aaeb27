"""The trace router: the agent's ``SpanSink``. Spans in -> assemble -> the latency recorder for
every trace -> sample -> the judge pool -> the score recorder. Every branch ends in exactly one
accounting call (``DeliveryLedger.account``), after counting how the trace ended: scored,
skipped{reason} or failed{reason}.

One path for every trace: one read for latency only (``ClosedTrace.latency``, outside every judging
rate) and one read in full take the same steps through the same recorder; the first only asks the
sampling policy when it might be judged after all (a priority rule), and then with its full trace.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Hashable, Iterator, Sequence

from .. import semconv as sc
from .._log import LogOnce
from ..export.metrics import AgentMetrics
from ..export.releases import ReleaseTracker
from ..ingest.assembler import TraceAssembler, notable_spans
from ..ingest.closed_trace import REASON_MISSING, AnySpan, ClosedTrace
from ..ingest.extract import LatencyOnly, LatencyTrace
from ..ingest.tally import Tally
from ..sampling import fraction_in_sample, in_sample
from ..sampling.power import JudgeCost, PowerSampler
from ..sampling.sampler import SampleDecision, SamplingPolicy, is_negative_feedback, judgeable_skip_reason
from ..types import RagTrace
from .admission import Admission
from .judge_pool import JudgeOutcome, JudgePool
from .latency import LatencyRecorder, latency_view
from .ledger import DeliveryLedger
from .scores import ScoreRecorder

__all__ = ["TraceRouter"]


class TraceRouter:
    """What happens to each span and trace, from ``submit`` to an accounted outcome."""

    def __init__(self, metrics: AgentMetrics, *, assembler: TraceAssembler, ledger: DeliveryLedger,
                 latency: LatencyRecorder, scores: ScoreRecorder, admission: Admission, policy: SamplingPolicy,
                 power: PowerSampler, judge_cost: JudgeCost, releases: ReleaseTracker, tally: Tally,
                 latency_only: LatencyOnly | None, log_once: LogOnce) -> None:
        self._m = metrics
        self.assembler = assembler
        self._ledger = ledger
        self._latency = latency
        self._scores = scores
        self._admission = admission
        self._policy = policy
        self._power = power
        self._judge_cost = judge_cost
        self._releases = releases
        self._tally = tally
        self._latency_only = latency_only
        self._log_once = log_once
        self._drop_seen: dict[str, int] = {}
        self._batching = 0  # open batch() scopes: flush the tally when the outermost ends
        self._pool: JudgePool | None = None

    def attach(self, pool: JudgePool) -> None:
        """The judge pool judged traces go to (it settles through ``settle`` / ``settle_error``)."""
        self._pool = pool

    # ------------------------------------------------------------------ SpanSink
    @property
    def latency_only(self) -> LatencyOnly | None:
        """Which traces the sources may read for latency only; None when every trace is read in full."""
        return self._latency_only

    def backpressure(self) -> bool:
        return self._admission.backpressure()

    def admit(self, spans: Sequence[AnySpan]) -> bool:
        return self._admission.admit(spans)

    def submit(self, spans: Sequence[AnySpan], token: Hashable | None = None) -> None:
        if notable_spans(spans):
            for span in spans:
                if span.dropped_attributes_count:
                    self._m.span_attribute_limit.labels(self._m.service_label(span.service_name)).inc()
                if sc.RAGMON_FEEDBACK in span.attributes:
                    self._count_feedback(span)
                if sc.SERVICE_VERSION in span.resource:
                    self._releases.note_resource(span.service_name or sc.UNKNOWN_LABEL, span.resource)
        assembler = self.assembler
        closed, touched, failed = assembler.add_spans(spans, token)
        for span, error in failed:  # one bad span never stops the agent
            self._m.dropped.labels(sc.DROP_MALFORMED_SPAN).inc()
            self._log_once.warning("assemble", "could not assemble span %s", span.span_id, exc_info=error)
        self.process(closed)
        if token is not None:
            # The token is held by the traces it touched that are still open or being judged;
            # (the judge runs only once this returns, so nothing in between can release them)
            self._ledger.hold(token, touched, assembler.is_open)
        if assembler.drop_counts:  # (no call when, as usual, nothing was ever dropped)
            self.export_assembler_drops()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Submissions inside apply their metric updates together at the end (a source hands a
        fetched batch over like this; nothing may await inside, see ``ingest/tally.py``)."""
        self._batching += 1
        try:
            yield
        finally:
            self._batching -= 1
            if not self._batching:
                self._tally.flush()

    async def flush_where(self, predicate: Callable[[Hashable], bool], timeout_s: float) -> None:
        self.process(self.assembler.close_where(predicate))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self._ledger.waiting(predicate):
                return
            await asyncio.sleep(0.05)

    async def hand_over_where(self, predicate: Callable[[Hashable], bool], timeout_s: float) -> set[str]:
        """A Kafka partition goes to another agent: forget its open traces unjudged (their messages
        stay uncommitted, so the next owner reads them again and judges each whole), wait (bounded)
        for its traces in the judge, then let go of its delivery tokens without releasing them.
        Returns the ids of the traces handed on. A trace with spans in other partitions too (an
        unkeyed topic) is closed and judged as before (``flush_where``)."""
        dropped = set(self.assembler.drop_where(predicate))
        self._ledger.forget(dropped)  # their tokens keep them as holders: never released
        self.process(self.assembler.close_where(predicate))
        self._m.open_traces.set(self.assembler.open_count)
        deadline = time.monotonic() + timeout_s
        # a bounded poll, like flush_where's: the judge accounts for these traces on its own time
        while time.monotonic() < deadline and self._ledger.waiting(predicate, dropped):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        self._ledger.let_go(predicate)  # the partition is gone: a later release would be ignored
        return dropped

    def unaccounted(self, trace_ids: set[str]) -> set[str]:
        """Those of ``trace_ids`` still being assembled or judged."""
        is_open, in_flight = self.assembler.is_open, self._ledger.in_flight
        return {t for t in trace_ids if t in in_flight or is_open(t)}

    # ------------------------------------------------------------------ traces
    def process(self, closed: Sequence[ClosedTrace]) -> None:
        """Route closed traces (from a submission, the expiry tick, a flush or stop)."""
        try:
            for item in closed:
                try:
                    self._route(item)
                except Exception:  # noqa: BLE001  # one bad trace never stops the agent (rule 2)
                    self._log_once.warning("process", "internal error processing trace %s",
                                           item.trace_id, exc_info=True)
                    self._fail(item, item.trace, sc.FAIL_INTERNAL)
        finally:
            if not self._batching:
                self._tally.flush()

    def expire(self) -> None:
        """Close the traces that timed out, and export what the assembler dropped."""
        self.process(self.assembler.expire())
        self.export_assembler_drops()

    def _route(self, closed: ClosedTrace) -> None:
        view = closed.latency  # set for a trace read for latency only
        full = view is None
        if view is None:
            view = latency_view(closed.trace)
        if view.not_rag:
            self._skip_not_rag(closed, view.service)
            return
        ledger = self._ledger
        series = self._latency.record(view, closed.reason, ledger.seen(view.trace_id))
        if series is None:  # a duplicate: counted, not remembered again
            ledger.account(closed, remember=False)
            return
        power = self._power
        rate = power.rate_for(series.key) if power.adaptive else None
        if not full and not self._may_be_judged(view, rate):
            self._latency.not_sampled(series)
            ledger.account(closed)
            return
        trace = closed.trace  # (read for latency only: the full extraction now, and the full decision)
        self._decided(closed, trace, self._policy.decide(trace, rate))

    def _may_be_judged(self, lt: LatencyTrace, rate: float | None) -> bool:
        """Whether ``SamplingPolicy.decide`` could pick this trace; False only when it surely won't."""
        policy = self._policy
        if rate is None:
            rate = policy.rate_for(lt.pipeline)
        fraction = lt.fraction  # in_sample's, hashed once already by the reader (-1.0: not hashed)
        if in_sample(lt.trace_id, rate) if fraction < 0.0 else fraction_in_sample(fraction, rate):
            return True
        if policy.priority_errors and lt.has_error:
            return True  # the rule reads RAG spans only: the full trace tells
        if (policy.slow_retrieval_s is not None and lt.retrieval_latency_s is not None
                and lt.retrieval_latency_s > policy.slow_retrieval_s):
            return True
        if policy.priority_feedback and is_negative_feedback(lt.feedback):
            return True
        top = lt.top_retrieval_score
        return policy.min_top_score is not None and top is not None and top < policy.min_top_score

    def _decided(self, closed: ClosedTrace, trace: RagTrace, decision: SampleDecision) -> None:
        """Skip, or queue for the judge, a trace whose sampling is decided."""
        if closed.reason == REASON_MISSING:  # a part never came: judging the rest would mislead
            self._skip(closed, trace, sc.SKIP_INCOMPLETE)
            return
        if not decision.sampled:
            self._skip(closed, trace, decision.reason)
            return
        reason = judgeable_skip_reason(trace)
        if reason is not None:
            self._skip(closed, trace, reason)
            return
        if not trace.documents and trace.retrieval_latency_s is not None:
            # retrieval ran and returned nothing: its own verdict, counted and shown, not judged
            self._scores.no_context(trace)
            self._skip(closed, trace, sc.SKIP_NO_CONTEXT)
            return
        service, pipeline = self._m.labels_sp(trace.service, trace.pipeline)
        self._m.traces_sampled.labels(service, pipeline, decision.reason).inc()
        pool = self._pool
        if pool is None or pool.closed:
            self._skip(closed, trace, sc.SKIP_SHUTDOWN)
            return
        if self._admission.backpressure():
            self._log_once.warning("backlog", "judge backlog full (%d); skipping traces", self._admission.backlog)
            self._skip(closed, trace, sc.SKIP_BACKLOG_FULL)
            return
        pool.put(closed)
        if closed.text_truncated:
            # Counted for judged traces only: the cut bounds what the judge reads; a trace
            # that is never judged loses nothing (and the latency-only path reads no text).
            self._m.dropped.labels(sc.DROP_TEXT_TRUNCATED).inc()
        self._ledger.enqueue(closed, decision.stream)

    # ------------------------------------------------------------------ judged
    def settle(self, closed: ClosedTrace, outcome: JudgeOutcome) -> None:
        """How the judge pool's judgement of ``closed`` ended (ignored when it is accounted already:
        stop() gave up waiting for its worker; never count twice)."""
        ledger = self._ledger
        if not ledger.holds(closed):
            return
        trace = closed.trace
        if outcome.skip is not None:
            self._skip(closed, trace, outcome.skip)
            return
        scores = outcome.scores
        if scores is None:
            self._fail(closed, trace, outcome.failed or sc.FAIL_INTERNAL)
            return
        judge_name = self._pool.judge_name if self._pool is not None else sc.UNKNOWN_LABEL
        self._m.judge_duration.labels(judge_name).observe(outcome.elapsed_s)
        self._judge_cost.observe(scores.prompt_tokens + scores.completion_tokens, outcome.elapsed_s)
        # rate-stream scores are the unbiased sample means alerts read; priority ones only explain
        stream = ledger.stream_of(trace.trace_id) or sc.SAMPLE_STREAM_RATE
        self._scores.record(trace, scores, judge_name, stream)
        ledger.account(closed)

    def settle_error(self, closed: ClosedTrace) -> None:
        """Settling ``closed`` raised (a bug): failed{internal_error}, unless accounted already."""
        if closed.trace_id in self._ledger.in_flight:
            self._fail(closed, closed.trace, sc.FAIL_INTERNAL)

    def shut_out(self) -> None:
        """stop(): whatever the grace period could not finish is skipped{shutdown}, never lost."""
        for closed in list(self._ledger.in_flight.values()):
            self._skip(closed, closed.trace, sc.SKIP_SHUTDOWN)

    # ------------------------------------------------------------------ outcomes
    def _skip(self, closed: ClosedTrace, trace: RagTrace, reason: str) -> None:
        service, pipeline = self._m.labels_sp(trace.service, trace.pipeline)
        self._m.traces_skipped.labels(service, pipeline, reason).inc()
        self._ledger.account(closed)

    def _fail(self, closed: ClosedTrace, trace: RagTrace, reason: str) -> None:
        service, pipeline = self._m.labels_sp(trace.service, trace.pipeline)
        judge_name = self._pool.judge_name if self._pool is not None else sc.UNKNOWN_LABEL
        self._m.traces_failed.labels(service, pipeline, judge_name, reason).inc()
        self._ledger.account(closed)

    def _skip_not_rag(self, closed: ClosedTrace, service_name: str) -> None:
        """Not a RAG request (index building, embedding batches, ...): accounted as received and
        skipped{not_rag} under the reserved pipeline label, so traffic panels can leave it out
        (pipeline!="_not_rag") and its span names never take a pipeline label; no latency."""
        service, pipeline = self._m.labels_sp(service_name, sc.NOT_RAG_PIPELINE_LABEL)
        self._m.traces_received.labels(service, pipeline).inc()
        self._m.traces_skipped.labels(service, pipeline, sc.SKIP_NOT_RAG).inc()
        self._ledger.account(closed)

    def _count_feedback(self, span: AnySpan) -> None:
        # Counted per span, not per trace: feedback often comes after its trace closed (a
        # record_feedback(trace_id=...) span), when it can no longer change the sampling.
        value = span.attributes[sc.RAGMON_FEEDBACK]
        kind = sc.FEEDBACK_NEGATIVE if is_negative_feedback(value) else sc.FEEDBACK_POSITIVE
        pipeline = span.attributes.get(sc.RAGMON_PIPELINE)
        service, pipe = self._m.labels_sp(span.service_name, pipeline if isinstance(pipeline, str) else None)
        self._m.feedback.labels(service, pipe, kind).inc()

    def export_assembler_drops(self) -> None:
        drops = self.assembler.drop_counts
        if not drops:
            return  # (the usual case)
        for reason, count in drops.items():
            delta = count - self._drop_seen.get(reason, 0)
            if delta > 0:
                self._m.dropped.labels(reason).inc(delta)
                self._drop_seen[reason] = count
