"""The agent: source -> assembler -> latency (all traces) -> sampler -> judge -> metrics.

It owns the lifecycles (source, judge workers, metrics server) and the accounting that
the rules of the house demand: every trace that enters ends as exactly one of scored,
skipped{reason} or failed{reason}, and a source's delivery token (a Kafka offset) is
released only once every trace with spans in that delivery is accounted for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from functools import partial
from typing import Any

from prometheus_client import CollectorRegistry

from . import semconv as sc
from ._log import LogOnce
from .config import AgentConfig
from .errors import JudgeBudgetExceeded, JudgeError
from .export.latency import SlidingQuantile
from .export.metrics import AgentMetrics
from .export.server import MetricsServer
from .export.worst import WorstTraces
from .ingest.assembler import ClosedTrace, TraceAssembler
from .ingest.settings import HttpReceiverSettings, KafkaSourceSettings
from .ingest.source import SpanSource
from .scoring.diagnosis import diagnose
from .scoring.judge import CIRCUIT_CLOSED, Judge
from .scoring.sampler import SamplingPolicy, is_negative_feedback, judgeable_skip_reason
from .types import RagTrace, Scores, SpanRecord

log = logging.getLogger("ragmon.agent")

ScoreListener = Callable[[RagTrace, Scores, str], None]
_EXPIRY_TICK_S = 0.25


class _RecentIds:
    """Bounded memory of accounted trace ids, to recognise redelivered traces."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._ids: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, trace_id: object) -> bool:
        return trace_id in self._ids

    def add(self, trace_id: str) -> None:
        if self._size <= 0:
            return
        self._ids[trace_id] = None
        self._ids.move_to_end(trace_id)
        while len(self._ids) > self._size:
            self._ids.popitem(last=False)


class Agent:
    """Run with ``async with Agent(config) as agent:`` or ``start()`` / ``stop()``."""

    def __init__(
        self,
        config: AgentConfig,
        *,
        registry: CollectorRegistry | None = None,
        judge: Judge | None = None,
        source: SpanSource | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.metrics = AgentMetrics(registry, max_label_values=config.metrics_max_label_values)
        self._judge = judge
        self._source = source
        self._clock = clock
        self._assembler = TraceAssembler(
            trace_timeout_s=config.trace_timeout_s,
            max_open_traces=config.max_open_traces,
            max_spans_per_trace=config.max_spans_per_trace,
            root_grace_s=config.root_grace_s,
            max_buffered_bytes=config.max_buffered_bytes,
            clock=clock,
        )
        self._policy = SamplingPolicy(
            rate=config.sample_rate,
            pipeline_rates=dict(config.pipeline_sample_rates),
            priority_errors=config.priority_errors,
            priority_feedback=config.priority_feedback,
            slow_retrieval_s=config.priority_slow_retrieval_s,
            min_top_score=config.priority_min_top_score,
        )
        self._thresholds = config.diagnosis_thresholds()
        self._worst = WorstTraces(config.worst_size, config.worst_max_chars, clock=clock)
        self._recent = _RecentIds(config.dedup_size)
        self._p95: dict[tuple[str, str, str], SlidingQuantile] = {}
        self._listeners: list[ScoreListener] = []
        self._log_once = LogOnce(log)
        # delivery-token bookkeeping (see ingest/source.py)
        self._token_traces: dict[Hashable, set[str]] = {}
        self._trace_tokens: dict[str, set[Hashable]] = {}
        self._in_flight: dict[str, ClosedTrace] = {}
        self._drop_seen: dict[str, int] = {}
        self._backlog: asyncio.Queue[ClosedTrace] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._server: MetricsServer | None = None
        self._started = False
        self._stopping = False

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        if self._started:
            return
        if self._judge is None:
            from .scoring.factory import build_judge

            # Loading the local model takes a moment; keep the loop responsive.
            self._judge = await asyncio.to_thread(build_judge, self.config, self.metrics)
        if self._source is None:
            self._source = self._build_source()
        # Bounded by judge_backlog through _in_flight (queued + being judged), see _process_one.
        self._backlog = asyncio.Queue()
        self._server = MetricsServer(
            self.metrics.registry, self.config.metrics_host, self.config.metrics_port,
            readiness=self._readiness, worst=self._worst.snapshot,
        )
        await self._server.start()
        for i in range(self.config.judge_concurrency):
            self._tasks.append(asyncio.create_task(self._judge_worker(), name=f"ragmon-judge-{i}"))
        self._tasks.append(asyncio.create_task(self._expiry_loop(), name="ragmon-expiry"))
        await self._source.start(self)
        self._started = True
        log.info("ragmon agent started: source=%s judge=%s metrics=http://%s:%d/metrics",
                 self._source.name, self._judge.name, self.config.metrics_host, self.metrics_port)

    def _build_source(self) -> SpanSource:
        if self.config.source == "kafka":
            from .ingest.kafka_source import KafkaSource

            return KafkaSource(self.config.section(KafkaSourceSettings), self.metrics)
        from .ingest.http_receiver import OtlpHttpReceiver

        return OtlpHttpReceiver(self.config.section(HttpReceiverSettings), self.metrics)

    async def stop(self) -> None:
        """Stop accepting, close open traces, finish or account in-flight work, stop serving."""
        if not self._started or self._stopping:
            return
        self._stopping = True
        assert self._source is not None and self._backlog is not None
        await self._source.stop()
        self._process_closed(self._assembler.close_all())
        deadline = self._clock() + self.config.shutdown_grace_s
        # a bounded poll: draining ends on either condition, and the deadline is a clock read
        while (self._in_flight or not self._backlog.empty()) and self._clock() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        # Whatever the grace period could not finish is accounted, never silently lost.
        for closed in list(self._in_flight.values()):
            self._count_skip(closed.trace, sc.SKIP_SHUTDOWN)
            self._account(closed)
        if self._judge is not None:
            with contextlib.suppress(Exception):
                await self._judge.aclose()
        if self._server is not None:
            await self._server.stop()
        self._started = False
        log.info("ragmon agent stopped")

    async def __aenter__(self) -> Agent:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def receiver_port(self) -> int | None:
        return self._source.port if self._source is not None else None

    @property
    def metrics_port(self) -> int:
        return self._server.port if self._server is not None else self.config.metrics_port

    @property
    def judge(self) -> Judge | None:
        return self._judge

    def add_listener(self, listener: ScoreListener) -> None:
        self._listeners.append(listener)

    async def wait_idle(self, timeout_s: float = 30.0) -> bool:
        """Wait until no trace is open, queued or being judged; False on timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._assembler.open_count == 0 and not self._in_flight:
                return True
            await asyncio.sleep(0.05)
        return False

    # ------------------------------------------------------------------ SpanSink
    def submit(self, spans: Sequence[SpanRecord], token: Hashable | None = None) -> None:
        closed: list[ClosedTrace] = []
        touched: set[str] = set()
        for span in spans:
            if span.dropped_attributes_count:
                self.metrics.span_attribute_limit.labels(
                    self.metrics.service_label(span.service_name)).inc()
            if sc.RAGMON_FEEDBACK in span.attributes:
                self._count_feedback(span)
            try:
                closed.extend(self._assembler.add(span, token))
            except Exception:  # noqa: BLE001  # one bad span never stops the agent
                self.metrics.dropped.labels(sc.DROP_MALFORMED_SPAN).inc()
                self._log_once.warning("assemble", "could not assemble span %s", span.span_id, exc_info=True)
                continue
            touched.add(span.trace_id)
        if token is not None:
            # Register references before processing: a trace may be accounted synchronously.
            closed_ids = {c.trace.trace_id for c in closed}
            for trace_id in touched:
                if trace_id in closed_ids or trace_id in self._in_flight or self._assembler.is_open(trace_id):
                    self._token_traces.setdefault(token, set()).add(trace_id)
                    self._trace_tokens.setdefault(trace_id, set()).add(token)
        self._process_closed(closed)
        if token is not None and not self._token_traces.get(token):
            self._token_traces.pop(token, None)
            self._release(token)
        self._export_assembler_drops()

    def backpressure(self) -> bool:
        return len(self._in_flight) >= self.config.judge_backlog

    async def flush_where(self, predicate: Callable[[Hashable], bool], timeout_s: float) -> None:
        self._process_closed(self._assembler.close_where(predicate))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not any(predicate(tok) for tok in self._token_traces):
                return
            await asyncio.sleep(0.05)

    # ------------------------------------------------------------------ pipeline
    def _process_closed(self, closed: Sequence[ClosedTrace]) -> None:
        for item in closed:
            try:
                self._process_one(item)
            except Exception:  # noqa: BLE001  # one bad trace never stops the agent (rule 2)
                self._log_once.warning("process", "internal error processing trace %s",
                                       item.trace.trace_id, exc_info=True)
                self._count_failed(item.trace, sc.FAIL_INTERNAL)
                self._account(item)

    def _process_one(self, closed: ClosedTrace) -> None:
        trace = closed.trace
        service, pipeline = self.metrics.labels_sp(trace.service, trace.pipeline)
        self.metrics.traces_received.labels(service, pipeline).inc()
        # (evictions are counted by the assembler as dropped{open_traces_limit})
        if not trace.complete:
            self.metrics.traces_incomplete.labels(service, pipeline).inc()
        if trace.trace_id in self._recent or trace.trace_id in self._in_flight:
            self.metrics.traces_duplicate.labels(service, pipeline).inc()
            self._count_skip(trace, sc.SKIP_DUPLICATE)
            self._account(closed, remember=False)
            return
        self._observe_latency(trace, service, pipeline)

        decision = self._policy.decide(trace)
        if not decision.sampled:
            self._count_skip(trace, decision.reason)
            self._account(closed)
            return
        reason = judgeable_skip_reason(trace)
        if reason is not None:
            self._count_skip(trace, reason)
            self._account(closed)
            return
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
        self._in_flight[trace.trace_id] = closed
        self.metrics.judge_backlog.set(len(self._in_flight))

    def _observe_latency(self, trace: RagTrace, service: str, pipeline: str) -> None:
        m = self.metrics
        if trace.retrieval_latency_s is not None:
            m.retrieval_latency.labels(service, pipeline).observe(trace.retrieval_latency_s)
            self._window("retrieval", service, pipeline).observe(trace.retrieval_latency_s)
            m.retrieved_documents.labels(service, pipeline).observe(len(trace.documents))
        if trace.generation_latency_s is not None:
            m.generation_latency.labels(service, pipeline).observe(trace.generation_latency_s)
        if trace.pipeline_latency_s is not None:
            m.pipeline_latency.labels(service, pipeline).observe(trace.pipeline_latency_s)
            self._window("pipeline", service, pipeline).observe(trace.pipeline_latency_s)

    def _window(self, stage: str, service: str, pipeline: str) -> SlidingQuantile:
        key = (stage, service, pipeline)
        window = self._p95.get(key)
        if window is None:
            window = SlidingQuantile(self.config.latency_window_s, clock=self._clock)
            self._p95[key] = window
            gauge = self.metrics.retrieval_latency_p95 if stage == "retrieval" else self.metrics.pipeline_latency_p95
            gauge.labels(service, pipeline).set_function(partial(window.quantile, 0.95))
        return window

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
                if closed.trace.trace_id in self._in_flight:
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
        try:
            scores = await asyncio.wait_for(self._judge.score(trace), None if bounded else outer_timeout)
        except JudgeBudgetExceeded:
            self._count_skip(trace, sc.SKIP_BUDGET)
            self._account(closed)
            return
        except JudgeError as exc:
            self._log_once.warning(f"judge:{exc.reason}", "judge failed (%s): %s", exc.reason, exc)
            self._count_failed(trace, exc.reason)
            self._account(closed)
            return
        except TimeoutError:
            self._log_once.warning("judge:timeout", "judge exceeded %.0fs", outer_timeout)
            self._count_failed(trace, sc.FAIL_TIMEOUT)
            self._account(closed)
            return
        except Exception as exc:  # noqa: BLE001  # any judge bug becomes failed{reason="internal_error"}
            self._log_once.warning(f"judge:{type(exc).__name__}", "judge raised %r", exc, exc_info=True)
            self._count_failed(trace, sc.FAIL_INTERNAL)
            self._account(closed)
            return
        self.metrics.judge_duration.labels(judge_name).observe(time.perf_counter() - started)
        self._record_scores(trace, scores, judge_name)
        self._account(closed)

    def _record_scores(self, trace: RagTrace, scores: Scores, judge_name: str) -> None:
        service, pipeline = self.metrics.labels_sp(trace.service, trace.pipeline)
        m = self.metrics
        m.traces_scored.labels(service, pipeline, judge_name).inc()
        exemplar = {"trace_id": trace.trace_id}
        values = scores.as_dict()
        for metric, value in values.items():
            clamped = min(1.0, max(0.0, float(value)))
            m.score.labels(service, pipeline, judge_name, metric).observe(clamped, exemplar=exemplar)
        verdict, reason = diagnose(scores, self._thresholds)
        m.diagnosis.labels(service, pipeline, verdict).inc()
        detail = scores.details.get("reason") if isinstance(scores.details, dict) else None
        self._worst.offer(
            trace_id=trace.trace_id, service=trace.service, pipeline=trace.pipeline, scores=values,
            verdict=verdict, reason=reason, question=trace.question, answer=trace.answer,
            detail=str(detail) if detail is not None else None,
        )
        for listener in self._listeners:
            try:
                listener(trace, scores, verdict)
            except Exception:  # noqa: BLE001  # a user's listener must not break scoring
                self._log_once.warning("listener", "score listener raised", exc_info=True)

    # ------------------------------------------------------------------ accounting
    def _count_feedback(self, span: SpanRecord) -> None:
        # Counted per span, not per trace: feedback often comes after its trace closed (a
        # record_feedback(trace_id=...) span), when it can no longer change the sampling.
        value = span.attributes[sc.RAGMON_FEEDBACK]
        kind = sc.FEEDBACK_NEGATIVE if is_negative_feedback(value) else sc.FEEDBACK_POSITIVE
        pipeline = span.attributes.get(sc.RAGMON_PIPELINE)
        service, pipe = self.metrics.labels_sp(span.service_name, pipeline if isinstance(pipeline, str) else None)
        self.metrics.feedback.labels(service, pipe, kind).inc()

    def _count_skip(self, trace: RagTrace, reason: str) -> None:
        service, pipeline = self.metrics.labels_sp(trace.service, trace.pipeline)
        self.metrics.traces_skipped.labels(service, pipeline, reason).inc()

    def _count_failed(self, trace: RagTrace, reason: str) -> None:
        service, pipeline = self.metrics.labels_sp(trace.service, trace.pipeline)
        judge_name = self._judge.name if self._judge is not None else sc.UNKNOWN_LABEL
        self.metrics.traces_failed.labels(service, pipeline, judge_name, reason).inc()

    def _account(self, closed: ClosedTrace, *, remember: bool = True) -> None:
        """The trace is scored, skipped or failed: release delivery tokens no longer needed."""
        trace_id = closed.trace.trace_id
        if self._in_flight.get(trace_id) is closed:
            del self._in_flight[trace_id]
            self.metrics.judge_backlog.set(len(self._in_flight))
        if remember:
            self._recent.add(trace_id)
        if trace_id in self._in_flight:
            return  # an earlier copy of this trace is still being judged and holds the tokens
        tokens = self._trace_tokens.pop(trace_id, set()) | set(closed.tokens)
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

    # ------------------------------------------------------------------ housekeeping
    async def _expiry_loop(self) -> None:
        tick = min(_EXPIRY_TICK_S, self.config.trace_timeout_s / 4)
        while True:
            await asyncio.sleep(tick)
            try:
                self._process_closed(self._assembler.expire())
                self._export_assembler_drops()
                self.metrics.open_traces.set(self._assembler.open_count)
                self.metrics.judge_backlog.set(len(self._in_flight))
            except Exception:  # noqa: BLE001  # the expiry loop must keep ticking
                self._log_once.warning("expiry", "expiry tick failed", exc_info=True)

    def _export_assembler_drops(self) -> None:
        for reason, count in self._assembler.drop_counts.items():
            delta = count - self._drop_seen.get(reason, 0)
            if delta > 0:
                self.metrics.dropped.labels(reason).inc(delta)
                self._drop_seen[reason] = count

    def _readiness(self) -> tuple[bool, dict[str, Any]]:
        source_ready = bool(self._source is not None and self._source.ready())
        judge_state = "ok"
        judge = self._judge
        circuit = judge.circuit_state if judge is not None else CIRCUIT_CLOSED
        if circuit != CIRCUIT_CLOSED:
            judge_state = "degraded"
        detail = {
            "source": self._source.name if self._source is not None else None,
            "source_ready": source_ready,
            "judge": judge.name if judge is not None else None,
            "judge_state": judge_state,
            "judge_circuit": circuit,
            "open_traces": self._assembler.open_count,
            "judge_backlog": len(self._in_flight),
        }
        return source_ready and not self._stopping, detail
