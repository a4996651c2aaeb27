"""The latency-only path: a trace outside the judging sample gets the same metrics and the same
accounting as through ``_process_one``, read from its ``LatencyTrace`` (``ingest.extract``)
instead of a full ``RagTrace``. When the trace might be judged after all (the rate picks it, or a
priority rule may) its ``RagTrace`` is built and the decision is the full path's own.

``latency_only`` tells the sources which traces they may read lightly (``SpanSink.latency_only``,
``ingest/otlp_proto.py``);
``fast_path=False`` (``--no-fast-path``) turns the path off, e.g. to compare both.

Counters and latency histograms of both paths go through the agent's ``Tally`` (``ingest/tally.py``),
applied once per submission or fetched batch (``_steps.py``); the histograms of both paths share it
so that their sums add the same values in the same order.
"""

from __future__ import annotations

from functools import partial
from typing import Any, TypeGuard

from .. import semconv as sc
from ..export.latency import SlidingQuantile
from ..ingest.closed_trace import ClosedTrace
from ..ingest.extract import ExtractSettings, LatencyOnly, LatencyTrace, latency_keys
from ..sampling import fraction_in_sample, in_sample
from ..sampling.sampler import is_negative_feedback
from ..types import RagTrace
from ._accounting import AccountingMixin

_MAX_RAW_PAIRS = 4096  # (service, pipeline) values as sent, remembered with their label pair


class LatencyOnlyMixin(AccountingMixin):
    """Latency metrics, and ``_process_one`` for traces read for latency only."""

    @property
    def latency_only(self) -> LatencyOnly | None:
        """Which traces the sources may read for latency only; None when every trace is read in full."""
        c = self.config
        if not c.fast_path:
            return None
        # The highest rate any pipeline can be judged at: adaptive rates stay within detect_max_rate.
        bound = c.detect_max_rate if self._power.adaptive else max([c.sample_rate, *c.pipeline_sample_rates.values()])
        if bound >= 1.0:
            return None  # every trace may be judged
        return LatencyOnly(bound, latency_keys(c.section(ExtractSettings)))

    def _process_latency_only(self, closed: ClosedTrace, lt: LatencyTrace) -> tuple[RagTrace, float | None] | None:
        """``_process_one`` up to the sampling decision; returns the full trace and the rate when
        the trace may be judged (the caller decides), None when it is accounted for."""
        m = self.metrics
        if lt.not_rag:
            self._skip_not_rag(closed, lt.service)
            return None
        series = self._series_raw.get((lt.service, lt.pipeline))
        if series is None:
            series = self._series_of(lt.service, lt.pipeline)
        key = series.key
        tally = self._tally
        # The usual children are kept in slots and made when first used, as labels() would make them
        child = series.received
        if child is None:
            child = series.received = m.traces_received.labels(*key)
        tally.inc(child)
        if not lt.complete:
            tally.inc(series.get("incomplete:" + closed.reason, m.traces_incomplete, closed.reason))
        trace_id = lt.trace_id
        if trace_id in self._recent or trace_id in self._in_flight:
            tally.inc(series.get("duplicate", m.traces_duplicate))
            tally.inc(series.get("skipped:" + sc.SKIP_DUPLICATE, m.traces_skipped, sc.SKIP_DUPLICATE))
            self._account(closed, remember=False)
            return None
        # _observe_latency; the plausible range is checked inline, _plausible counts and logs what
        # falls outside it. The P95 windows take their values through the tally too (one lock a batch).
        max_s = self.config.latency_max_s
        retrieval_s = lt.retrieval_latency_s
        if retrieval_s is not None:
            if 0.0 <= retrieval_s <= max_s or self._plausible(retrieval_s):
                child = series.retrieval
                if child is None:
                    child = series.retrieval = m.retrieval_latency.labels(*key)
                    series.retrieval_window = self._window("retrieval", *key)
                tally.observe(child, retrieval_s)
                tally.observe(series.retrieval_window, retrieval_s)
            child = series.documents
            if child is None:
                child = series.documents = m.retrieved_documents.labels(*key)
            tally.observe(child, lt.document_count)
        generation_s = lt.generation_latency_s
        if generation_s is not None and (0.0 <= generation_s <= max_s or self._plausible(generation_s)):
            child = series.generation
            if child is None:
                child = series.generation = m.generation_latency.labels(*key)
            tally.observe(child, generation_s)
        pipeline_s = lt.pipeline_latency_s
        if pipeline_s is not None and (0.0 <= pipeline_s <= max_s or self._plausible(pipeline_s)):
            child = series.pipeline
            if child is None:
                child = series.pipeline = m.pipeline_latency.labels(*key)
                series.pipeline_window = self._window("pipeline", *key)
            tally.observe(child, pipeline_s)
            tally.observe(series.pipeline_window, pipeline_s)
        source = lt.contexts_source
        if source in sc.CONTEXTS_SOURCES:
            tally.inc(series.get(source, m.contexts_source, source))
        power = self._power
        power.observe_traffic(key)
        self._releases.observe_values(key[0], lt.service, key[1], lt.prompt_version, lt.model)
        rate = power.rate_for(key) if power.adaptive else None
        if self._may_be_judged(lt, rate):
            return closed.trace, rate  # the full extraction, and the full path's own decision
        child = series.not_sampled
        if child is None:
            child = series.not_sampled = m.traces_skipped.labels(*key, sc.SKIP_NOT_SAMPLED)
        tally.inc(child)
        self._account(closed)
        return None

    def _series_of(self, service: str, pipeline: str) -> _Series:
        """The metric children of a trace's (service, pipeline) label pair, by the trace's own
        service and pipeline (the label limiter gives a pair the same labels every time)."""
        key = self.metrics.labels_sp(service, pipeline)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = _Series(key)
        if len(self._series_raw) < _MAX_RAW_PAIRS:  # raw values are the sender's: bounded
            self._series_raw[(service, pipeline)] = series
        return series

    def _may_be_judged(self, lt: LatencyTrace, rate: float | None) -> bool:
        """Whether ``SamplingPolicy.decide`` could pick this trace; False only when it surely won't."""
        policy = self._policy
        if rate is None:
            rate = policy.rate_for(lt.pipeline)
        fraction = lt.fraction  # in_sample's, hashed once already by the reader (-1.0: not hashed)
        if in_sample(lt.trace_id, rate) if fraction < 0.0 else fraction_in_sample(fraction, rate):
            return True
        if policy.priority_errors and lt.has_error:
            return True  # the rule reads RAG spans only: the full trace tells
        if (policy.slow_retrieval_s is not None and lt.retrieval_latency_s is not None
                and lt.retrieval_latency_s > policy.slow_retrieval_s):
            return True
        if policy.priority_feedback and is_negative_feedback(lt.feedback):
            return True
        top = lt.top_retrieval_score
        return policy.min_top_score is not None and top is not None and top < policy.min_top_score

    def _observe_latency(self, service: str, pipeline: str, retrieval_s: float | None, documents: int,
                         generation_s: float | None, pipeline_s: float | None) -> None:
        m = self.metrics
        tally = self._tally  # as the latency-only path records: the same histogram sums
        if self._plausible(retrieval_s):
            tally.observe(m.retrieval_latency.labels(service, pipeline), retrieval_s)
            self._window("retrieval", service, pipeline).observe(retrieval_s)
        if retrieval_s is not None:
            tally.observe(m.retrieved_documents.labels(service, pipeline), documents)
        if self._plausible(generation_s):
            tally.observe(m.generation_latency.labels(service, pipeline), generation_s)
        if self._plausible(pipeline_s):
            tally.observe(m.pipeline_latency.labels(service, pipeline), pipeline_s)
            self._window("pipeline", service, pipeline).observe(pipeline_s)

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


class _Series:
    """The metric children of one (service, pipeline) label pair, each made when first used — as
    ``labels()`` in ``_process_one`` would, so the exposition is the same. Those every trace uses
    sit in slots (None until made); the rest by name (``get``)."""

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
