"""State shared by the agent's parts: declared once here so every mixin type-checks on its own.

The values are set in ``Agent.__init__`` (``_agent.py``); the mixins only read and update them.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from .._log import LogOnce
from ..config import AgentConfig
from ..evaluators import EvaluatorSet
from ..export.inspector import RecentTraces
from ..export.latency import SlidingQuantile
from ..export.metrics import AgentMetrics
from ..export.releases import ReleaseTracker
from ..export.server import MetricsServer
from ..export.worst import WorstTraces
from ..ingest.assembler import TraceAssembler
from ..ingest.closed_trace import ClosedTrace
from ..ingest.source import SpanSource
from ..ingest.tally import Tally
from ..sampling.power import JudgeCost, PowerSampler
from ..sampling.sampler import SamplingPolicy
from ..scoring.judge import Judge
from ..types import RagTrace, Scores

log = logging.getLogger("ragmon.agent")

ScoreListener = Callable[[RagTrace, Scores, str], None]
EXPIRY_TICK_S = 0.25
CANCEL_RETRY_S = 0.1  # stop(): cancel again after this long (a cancellation can be swallowed)
CANCEL_ROUNDS = 50  # ... and give up on a worker that ignores this many (its trace is accounted anyway)


class RecentIds(OrderedDict[str, None]):
    """Bounded memory of accounted trace ids, to recognise redelivered traces (``in`` is the
    dict's own: asked for every trace)."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self._size = size

    def add(self, trace_id: str) -> None:
        if self._size <= 0:
            return
        if trace_id in self:
            self.move_to_end(trace_id)
            return
        self[trace_id] = None
        while len(self) > self._size:
            self.popitem(last=False)


class AgentState:
    """The agent's fields, typed. No behaviour: each part of the agent is a mixin over this."""

    config: AgentConfig
    metrics: AgentMetrics
    _judge: Judge | None
    _source: SpanSource | None
    _clock: Callable[[], float]
    _assembler: TraceAssembler
    _policy: SamplingPolicy
    _judge_cost: JudgeCost
    _power: PowerSampler
    _stream: dict[str, str]  # trace id -> sample stream (rate | priority) while in flight
    _releases: ReleaseTracker
    _thresholds: dict[str, float]
    _youden: dict[str, float]
    _worst: WorstTraces
    _evaluators: EvaluatorSet
    _inspector: RecentTraces | None
    _recent: RecentIds
    _p95: dict[tuple[str, str, str], SlidingQuantile]
    _series: dict[tuple[str, str], Any]  # (service, pipeline) -> metric children (_latency._Series)
    _series_raw: dict[tuple[str, str], Any]  # ... the same, by the trace's own service and pipeline
    _tally: Tally  # metric updates not yet applied (flushed at the end of a submission or batch)
    _batching: int  # open batch() scopes: flush when the outermost ends
    _listeners: list[ScoreListener]
    _log_once: LogOnce
    # delivery-token bookkeeping (see ingest/source.py)
    _token_traces: dict[Hashable, set[str]]
    _trace_tokens: dict[str, set[Hashable]]
    _in_flight: dict[str, ClosedTrace]
    _drop_seen: dict[str, int]
    _backlog: asyncio.Queue[ClosedTrace] | None
    _tasks: list[asyncio.Task[None]]
    _server: MetricsServer | None
    _started: bool
    _stopping: bool
