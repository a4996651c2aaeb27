"""``Agent``: the parts (``wiring.build_parts``) and their lifecycles — start / idempotent stop, the
metrics server, the span source, the judge pool and the expiry loop — and the readiness it reports."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Hashable
from typing import Any, Final

from prometheus_client import CollectorRegistry

from .. import semconv as sc
from .._log import LogOnce
from .._security import server_ssl_context
from ..config import AgentConfig
from ..evaluators.judging import check_criteria_judge, criteria_of
from ..export.metrics import AgentMetrics
from ..export.server import MetricsServer
from ..ingest.kafka.settings import KafkaSourceSettings
from ..ingest.receivers.settings import GrpcReceiverSettings, HttpReceiverSettings
from ..ingest.source import SpanSource
from ..scoring.identity import judge_identity, not_fitted_line
from ..scoring.judge import CIRCUIT_CLOSED, Judge
from .scores import ScoreListener
from .wiring import build_parts

__all__ = ["EXPIRY_TICK_S", "Agent"]

log = logging.getLogger("ragmon.agent")

EXPIRY_TICK_S: Final = 0.25


class Agent:
    """Run with ``async with Agent(config) as agent:`` or ``start()`` / ``stop()``.

    ``judge`` and ``source`` are built from ``config`` at start unless given. Sources are given the
    router (``parts.router``), the ``SpanSink``; whatever hands spans over in-process uses it too."""

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
        self._judge = judge
        self._source = source
        self._grpc: SpanSource | None = None  # the gRPC receiver, when this agent built one
        self._clock = clock
        self._log_once = LogOnce(log)
        parts = build_parts(config, registry=registry, clock=clock, release=self._release, log_once=self._log_once)
        self.parts = parts
        self.metrics: AgentMetrics = parts.metrics
        self._router = parts.router
        self._assembler = parts.assembler
        self._ledger = parts.ledger
        self._pool = parts.pool
        self._tasks: list[asyncio.Task[None]] = []
        self._server: MetricsServer | None = None
        self._started = False
        self._stopping = False

    async def __aenter__(self) -> Agent:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        if self._started:
            return
        evaluators = self.parts.evaluators
        if self._judge is None:
            from ..scoring.factory import JudgeSettings, build_judge

            # Loading the local model takes a moment; keep the loop responsive.
            self._judge = await asyncio.to_thread(build_judge, self.config.section(JudgeSettings), self.metrics,
                                                  criteria_of(evaluators.specs))
        judge = self._judge
        check_criteria_judge(judge.name, evaluators.specs)
        identity = judge_identity(judge)
        self.metrics.judge_info.labels(identity.judge, identity.version, identity.profile).set(1)
        self._export_error_rates(judge)
        if self._source is None:
            self._source = self._build_source()
        self._server = self._build_server()
        await self._server.start()
        self._pool.start(judge)
        self._tasks.append(asyncio.create_task(self._expiry_loop(), name="ragmon-expiry"))
        await self._source.start(self._router)
        self._started = True
        log.info("ragmon agent started: source=%s judge=%s metrics=http://%s:%d/metrics",
                 self._source.name, judge.name, self.config.metrics_host, self.metrics_port)
        not_fitted = not_fitted_line(identity)  # once, after a start that worked
        if not_fitted is not None:
            log.warning("%s", not_fitted)

    def _export_error_rates(self, judge: Judge) -> None:
        """The judge's error rates per metric: exported for the rules, kept for the sampler's unit."""
        from ..scoring.error_rates import error_rates_of

        youden: dict[str, float] = {}
        for metric, rates in error_rates_of(judge).items():
            self.metrics.judge_sensitivity.labels(judge.name, metric).set(rates.sensitivity)
            self.metrics.judge_specificity.labels(judge.name, metric).set(rates.specificity)
            if rates.score_gap is not None:
                self.metrics.judge_score_gap.labels(judge.name, metric).set(rates.score_gap)
            youden[metric] = rates.youden
        self.parts.scores.use_youden(youden)

    def _build_server(self) -> MetricsServer:
        c = self.config
        ssl_context = None
        if c.metrics_tls_cert_file and c.metrics_tls_key_file:
            ssl_context = server_ssl_context(
                c.metrics_tls_cert_file, c.metrics_tls_key_file, None,
                lambda: self.metrics.auth_failures.labels(sc.ENDPOINT_METRICS, sc.AUTH_FAILED_TLS).inc(),
                setting="--metrics-tls-cert-file / --metrics-tls-key-file")
        inspector = self.parts.scores.inspector
        return MetricsServer(
            self.metrics.registry, c.metrics_host, c.metrics_port,
            readiness=self._readiness, worst=self.parts.scores.worst.snapshot, ssl_context=ssl_context,
            inspect=inspector.get if inspector is not None else None,
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
        from ..ingest.receivers.grpc_receiver import OtlpGrpcReceiver

        self._grpc = OtlpGrpcReceiver(self.config.section(GrpcReceiverSettings), self.metrics)
        return CompositeSource([http, self._grpc])

    async def stop(self) -> None:
        """Stop accepting, close open traces, finish or account in-flight work, stop serving."""
        if not self._started or self._stopping:
            return
        self._stopping = True
        assert self._source is not None
        await self._source.stop()
        router, ledger, pool = self._router, self._ledger, self._pool
        router.process(self._assembler.close_all())
        deadline = self._clock() + self.config.shutdown_grace_s
        # a bounded poll: draining ends on either condition, and the deadline is a clock read
        while (len(ledger) or not pool.idle()) and self._clock() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        await pool.close()
        for task in self._tasks:  # the expiry loop
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        router.shut_out()  # whatever the grace period could not finish is accounted, never silently lost
        self.metrics.judge_backlog.set(len(ledger))
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

    def _release(self, token: Hashable) -> None:
        """A delivery is accounted for: the source may commit it."""
        if self._source is None:
            return
        try:
            self._source.release(token)
        except Exception:  # noqa: BLE001  # a source bug must not leave the trace unaccounted
            self._log_once.warning("release", "source.release failed", exc_info=True)

    # ------------------------------------------------------------------ what it reports
    @property
    def receiver_port(self) -> int | None:
        return self._source.port if self._source is not None else None

    @property
    def receiver_grpc_port(self) -> int | None:
        """The OTLP/gRPC receiver's bound port; None when it is off or not started."""
        return self._grpc.port if self._grpc is not None else None

    @property
    def metrics_port(self) -> int:
        return self._server.port if self._server is not None else self.config.metrics_port

    @property
    def judge(self) -> Judge | None:
        return self._judge

    def add_listener(self, listener: ScoreListener) -> None:
        self.parts.scores.listeners.append(listener)

    async def wait_idle(self, timeout_s: float = 30.0) -> bool:
        """Wait until no trace is open, queued or being judged; False on timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._assembler.open_count == 0 and not len(self._ledger):
                return True
            await asyncio.sleep(0.05)
        return False

    async def _expiry_loop(self) -> None:
        tick = min(EXPIRY_TICK_S, self.config.trace_timeout_s / 4)
        while True:
            await asyncio.sleep(tick)
            try:
                self._router.expire()
                self.metrics.open_traces.set(self._assembler.open_count)
                self.metrics.judge_backlog.set(len(self._ledger))
            except Exception:  # noqa: BLE001  # the expiry loop must keep ticking
                self._log_once.warning("expiry", "expiry tick failed", exc_info=True)

    def _readiness(self) -> tuple[bool, dict[str, Any]]:
        source_ready = bool(self._source is not None and self._source.ready())
        judge = self._judge
        circuit = judge.circuit_state if judge is not None else CIRCUIT_CLOSED
        detail = {
            "source": self._source.name if self._source is not None else None,
            "source_ready": source_ready,
            "judge": judge.name if judge is not None else None,
            "judge_state": "ok" if circuit == CIRCUIT_CLOSED else "degraded",
            "judge_circuit": circuit,
            "open_traces": self._assembler.open_count,
            "judge_backlog": len(self._ledger),
        }
        return source_ready and not self._stopping, detail
