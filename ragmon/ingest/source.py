"""The contract between a span source (HTTP receiver, Kafka consumer) and the agent.

A source decodes what it receives into ``SpanRecord``s and hands them to the agent's
``SpanSink.submit`` together with an optional *delivery token* (e.g. a Kafka
``(topic, partition, offset)``). The agent calls ``source.release(token)`` once every trace
that had spans in that delivery is accounted for (scored, skipped or failed), which is
when a Kafka source may commit the offset. Sources poll ``sink.backpressure()`` and pause
while it is True instead of buffering without bound. A Kafka source that loses a partition hands
its deliveries on (``hand_over_where``) and asks which traces are still unaccounted (``unaccounted``).

The sink also says which traces a source may read for latency only (``latency_only``: the
sampling bound and the keys to read, ``extract.LatencyOnly``); a source reads the spans of those
traces as ``LightSpan``s then (``decode/otlp_proto.py``), every other span in full.

``latency_only_of`` and ``batch_of`` are how every source reads those two from its sink.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ..types import SpanRecord
from .extract import LatencyOnly, LightSpan

__all__ = ["Counting", "KafkaSourceMetrics", "Labelled", "LatencyOnly", "LightSpan", "Removable", "SourceMetrics",
           "SpanSink", "SpanSource", "batch_of", "latency_only_of"]


class Labelled(Protocol):
    """A Prometheus metric family: ``family.labels(*values)`` gives the child to inc/set/observe."""

    def labels(self, *values: str) -> Any: ...


class Removable(Labelled, Protocol):
    """A labelled family whose children can be dropped (a gauge per partition that was revoked)."""

    def remove(self, *values: str) -> None: ...


class Counting(Protocol):
    """An unlabelled counter."""

    def inc(self, amount: float = 1) -> None: ...


class SourceMetrics(Protocol):
    """The metric families every source records (ragmon.export.metrics.AgentMetrics has them).

    Read-only properties, so any object whose attributes are metric families satisfies it."""

    @property
    def requests_received(self) -> Labelled: ...  # {source, outcome}
    @property
    def spans_received(self) -> Labelled: ...  # {source}
    @property
    def dropped(self) -> Labelled: ...  # {reason}


class KafkaSourceMetrics(SourceMetrics, Protocol):
    """What the Kafka source records on top of ``SourceMetrics``."""

    @property
    def kafka_messages(self) -> Labelled: ...
    @property
    def kafka_commits(self) -> Labelled: ...
    @property
    def kafka_lag(self) -> Removable: ...
    @property
    def kafka_paused(self) -> Counting: ...
    @property
    def kafka_rebalances(self) -> Labelled: ...
    @property
    def kafka_dead_letters(self) -> Labelled: ...
    @property
    def kafka_handover(self) -> Labelled: ...  # {kind}


class SpanSink(Protocol):
    @property
    def latency_only(self) -> LatencyOnly | None:
        """Which traces a source may read for latency only (outside ``bound``: no judging rate can
        pick them) and which of their attributes; None: every span is decoded in full. Read once,
        when the source starts."""

    def submit(self, spans: Sequence[SpanRecord | LightSpan], token: Hashable | None = None) -> None:
        """Hand decoded spans to the agent. Never raises for bad spans; never blocks.

        ``LightSpan``s come only when ``latency_only`` is set, of traces outside its bound."""

    def backpressure(self) -> bool:
        """True while the judge backlog is full: pause consuming."""

    def admit(self, spans: Sequence[SpanRecord | LightSpan]) -> bool:
        """Whether the agent can take this export's traces now; a receiver answers "retry later"
        (503 / UNAVAILABLE) before accepting anything when it cannot."""

    def batch(self) -> AbstractContextManager[object]:
        """A scope whose submissions apply their metric updates together at its end (a source hands
        a fetched batch over inside one; nothing may await inside it)."""

    async def flush_where(self, predicate: Callable[[Hashable], bool], timeout_s: float) -> None:
        """Close open traces holding a token that matches ``predicate`` and wait (bounded)
        until they are accounted for, e.g. before partitions are revoked."""

    async def hand_over_where(self, predicate: Callable[[Hashable], bool], timeout_s: float) -> set[str]:
        """The deliveries matching ``predicate`` go to another consumer (a Kafka partition revoked):
        forget their open traces unjudged (the next owner reads them again), wait (bounded) for
        their traces being judged, and let go of their tokens without releasing them. Returns the
        ids of the traces handed on (a sink that judges nothing partially returns an empty set)."""

    def unaccounted(self, trace_ids: set[str]) -> set[str]:
        """Those of ``trace_ids`` still being assembled or judged (a sink that cannot tell: all)."""


class SpanSource(Protocol):
    #: bounded label value: "http" or "kafka"
    name: str

    @property
    def port(self) -> int | None:
        """The TCP port the source listens on once started (port 0 resolved); None for a
        source that does not listen (Kafka) or has not started."""
        ...

    async def start(self, sink: SpanSink) -> None:
        """Connect/bind and begin delivering spans to ``sink``; return once running."""

    async def stop(self) -> None:
        """Stop receiving; commit what is safe. Idempotent."""

    def release(self, token: Hashable) -> None:
        """Every trace with spans in the delivery ``token`` is accounted for."""

    def ready(self) -> bool:
        """Bound / connected and delivering (for /readyz)."""


def latency_only_of(sink: SpanSink) -> LatencyOnly | None:
    """Which traces the sink lets a source read for latency only (``SpanSink.latency_only``); None:
    every span is decoded in full."""
    return sink.latency_only


def batch_of(sink: SpanSink) -> AbstractContextManager[object]:
    """The sink's ``batch()`` scope (submissions inside apply their metric updates together at
    its end)."""
    return sink.batch()
