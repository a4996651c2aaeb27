"""The agent's lifecycle: start / idempotent stop, the metrics server, the span source, the
judge workers and expiry loop, and the readiness the server reports."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from .. import semconv as sc
from .._security import server_ssl_context
from ..evaluators.judging import check_criteria_judge, criteria_of
from ..export.server import MetricsServer
from ..ingest.kafka.settings import KafkaSourceSettings
from ..ingest.receivers.settings import HttpReceiverSettings
from ..ingest.source import SpanSource
from ..scoring.identity import judge_identity, not_fitted_line
from ..scoring.judge import CIRCUIT_CLOSED, Judge
from ._state import CANCEL_RETRY_S, CANCEL_ROUNDS, EXPIRY_TICK_S, ScoreListener, log
from ._steps import TraceStepsMixin


class LifecycleMixin(TraceStepsMixin):
    """Starting and stopping everything the agent owns, and what it reports about itself."""

    async def start(self) -> None:
        if self._started:
            return
        if self._judge is None:
            from ..scoring.factory import JudgeSettings, build_judge

            # Loading the local model takes a moment; keep the loop responsive.
            self._judge = await asyncio.to_thread(build_judge, self.config.section(JudgeSettings), self.metrics,
                                                  criteria_of(self._evaluators.specs))
        check_criteria_judge(self._judge.name, self._evaluators.specs)
        identity = judge_identity(self._judge)
        self.metrics.judge_info.labels(identity.judge, identity.version, identity.profile).set(1)
        self._export_error_rates()
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
        not_fitted = not_fitted_line(identity)  # once, after a start that worked
        if not_fitted is not None:
            log.warning("%s", not_fitted)

    def _export_error_rates(self) -> None:
        """The judge's error rates per metric: exported for the rules, kept for the sampler's unit."""
        from ..scoring.error_rates import error_rates_of

        assert self._judge is not None
        for metric, rates in error_rates_of(self._judge).items():
            self.metrics.judge_sensitivity.labels(self._judge.name, metric).set(rates.sensitivity)
            self.metrics.judge_specificity.labels(self._judge.name, metric).set(rates.specificity)
            self._youden[metric] = rates.youden

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
            from ..ingest.kafka.source import KafkaSource

            return KafkaSource(self.config.section(KafkaSourceSettings), self.metrics)
        from ..ingest.receivers.http_receiver import OtlpHttpReceiver

        http = OtlpHttpReceiver(self.config.section(HttpReceiverSettings), self.metrics)
        if self.config.receiver_grpc_port is None:
            return http
        from ..ingest.composite_source import CompositeSource
        from ..ingest.receivers.grpc_receiver import GrpcReceiverSettings, OtlpGrpcReceiver

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
        for _ in range(CANCEL_ROUNDS):
            if not pending:
                break
            for task in pending:
                task.cancel()
            _done, pending = await asyncio.wait(pending, timeout=CANCEL_RETRY_S)
        if pending:
            log.error("%d judge worker(s) ignored cancellation; abandoning them", len(pending))
        self._tasks.clear()

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

    # ------------------------------------------------------------------ housekeeping
    async def _expiry_loop(self) -> None:
        tick = min(EXPIRY_TICK_S, self.config.trace_timeout_s / 4)
        while True:
            await asyncio.sleep(tick)
            try:
                self._process_closed(self._assembler.expire())
                self._export_assembler_drops()
                self.metrics.open_traces.set(self._assembler.open_count)
                self.metrics.judge_backlog.set(len(self._in_flight))
            except Exception:  # noqa: BLE001  # the expiry loop must keep ticking
                self._log_once.warning("expiry", "expiry tick failed", exc_info=True)

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
