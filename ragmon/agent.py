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
from typing import Any, TypeGuard, cast

from prometheus_client import CollectorRegistry

from . import semconv as sc
from ._log import LogOnce
from ._security import server_ssl_context
from .config import AgentConfig
from .errors import JudgeBudgetExceeded, JudgeError
from .export.inspector import RecentTraces
from .export.latency import SlidingQuantile
from .export.metrics import AgentMetrics
from .export.releases import ReleaseTracker
from .export.server import MetricsServer
from .export.worst import WorstTraces
from .ingest.assembler import ClosedTrace, TraceAssembler
from .ingest.extract import ExtractSettings
from .ingest.settings import HttpReceiverSettings, KafkaSourceSettings
from .ingest.source import SpanSource
from .sampling import in_sample
from .scoring.budget import budget_traces_per_s
from .scoring.diagnosis import diagnose
from .scoring.judge import CIRCUIT_CLOSED, Judge
from .scoring.power import JudgeCost, PipelinePlan, PowerSampler, PowerTarget
from .scoring.sampler import SamplingPolicy, is_negative_feedback, judgeable_skip_reason
from .types import RagTrace, Scores, SpanRecord

log = logging.getLogger("ragmon.agent")

ScoreListener = Callable[[RagTrace, Scores, str], None]
_EXPIRY_TICK_S = 0.25
_CANCEL_RETRY_S = 0.1  # stop(): cancel again after this long (a cancellation can be swallowed)
_CANCEL_ROUNDS = 50  # ... and give up on a worker that ignores this many (its trace is accounted anyway)


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
            extract_settings=config.section(ExtractSettings),
            max_text_chars=config.max_text_chars,
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
        # power-based sampling (adaptive when --detect-drop is set; else it only reports the fixed rates)
        self._judge_cost = JudgeCost()
        self._power = PowerSampler(
            PowerTarget(drop=config.detect_drop or 0.05, window_s=config.detect_within_s, power=config.detect_power,
                        alpha=config.detect_alpha, min_rate=config.detect_min_rate,
                        max_rate=config.detect_max_rate, replicas=config.detect_replicas),
            fixed=lambda key: self._policy.rate_for(key[1]),  # type: ignore[index]
            capacity_per_s=self._judge_capacity, clock=clock, adaptive=config.detect_drop is not None,
            on_plan=self._export_plan,
        )
        if config.detect_drop is not None:
            self.metrics.detect_target.set(config.detect_drop)
        self._stream: dict[str, str] = {}  # trace id -> sample stream (rate | priority) while in flight
        self._releases = ReleaseTracker(self.metrics.release, config.metrics_max_label_values)
        self._thresholds = config.diagnosis_thresholds()
        self._worst = WorstTraces(config.worst_size, config.worst_max_chars, clock=clock)
        self._inspector = (RecentTraces(config.trace_inspector_size, config.trace_inspector_max_chars)
                           if config.trace_inspector else None)
        self._recent = _RecentIds(config.dedup_size)
        self._p95: dict[tuple[str, str, str], SlidingQuantile] = {}
        self._listeners: list[ScoreListener] = []
        if config.export_judged:  # judged traces for `ragmon dataset harvest` (bounded, rotating JSONL)
            from .datasets.harvest import JudgedSink

            self._listeners.append(JudgedSink(config.export_judged, config.export_judged_max_bytes))
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
        self._server = self._build_server()
        await self._server.start()
        for i in range(self.config.judge_concurrency):
            self._tasks.append(asyncio.create_task(self._judge_worker(), name=f"ragmon-judge-{i}"))
        self._tasks.append(asyncio.create_task(self._expiry_loop(), name="ragmon-expiry"))
        await self._source.start(self)
        self._started = True
        log.info("ragmon agent started: source=%s judge=%s metrics=http://%s:%d/metrics",
                 self._source.name, self._judge.name, self.config.metrics_host, self.metrics_port)

    def _build_server(self) -> MetricsServer:
        c = self.config
        ssl_context = None
        if c.metrics_tls_cert_file and c.metrics_tls_key_file:
            ssl_context = server_ssl_context(
                c.metrics_tls_cert_file, c.metrics_tls_key_file, None,
                lambda: self.metrics.auth_failures.labels(sc.ENDPOINT_METRICS, sc.AUTH_FAILED_TLS).inc(),
                setting="--metrics-tls-cert-file / --metrics-tls-key-file")
        return MetricsServer(
            self.metrics.registry, c.metrics_host, c.metrics_port,
            readiness=self._readiness, worst=self._worst.snapshot, ssl_context=ssl_context,
            inspect=self._inspector.get if self._inspector is not None else None,
            bearer_token=c.metrics_bearer_token,
            allow_unauthenticated_content=c.insecure_allow_unauthenticated_bind,
            on_auth_failure=lambda reason: self.metrics.auth_failures.labels(sc.ENDPOINT_METRICS, reason).inc(),
        )

    def _build_source(self) -> SpanSource:
        if self.config.source == "kafka":
            from .ingest.kafka_source import KafkaSource

            return KafkaSource(self.config.section(KafkaSourceSettings), self.metrics)
        from .ingest.http_receiver import OtlpHttpReceiver

        http = OtlpHttpReceiver(self.config.section(HttpReceiverSettings), self.metrics)
        if self.config.receiver_grpc_port is None:
            return http
        from .ingest.composite_source import CompositeSource
        from .ingest.grpc_receiver import GrpcReceiverSettings, OtlpGrpcReceiver

        return CompositeSource([http, OtlpGrpcReceiver(self.config.section(GrpcReceiverSettings), self.metrics)])

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
        await self._cancel_tasks()
        # Whatever the grace period could not finish is accounted, never silently lost.
        for closed in list(self._in_flight.values()):
            self._count_skip(closed.trace, sc.SKIP_SHUTDOWN)
            self._account(closed)
        self.metrics.judge_backlog.set(len(self._in_flight))
        self.metrics.open_traces.set(self._assembler.open_count)
        final_counts = self._server.scrape_mark() if self._server is not None else 0
        if self._judge is not None:
            with contextlib.suppress(Exception):
                await self._judge.aclose()
        if self._server is not None:
            # The final accounting happened after Prometheus' last scrape: give it one more (bounded).
            if self.config.shutdown_final_scrape_s > 0:
                await self._server.wait_for_scrape(final_counts, self.config.shutdown_final_scrape_s)
            await self._server.stop()
        self._started = False
        log.info("ragmon agent stopped")

    async def _cancel_tasks(self) -> None:
        """Cancel the workers until they are gone. One cancel() is not always enough: on Python 3.11
        ``asyncio.wait_for`` swallows a cancellation that arrives as the awaited coroutine finishes,
        and a judge may swallow one itself; the worker then goes back to the queue and would keep
        stop() waiting forever. A worker that ignores every round is abandoned (logged); its trace
        is accounted below and anything it reports later is ignored (see ``_judge_one``)."""
        pending = set(self._tasks)
        for _ in range(_CANCEL_ROUNDS):
            if not pending:
                break
            for task in pending:
                task.cancel()
            _done, pending = await asyncio.wait(pending, timeout=_CANCEL_RETRY_S)
        if pending:
            log.error("%d judge worker(s) ignored cancellation; abandoning them", len(pending))
        self._tasks.clear()

    async def __aenter__(self) -> Agent:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def receiver_port(self) -> int | None:
        return self._source.port if self._source is not None else None

    @property
    def receiver_grpc_port(self) -> int | None:
        """The OTLP/gRPC receiver's bound port; None when it is off or not started."""
        port_of = getattr(self._source, "port_of", None)
        return port_of("grpc") if port_of is not None else None

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
            if sc.SERVICE_VERSION in span.resource:
                self._releases.note_resource(span.service_name or sc.UNKNOWN_LABEL, span.resource)
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

    def admit(self, spans: Sequence[SpanRecord]) -> bool:
        """Whether the judge backlog can take every trace these spans may send to the judge (the
        OTLP receiver answers 503 Retry-After otherwise, before accepting anything). The demand is
        estimated from the spans that close a trace (roots): those inside the highest sample rate,
        or carrying an error when errors are priority. An export bigger than the whole backlog is
        admitted once the backlog is empty (its overflow is skipped as backlog_full)."""
        free = self.config.judge_backlog - len(self._in_flight)
        if free <= 0:
            return False
        if self._power.adaptive:
            rate = max(self._power.rates(), default=self._power.target.max_rate)
        else:
            rate = max([self._policy.rate, *self._policy.pipeline_rates.values()])
        demand: set[str] = set()
        for span in spans:
            priority = self._policy.priority_errors and span.status_code == "ERROR"
            closes = span.parent_span_id is None or span.parent_is_remote
            if not (closes or priority) or span.trace_id in demand:
                continue
            if priority or in_sample(span.trace_id, rate):
                demand.add(span.trace_id)
                if len(demand) > free and self._in_flight:
                    return False
        return True

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
        if trace.attributes.get(sc.RAGMON_NOT_RAG):
            self._skip_not_rag(closed)
            return
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
        source = trace.attributes.get(sc.RAGMON_CONTEXTS_SOURCE)
        if source in sc.CONTEXTS_SOURCES:
            self.metrics.contexts_source.labels(service, pipeline, source).inc()

        self._power.observe_traffic((service, pipeline))
        self._releases.observe(service, trace.service, pipeline, trace.attributes)
        rate = self._power.rate_for((service, pipeline)) if self._power.adaptive else None
        decision = self._policy.decide(trace, rate)
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
        self._stream[trace.trace_id] = decision.stream
        self.metrics.judge_backlog.set(len(self._in_flight))

    def _observe_latency(self, trace: RagTrace, service: str, pipeline: str) -> None:
        m = self.metrics
        if self._plausible(trace.retrieval_latency_s):
            m.retrieval_latency.labels(service, pipeline).observe(trace.retrieval_latency_s)
            self._window("retrieval", service, pipeline).observe(trace.retrieval_latency_s)
        if trace.retrieval_latency_s is not None:
            m.retrieved_documents.labels(service, pipeline).observe(len(trace.documents))
        if self._plausible(trace.generation_latency_s):
            m.generation_latency.labels(service, pipeline).observe(trace.generation_latency_s)
        if self._plausible(trace.pipeline_latency_s):
            m.pipeline_latency.labels(service, pipeline).observe(trace.pipeline_latency_s)
            self._window("pipeline", service, pipeline).observe(trace.pipeline_latency_s)

    def _plausible(self, latency_s: float | None) -> TypeGuard[float]:
        """A latency worth observing. A span that ends in the year 2554 (end time 2^64-1) or before
        it starts would otherwise own the P95 gauge and the histogram sum: counted, not observed."""
        if latency_s is None:
            return False
        if 0.0 <= latency_s <= self.config.latency_max_s:
            return True
        self.metrics.dropped.labels(sc.DROP_INVALID_TIMESTAMP).inc()
        self._log_once.warning("timestamp", "latency of %.6g s outside [0, %g] s (bogus span timestamps?); "
                               "not observed", latency_s, self.config.latency_max_s)
        return False

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

    def _record_scores(self, trace: RagTrace, scores: Scores, judge_name: str) -> None:
        service, pipeline = self.metrics.labels_sp(trace.service, trace.pipeline)
        m = self.metrics
        m.traces_scored.labels(service, pipeline, judge_name).inc()
        exemplar = {"trace_id": trace.trace_id}
        values = scores.as_dict()
        # rate-stream scores are the unbiased sample means and alerts read; priority ones only explain
        stream = self._stream.get(trace.trace_id, sc.SAMPLE_STREAM_RATE)
        clamped_values = {}
        for metric, value in values.items():
            clamped = clamped_values[metric] = min(1.0, max(0.0, float(value)))
            m.score.labels(service, pipeline, judge_name, metric, stream).observe(clamped, exemplar=exemplar)
            m.score_squares.labels(service, pipeline, judge_name, metric, stream).inc(clamped * clamped)
        if stream == sc.SAMPLE_STREAM_RATE:
            self._power.observe_scores((service, pipeline), clamped_values)
        verdict, reason = diagnose(scores, self._thresholds)
        m.diagnosis.labels(service, pipeline, verdict).inc()
        detail = scores.details.get("reason") if isinstance(scores.details, dict) else None
        self._worst.offer(
            trace_id=trace.trace_id, service=trace.service, pipeline=trace.pipeline, scores=values,
            verdict=verdict, reason=reason, question=trace.question, answer=trace.answer,
            detail=str(detail) if detail is not None else None,
        )
        if self._inspector is not None:
            self._inspector.record(trace, scores=values, verdict=verdict, reason=reason, judge=judge_name,
                                   details=scores.details)
        for listener in self._listeners:
            try:
                listener(trace, scores, verdict)
            except Exception:  # noqa: BLE001  # a user's listener must not break scoring
                self._log_once.warning("listener", "score listener raised", exc_info=True)

    # ------------------------------------------------------------------ power-based sampling
    def _judge_capacity(self) -> float | None:
        """Judged traces/s this agent's judge can take (concurrency, token budget); None if unknown."""
        c = self.config
        return self._judge_cost.capacity_per_s(
            c.judge_concurrency,
            lambda tokens: budget_traces_per_s(c.judge_budget_tokens_per_minute, c.judge_budget_tokens_per_day, tokens))

    def _export_plan(self, key: Hashable, plan: PipelinePlan) -> None:
        service, pipeline = cast("tuple[str, str]", key)
        self.metrics.sample_rate.labels(service, pipeline).set(plan.rate)
        self.metrics.detectable_drop.labels(service, pipeline).set(plan.detectable_drop)

    # ------------------------------------------------------------------ accounting
    def _count_feedback(self, span: SpanRecord) -> None:
        # Counted per span, not per trace: feedback often comes after its trace closed (a
        # record_feedback(trace_id=...) span), when it can no longer change the sampling.
        value = span.attributes[sc.RAGMON_FEEDBACK]
        kind = sc.FEEDBACK_NEGATIVE if is_negative_feedback(value) else sc.FEEDBACK_POSITIVE
        pipeline = span.attributes.get(sc.RAGMON_PIPELINE)
        service, pipe = self.metrics.labels_sp(span.service_name, pipeline if isinstance(pipeline, str) else None)
        self.metrics.feedback.labels(service, pipe, kind).inc()

    def _skip_not_rag(self, closed: ClosedTrace) -> None:
        """Not a RAG request (index building, embedding batches, ...): accounted as received and
        skipped{not_rag} under the reserved pipeline label, so traffic panels can leave it out
        (pipeline!="_not_rag") and its span names never take a pipeline label; no latency."""
        service, pipeline = self.metrics.labels_sp(closed.trace.service, sc.NOT_RAG_PIPELINE_LABEL)
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
        trace_id = closed.trace.trace_id
        if self._in_flight.get(trace_id) is closed:
            del self._in_flight[trace_id]
            self._stream.pop(trace_id, None)
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
