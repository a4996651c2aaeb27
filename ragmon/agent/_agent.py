"""``Agent``: the constructor that wires the collaborators; behaviour lives in the mixins."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable
from typing import Any

from prometheus_client import CollectorRegistry

from .._log import LogOnce
from ..config import AgentConfig
from ..errors import ConfigError
from ..evaluators import EvaluatorFileError, EvaluatorSet, load_evaluators
from ..export.inspector import RecentTraces
from ..export.latency import SlidingQuantile
from ..export.metrics import AgentMetrics
from ..export.releases import ReleaseTracker
from ..export.server import MetricsServer
from ..export.worst import WorstTraces
from ..ingest.assembler import TraceAssembler
from ..ingest.closed_trace import ClosedTrace
from ..ingest.extract import ExtractSettings
from ..ingest.source import SpanSource
from ..ingest.tally import Tally
from ..sampling.power import JudgeCost, PowerSampler, PowerTarget
from ..sampling.sampler import SamplingPolicy
from ..scoring.judge import Judge
from ._lifecycle import LifecycleMixin
from ._state import RecentIds, ScoreListener, log


class Agent(LifecycleMixin):
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
        self._evaluators = _evaluator_set(config.evaluators)
        self._youden: dict[str, float] = {}  # metric -> the judge's J, set at start (scoring/error_rates.py)
        self._worst = WorstTraces(config.worst_size, config.worst_max_chars, clock=clock)
        self._inspector = (RecentTraces(config.trace_inspector_size, config.trace_inspector_max_chars)
                           if config.trace_inspector else None)
        self._recent = RecentIds(config.dedup_size)
        self._p95: dict[tuple[str, str, str], SlidingQuantile] = {}
        self._series: dict[tuple[str, str], Any] = {}
        self._series_raw: dict[tuple[str, str], Any] = {}
        self._tally = Tally()
        self._batching = 0
        self._listeners: list[ScoreListener] = []
        if config.export_judged:  # judged traces for `ragmon dataset harvest` (bounded, rotating JSONL)
            from ..export.judged import JudgedSink

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

    async def __aenter__(self) -> Agent:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def _evaluator_set(path: str | None) -> EvaluatorSet:
    """The declared evaluators (none without --evaluators); a bad file is a ConfigError naming its line."""
    if not path:
        return EvaluatorSet()
    try:
        return EvaluatorSet(load_evaluators(path))
    except EvaluatorFileError as exc:
        raise ConfigError("--evaluators", str(exc)) from None
