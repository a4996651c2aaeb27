"""The latency recorder: what every trace contributes, judged or not, recorded one way for all.

A trace read for latency only arrives with its ``LatencyTrace`` (``ingest.extract``); a trace read
in full is seen through the same view (``latency_view``), so both take one path: received and
incomplete counts, duplicates, the stage latency histograms and P95 windows, where its contexts came
from, the release it belongs to and the traffic the power sampler plans with.

Counters and histograms go through the router's ``Tally`` (``ingest/tally.py``), applied once per
submission or fetched batch; the metric children of a (service, pipeline) pair are made once, when
first used (as ``labels()`` would make them, so the exposition is the same), and kept in a ``Series``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from .. import semconv as sc
from .._log import LogOnce
from ..export.latency import SlidingQuantile
from ..export.metrics import AgentMetrics
from ..export.releases import ReleaseTracker
from ..ingest.extract import LatencyTrace
from ..ingest.tally import Tally
from ..types import RagTrace

__all__ = ["LatencyRecorder", "LatencySettings", "Series", "latency_view"]

_MAX_RAW_PAIRS: Final = 4096  # (service, pipeline) values as sent, remembered with their label pair


def latency_view(trace: RagTrace) -> LatencyTrace:
    """The latency-only view of a trace read in full: the fields the recorder and the sampling
    pre-check read, with the values ``ingest.extract.latency_trace`` gives for the same spans."""
    attributes = trace.attributes
    source = attributes.get(sc.RAGMON_CONTEXTS_SOURCE)
    return LatencyTrace(
        trace.trace_id, trace.service, trace.pipeline, trace.complete, bool(attributes.get(sc.RAGMON_NOT_RAG)),
        trace.retrieval_latency_s, trace.generation_latency_s, trace.pipeline_latency_s, len(trace.documents),
        trace.top_retrieval_score, trace.error_type is not None,
        attributes.get(sc.LLM_MODEL_NAME), attributes.get(sc.LLM_PROMPT_TEMPLATE_VERSION),
        # a hand-made trace may say nothing: not counted (a value outside CONTEXTS_SOURCES)
        source if isinstance(source, str) else "", attributes.get(sc.RAGMON_FEEDBACK))


class Series:
    """The metric children of one (service, pipeline) label pair, each made when first used. Those
    every trace uses sit in slots (None until made); the rest by name (``get``)."""

    __slots__ = ("_children", "documents", "generation", "key", "not_sampled", "pipeline", "pipeline_window",
                 "received", "retrieval", "retrieval_window")

    def __init__(self, key: tuple[str, str]) -> None:
        self.key = key
        self._children: dict[str, Any] = {}
        self.received: Any = None
        self.retrieval: Any = None
        self.retrieval_window: SlidingQuantile | None = None  # made with retrieval
        self.documents: Any = None
        self.generation: Any = None
        self.pipeline: Any = None
        self.pipeline_window: SlidingQuantile | None = None  # made with pipeline
        self.not_sampled: Any = None

    def get(self, name: str, family: Any, *more: str) -> Any:
        child = self._children.get(name)
        if child is None:
            child = self._children[name] = family.labels(*self.key, *more)
        return child


@dataclass(frozen=True, slots=True)
class LatencySettings:
    """The recorder's rows of the settings table (``AgentConfig.section(LatencySettings)``)."""

    latency_max_s: float  # a latency outside [0, this] is counted dropped{invalid_timestamp}, not observed
    latency_window_s: float  # the P95 gauges' sliding window


class LatencyRecorder:
    """Records every trace's traffic and latency metrics (never sampled), one path for all traces.

    ``observe_traffic(key)`` is the power sampler's (the traces each label pair sends)."""

    def __init__(self, settings: LatencySettings, metrics: AgentMetrics, tally: Tally, releases: ReleaseTracker, *,
                 clock: Callable[[], float], observe_traffic: Callable[[Hashable], None], log_once: LogOnce) -> None:
        self._m = metrics
        self._tally = tally
        self._releases = releases
        self._max_s = settings.latency_max_s
        self._window_s = settings.latency_window_s
        self._clock = clock
        self._observe_traffic = observe_traffic
        self._log_once = log_once
        self._series: dict[tuple[str, str], Series] = {}  # by label pair
        self._series_raw: dict[tuple[str, str], Series] = {}  # ... the same, by the trace's own values

    def record(self, view: LatencyTrace, reason: str, duplicate: bool) -> Series | None:
        """Count the trace as received (and incomplete, with the assembler's ``reason``); a
        ``duplicate`` is counted as such and skipped{duplicate} (None: the caller accounts for it
        unremembered); any other has its latencies, contexts source, release and traffic recorded.
        Returns the trace's series (its ``key``: the label pair)."""
        m = self._m
        series = self._series_raw.get((view.service, view.pipeline))
        if series is None:
            series = self.series_of(view.service, view.pipeline)
        key = series.key
        tally = self._tally
        child = series.received
        if child is None:
            child = series.received = m.traces_received.labels(*key)
        tally.inc(child)
        if not view.complete:
            tally.inc(series.get("incomplete:" + reason, m.traces_incomplete, reason))
        if duplicate:
            tally.inc(series.get("duplicate", m.traces_duplicate))
            tally.inc(series.get("skipped:" + sc.SKIP_DUPLICATE, m.traces_skipped, sc.SKIP_DUPLICATE))
            return None
        # the plausible range is checked inline; _plausible counts and logs what falls outside it.
        # The P95 windows take their values through the tally too (one lock a batch).
        max_s = self._max_s
        retrieval_s = view.retrieval_latency_s
        if retrieval_s is not None:
            if 0.0 <= retrieval_s <= max_s or self._plausible(retrieval_s):
                child = series.retrieval
                if child is None:
                    child = series.retrieval = m.retrieval_latency.labels(*key)
                    series.retrieval_window = self._window(m.retrieval_latency_p95, key)
                tally.observe(child, retrieval_s)
                tally.observe(series.retrieval_window, retrieval_s)
            child = series.documents
            if child is None:
                child = series.documents = m.retrieved_documents.labels(*key)
            tally.observe(child, view.document_count)
        generation_s = view.generation_latency_s
        if generation_s is not None and (0.0 <= generation_s <= max_s or self._plausible(generation_s)):
            child = series.generation
            if child is None:
                child = series.generation = m.generation_latency.labels(*key)
            tally.observe(child, generation_s)
        pipeline_s = view.pipeline_latency_s
        if pipeline_s is not None and (0.0 <= pipeline_s <= max_s or self._plausible(pipeline_s)):
            child = series.pipeline
            if child is None:
                child = series.pipeline = m.pipeline_latency.labels(*key)
                series.pipeline_window = self._window(m.pipeline_latency_p95, key)
            tally.observe(child, pipeline_s)
            tally.observe(series.pipeline_window, pipeline_s)
        source = view.contexts_source
        if source in sc.CONTEXTS_SOURCES:
            tally.inc(series.get(source, m.contexts_source, source))
        self._observe_traffic(key)
        self._releases.observe_values(key[0], view.service, key[1], view.prompt_version, view.model)
        return series

    def not_sampled(self, series: Series) -> None:
        """Counts the trace skipped{not_sampled} (the caller accounts for it)."""
        child = series.not_sampled
        if child is None:
            child = series.not_sampled = self._m.traces_skipped.labels(*series.key, sc.SKIP_NOT_SAMPLED)
        self._tally.inc(child)

    def series_of(self, service: str, pipeline: str) -> Series:
        """The series of a trace's (service, pipeline), by the trace's own values (the label
        limiter gives a pair the same labels every time)."""
        key = self._m.labels_sp(service, pipeline)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = Series(key)
        if len(self._series_raw) < _MAX_RAW_PAIRS:  # raw values are the sender's: bounded
            self._series_raw[(service, pipeline)] = series
        return series

    def _plausible(self, latency_s: float) -> bool:
        """A latency worth observing. A span that ends in the year 2554 (end time 2^64-1) or before
        it starts would otherwise own the P95 gauge and the histogram sum: counted, not observed."""
        if 0.0 <= latency_s <= self._max_s:
            return True
        self._m.dropped.labels(sc.DROP_INVALID_TIMESTAMP).inc()
        self._log_once.warning("timestamp", "latency of %.6g s outside [0, %g] s (bogus span timestamps?); "
                               "not observed", latency_s, self._max_s)
        return False

    def _window(self, gauge: Any, key: tuple[str, str]) -> SlidingQuantile:
        window = SlidingQuantile(self._window_s, clock=self._clock)
        gauge.labels(*key).set_function(partial(window.quantile, 0.95))
        return window
