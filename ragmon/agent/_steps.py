"""The per-trace path: spans in (the ``SpanSink`` side) -> assemble -> latency for every trace
-> sample -> judge -> record scores. Every branch ends in exactly one accounting call."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable, Hashable, Iterator, Sequence

from .. import semconv as sc
from ..errors import JudgeBudgetExceeded, JudgeError
from ..ingest.assembler import notable_spans
from ..ingest.closed_trace import REASON_MISSING, AnySpan, ClosedTrace
from ..quality import is_failing
from ..sampling.sampler import SampleDecision, judgeable_skip_reason
from ..scoring import claim_verdicts
from ..scoring.metrics.diagnosis import diagnose
from ..types import RagTrace, Scores
from ._admission import AdmissionMixin
from ._latency import LatencyOnlyMixin


class TraceStepsMixin(LatencyOnlyMixin, AdmissionMixin):
    """What happens to each span and trace, from ``submit`` to recorded scores."""

    # ------------------------------------------------------------------ SpanSink
    def submit(self, spans: Sequence[AnySpan], token: Hashable | None = None) -> None:
        if notable_spans(spans):
            for span in spans:
                if span.dropped_attributes_count:
                    self.metrics.span_attribute_limit.labels(
                        self.metrics.service_label(span.service_name)).inc()
                if sc.RAGMON_FEEDBACK in span.attributes:
                    self._count_feedback(span)
                if sc.SERVICE_VERSION in span.resource:
                    self._releases.note_resource(span.service_name or sc.UNKNOWN_LABEL, span.resource)
        closed, touched, failed = self._assembler.add_spans(spans, token)
        for span, error in failed:  # one bad span never stops the agent
            self.metrics.dropped.labels(sc.DROP_MALFORMED_SPAN).inc()
            self._log_once.warning("assemble", "could not assemble span %s", span.span_id, exc_info=error)
        self._process_closed(closed)
        if token is not None:
            # The token is held by the traces it touched that are still open or being judged;
            # those accounted just now (the usual case: a trace in one message) need no entry.
            # (The judge runs only once this returns, so nothing in between can release them.)
            in_flight, is_open = self._in_flight, self._assembler.is_open
            for trace_id in touched:
                if trace_id in in_flight or is_open(trace_id):
                    self._token_traces.setdefault(token, set()).add(trace_id)
                    self._trace_tokens.setdefault(trace_id, set()).add(token)
            if not self._token_traces.get(token):
                self._token_traces.pop(token, None)
                self._release(token)
        if self._assembler.drop_counts:  # (no call when, as usual, nothing was ever dropped)
            self._export_assembler_drops()

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
        self._process_closed(self._assembler.close_where(predicate))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not any(predicate(tok) for tok in self._token_traces):
                return
            await asyncio.sleep(0.05)

    async def hand_over_where(self, predicate: Callable[[Hashable], bool], timeout_s: float) -> set[str]:
        """A Kafka partition goes to another agent: forget its open traces unjudged (their messages
        stay uncommitted, so the next owner reads them again and judges each whole), wait (bounded)
        for its traces in the judge, then let go of its delivery tokens without releasing them.
        Returns the ids of the traces handed on. A trace with spans in other partitions too (an
        unkeyed topic) is closed and judged as before (``flush_where``)."""
        dropped = set(self._assembler.drop_where(predicate))
        for trace_id in dropped:
            self._trace_tokens.pop(trace_id, None)  # its tokens keep it as a holder: never released
        self._process_closed(self._assembler.close_where(predicate))
        self.metrics.open_traces.set(self._assembler.open_count)
        deadline = time.monotonic() + timeout_s
        # a bounded poll, like flush_where's: the judge accounts for these traces on its own time
        while time.monotonic() < deadline and any(  # noqa: ASYNC110
                predicate(tok) and not holders <= dropped for tok, holders in self._token_traces.items()):
            await asyncio.sleep(0.05)
        for token in [tok for tok in self._token_traces if predicate(tok)]:
            del self._token_traces[token]  # the partition is gone: a later release would be ignored
        return dropped

    def unaccounted(self, trace_ids: set[str]) -> set[str]:
        """Those of ``trace_ids`` still being assembled or judged."""
        is_open, in_flight = self._assembler.is_open, self._in_flight
        return {t for t in trace_ids if t in in_flight or is_open(t)}

    # ------------------------------------------------------------------ pipeline
    def _process_closed(self, closed: Sequence[ClosedTrace]) -> None:
        try:
            for item in closed:
                try:
                    self._process_one(item)
                except Exception:  # noqa: BLE001  # one bad trace never stops the agent (rule 2)
                    self._log_once.warning("process", "internal error processing trace %s",
                                           item.trace_id, exc_info=True)
                    self._count_failed(item.trace, sc.FAIL_INTERNAL)
                    self._account(item)
        finally:
            if not self._batching:
                self._tally.flush()

    def _process_one(self, closed: ClosedTrace) -> None:
        if closed.latency is not None:  # read for latency only (_latency.py): the same steps, lighter
            undecided = self._process_latency_only(closed, closed.latency)
            if undecided is not None:  # it may be judged after all: the full trace decides
                trace, rate = undecided
                self._decided(closed, trace, self._policy.decide(trace, rate))
            return
        trace = closed.trace
        if trace.attributes.get(sc.RAGMON_NOT_RAG):
            self._skip_not_rag(closed, trace.service)
            return
        service, pipeline = self.metrics.labels_sp(trace.service, trace.pipeline)
        self.metrics.traces_received.labels(service, pipeline).inc()
        # (evictions are counted by the assembler as dropped{open_traces_limit})
        if not trace.complete:
            self.metrics.traces_incomplete.labels(service, pipeline, closed.reason).inc()
        if trace.trace_id in self._recent or trace.trace_id in self._in_flight:
            self.metrics.traces_duplicate.labels(service, pipeline).inc()
            self._count_skip(trace, sc.SKIP_DUPLICATE)
            self._account(closed, remember=False)
            return
        self._observe_latency(service, pipeline, trace.retrieval_latency_s, len(trace.documents),
                              trace.generation_latency_s, trace.pipeline_latency_s)
        source = trace.attributes.get(sc.RAGMON_CONTEXTS_SOURCE)
        if source in sc.CONTEXTS_SOURCES:
            self.metrics.contexts_source.labels(service, pipeline, source).inc()

        self._power.observe_traffic((service, pipeline))
        self._releases.observe(service, trace.service, pipeline, trace.attributes)
        rate = self._power.rate_for((service, pipeline)) if self._power.adaptive else None
        self._decided(closed, trace, self._policy.decide(trace, rate))

    def _decided(self, closed: ClosedTrace, trace: RagTrace, decision: SampleDecision) -> None:
        """Skip, or queue for the judge, a trace whose sampling is decided."""
        if closed.reason == REASON_MISSING:  # a part never came: judging the rest would mislead
            self._count_skip(trace, sc.SKIP_INCOMPLETE)
            self._account(closed)
            return
        if not decision.sampled:
            self._count_skip(trace, decision.reason)
            self._account(closed)
            return
        reason = judgeable_skip_reason(trace)
        if reason is not None:
            self._count_skip(trace, reason)
            self._account(closed)
            return
        if not trace.documents and trace.retrieval_latency_s is not None:
            self._no_context(closed, trace)
            return
        service, pipeline = self.metrics.labels_sp(trace.service, trace.pipeline)
        self.metrics.traces_sampled.labels(service, pipeline, decision.reason).inc()
        assert self._backlog is not None
        if self._stopping and not self._tasks:
            self._count_skip(trace, sc.SKIP_SHUTDOWN)
            self._account(closed)
            return
        if self.backpressure():
            self._count_skip(trace, sc.SKIP_BACKLOG_FULL)
            self._log_once.warning("backlog", "judge backlog full (%d); skipping traces", self.config.judge_backlog)
            self._account(closed)
            return
        self._backlog.put_nowait(closed)
        if closed.text_truncated:
            # Counted for judged traces only: the cut bounds what the judge reads; a trace
            # that is never judged loses nothing (and the latency-only path reads no text).
            self.metrics.dropped.labels(sc.DROP_TEXT_TRUNCATED).inc()
        self._in_flight[trace.trace_id] = closed
        self._stream[trace.trace_id] = decision.stream
        self.metrics.judge_backlog.set(len(self._in_flight))

    def _no_context(self, closed: ClosedTrace, trace: RagTrace) -> None:
        """Retrieval ran and returned nothing: its own verdict, counted and shown, not judged."""
        service, pipeline = self.metrics.labels_sp(trace.service, trace.pipeline)
        self.metrics.diagnosis.labels(service, pipeline, sc.VERDICT_NO_CONTEXT).inc()
        self._count_skip(trace, sc.SKIP_NO_CONTEXT)
        if self._inspector is not None:
            self._inspector.record(trace, scores={}, verdict=sc.VERDICT_NO_CONTEXT,
                                   reason="the retrieval returned no documents", judge="none")
        self._account(closed)

    async def _judge_worker(self) -> None:
        assert self._backlog is not None
        while True:
            closed = await self._backlog.get()
            try:
                await self._judge_one(closed)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001  # a worker must survive any bug: the trace is accounted below
                self._log_once.warning("worker", "internal error in judge worker", exc_info=True)
                if closed.trace_id in self._in_flight:
                    self._count_failed(closed.trace, sc.FAIL_INTERNAL)
                    self._account(closed)
            finally:
                self._backlog.task_done()

    async def _judge_one(self, closed: ClosedTrace) -> None:
        assert self._judge is not None
        trace = closed.trace
        judge_name = self._judge.name
        started = time.perf_counter()
        # An outer bound in case a judge ignores its own timeouts; none for a judge that bounds
        # itself (the LLM judge: a 429 with Retry-After may rightly wait longer than this).
        outer_timeout = self.config.judge_timeout_s * (self.config.judge_max_retries + 2)
        bounded = self._judge.bounds_own_duration
        skip: str | None = None
        failed: str | None = None
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow the worker's cancellation
        try:
            async with asyncio.timeout(None if bounded else outer_timeout):
                scores = await self._judge.score(trace)
        except JudgeBudgetExceeded:
            skip = sc.SKIP_BUDGET
        except JudgeError as exc:
            self._log_once.warning(f"judge:{exc.reason}", "judge failed (%s): %s", exc.reason, exc)
            failed = exc.reason
        except TimeoutError:
            self._log_once.warning("judge:timeout", "judge exceeded %.0fs", outer_timeout)
            failed = sc.FAIL_TIMEOUT
        except Exception as exc:  # noqa: BLE001  # any judge bug becomes failed{reason="internal_error"}
            self._log_once.warning(f"judge:{type(exc).__name__}", "judge raised %r", exc, exc_info=True)
            failed = sc.FAIL_INTERNAL
        if self._in_flight.get(trace.trace_id) is not closed:
            return  # already accounted (stop() gave up waiting for this worker): never count twice
        if skip is not None or failed is not None:
            if skip is not None:
                self._count_skip(trace, skip)
            else:
                self._count_failed(trace, failed or sc.FAIL_INTERNAL)
            self._account(closed)
            return
        elapsed = time.perf_counter() - started
        self.metrics.judge_duration.labels(judge_name).observe(elapsed)
        self._judge_cost.observe(scores.prompt_tokens + scores.completion_tokens, elapsed)
        self._record_scores(trace, scores, judge_name)
        self._account(closed)

    def _count_contradictions(self, scores: Scores, labels: tuple[str, str, str, str]) -> None:
        """The share of answers that contradict their sources: checked answers, and those with a
        contradicted claim (both children exist from the first check, so the share is 0, not absent)."""
        contradicts = claim_verdicts.contradicts(scores.details)
        if contradicts is None:
            return
        self.metrics.answers_checked.labels(*labels).inc()
        counter = self.metrics.answers_contradicting.labels(*labels)
        if contradicts:
            counter.inc()

    @property
    def _evaluator_roles(self) -> dict[str, str]:
        return {e.name: e.role for e in self._evaluators.specs if e.role}

    def _record_evaluators(self, trace: RagTrace, scores: Scores, labels: tuple[str, str, str, str]) -> Scores:
        """Run the declared evaluators (the LLM judge's criteria verdicts are in ``scores.custom``);
        export each as ragmon_score_ratio{metric=<name>}; return the scores with theirs added."""
        results = self._evaluators.run(trace.question, trace.answer, trace.contexts, scores.custom)
        service, pipeline, judge_name, stream = labels
        for name, value in results.scores.items():
            if value is None:
                continue
            if self._evaluators.by_name[name].buckets:
                self.metrics.score.labels(service, pipeline, judge_name, name, stream).observe(value)
            elif stream == sc.SAMPLE_STREAM_RATE:
                # compact: the unbiased stream only (3 series per evaluator and pair); priority-stream
                # verdicts are shown in /worst and /traces/{id}, not exported
                self.metrics.score_family.observe_compact((service, pipeline, judge_name, name, stream), value)
        for name, reason in results.errors:
            self.metrics.evaluator_errors.labels(name, reason).inc()
            self._log_once.warning(f"evaluator:{name}:{reason}", "evaluator %s could not judge a trace (%s); "
                                   "counted in ragmon_evaluator_errors_total, logged once", name, reason)
        details = dict(scores.details)
        if results.reasons:
            details[sc.DETAIL_EVALUATORS] = dict(results.reasons)
        return dataclasses.replace(scores, custom=results.scores, details=details)

    def _record_scores(self, trace: RagTrace, scores: Scores, judge_name: str) -> None:
        service, pipeline = self.metrics.labels_sp(trace.service, trace.pipeline)
        m = self.metrics
        m.traces_scored.labels(service, pipeline, judge_name).inc()
        exemplar = {"trace_id": trace.trace_id}
        values = scores.as_dict()
        # rate-stream scores are the unbiased sample means and alerts read; priority ones only explain
        stream = self._stream.get(trace.trace_id, sc.SAMPLE_STREAM_RATE)
        failing_flags: dict[str, bool] = {}
        for metric, value in values.items():
            clamped = min(1.0, max(0.0, float(value)))
            m.score.labels(service, pipeline, judge_name, metric, stream).observe(clamped, exemplar=exemplar)
            m.score_squares.labels(service, pipeline, judge_name, metric, stream).inc(clamped * clamped)
            # the child exists from the first score (at 0), so the failing share is 0, not absent, and
            # increase() sees the first failure
            failures = m.score_failures.labels(service, pipeline, judge_name, metric, stream)
            failing = failing_flags[metric] = is_failing(clamped, self._thresholds.get(metric))
            if failing:
                failures.inc()
        if stream == sc.SAMPLE_STREAM_RATE:
            # the sampler sizes the sample for the alerts' test: failing shares, in the corrected unit
            self._power.observe_shares((service, pipeline), failing_flags, self._youden)
        if self._evaluators:
            scores = self._record_evaluators(trace, scores, (service, pipeline, judge_name, stream))
        self._count_contradictions(scores, (service, pipeline, judge_name, stream))
        verdict, reason = diagnose(scores, self._thresholds, self._evaluator_roles)
        m.diagnosis.labels(service, pipeline, verdict).inc()
        detail = scores.details.get("reason") if isinstance(scores.details, dict) else None
        shown = {**values, **{k: v for k, v in scores.custom.items() if v is not None}}
        self._worst.offer(
            trace_id=trace.trace_id, service=trace.service, pipeline=trace.pipeline, scores=shown,
            verdict=verdict, reason=reason, question=trace.question, answer=trace.answer,
            detail=str(detail) if detail is not None else None,
            contradicted=claim_verdicts.contradicted(scores.details),
        )
        if self._inspector is not None:
            self._inspector.record(trace, scores=shown, verdict=verdict, reason=reason, judge=judge_name,
                                   details=scores.details)
        for listener in self._listeners:
            try:
                listener(trace, scores, verdict)
            except Exception:  # noqa: BLE001  # a user's listener must not break scoring
                self._log_once.warning("listener", "score listener raised", exc_info=True)
