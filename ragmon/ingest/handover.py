"""How a receiver hands decoded spans to the agent: shared by the OTLP/HTTP and gRPC receivers.

Both ask before they accept (``admits``, ``backpressure``: the OTLP spec's 503/UNAVAILABLE with
a retry hint must come *before* the exporter is told "accepted") and then hand the spans over in
slices, yielding to the event loop between them, so one huge export never keeps health probes
and other requests waiting. A broken probe never takes a receiver down: it admits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Hashable, Sequence
from contextlib import AbstractContextManager
from typing import Final

from ..types import SpanRecord
from .source import LatencyOnly, LightSpan, SpanSink

log = logging.getLogger(__name__)

SUBMIT_SLICE: Final = 2_000  # spans handed to the sink between two yields to the event loop


def latency_only_of(sink: SpanSink) -> LatencyOnly | None:
    """Which traces the sink lets a source read for latency only (``SpanSink.latency_only``); None:
    every span is decoded in full."""
    return sink.latency_only


def batch_of(sink: SpanSink) -> AbstractContextManager[object]:
    """The sink's ``batch()`` scope (submissions inside apply their metric updates together at
    its end), or a scope that does nothing for a sink without one."""
    batch = getattr(sink, "batch", None)
    return batch() if callable(batch) else contextlib.nullcontext()


def admits(sink: SpanSink, spans: Sequence[SpanRecord | LightSpan]) -> bool:
    """The sink's admission check for this export (``SpanSink.admit``)."""
    try:
        return bool(sink.admit(spans))
    except Exception:  # a broken admission probe must not take the receiver down
        log.debug("sink.admit() failed", exc_info=True)
        return True


def backpressure(sink: SpanSink) -> bool:
    """Whether the sink wants the source to pause (``SpanSink.backpressure``)."""
    try:
        return bool(sink.backpressure())
    except Exception:  # a broken back-pressure probe must not take the receiver down
        log.debug("sink.backpressure() failed", exc_info=True)
        return False


async def hand_over(sink: SpanSink, predicate: Callable[[Hashable], bool], timeout_s: float) -> set[str]:
    """A Kafka partition goes to another agent: the sink's ``hand_over_where`` (open traces of it
    forgotten unjudged, returned), or ``flush_where`` for a sink without one (nothing handed on)."""
    hand = getattr(sink, "hand_over_where", None)
    if hand is None:
        await sink.flush_where(predicate, timeout_s)
        return set()
    return set(await hand(predicate, timeout_s))


def unaccounted(sink: SpanSink, trace_ids: set[str]) -> set[str]:
    """Which of ``trace_ids`` the sink has not accounted for yet (a sink that cannot tell: all)."""
    ask = getattr(sink, "unaccounted", None)
    if ask is None:
        return trace_ids
    try:
        return set(ask(trace_ids))
    except Exception:  # a broken probe lists nothing as taken: duplicates, never a loss
        log.debug("sink.unaccounted() failed", exc_info=True)
        return trace_ids


async def submit_in_slices(sink: SpanSink, spans: Sequence[SpanRecord | LightSpan]) -> None:
    """Hand ``spans`` over in slices of ``SUBMIT_SLICE``, yielding to the loop between them."""
    for start in range(0, len(spans), SUBMIT_SLICE):
        if start:
            await asyncio.sleep(0)
        sink.submit(spans[start:start + SUBMIT_SLICE], None)
