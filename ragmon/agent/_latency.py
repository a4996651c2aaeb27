"""The latency-only path: a trace outside the judging sample gets the same metrics and the same
accounting as through ``_process_one``, read from its ``LatencyTrace`` (``ingest.extract``)
instead of a full ``RagTrace``. When the trace might be judged after all (the rate picks it, or a
priority rule may) its ``RagTrace`` is built and the decision is the full path's own.

``latency_only`` tells the sources which traces they may read lightly (``ingest/otlp_light.py``);
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
from ..ingest.assembler import ClosedTrace
from ..ingest.extract import ExtractSettings, LatencyTrace, latency_keys
from ..ingest.otlp_light import LatencyOnly
from ..sampling import in_sample
from ..scoring.sampler import is_negative_feedback
from ..types import RagTrace
from ._accounting import AccountingMixin

_NO_ATTRIBUTES: dict[str, Any] = {}


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
        key = m.labels_sp(lt.service, lt.pipeline)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = _Series(self, *key)
        tally = self._tally
        tally.inc(series.get("received", m.traces_received))
        if not lt.complete:
            tally.inc(series.get("incomplete", m.traces_incomplete))
        trace_id = lt.trace_id
        if trace_id in self._recent or trace_id in self._in_flight:
            tally.inc(series.get("duplicate", m.traces_duplicate))
            tally.inc(series.get("skipped:" + sc.SKIP_DUPLICATE, m.traces_skipped, sc.SKIP_DUPLICATE))
            self._account(closed, remember=False)
            return None
        # _observe_latency, with the children kept (a labels() lookup costs more than the observation);
        # the plausible range is checked inline, _plausible counts and logs what falls outside it
        max_s = self.config.latency_max_s
        retrieval_s = lt.retrieval_latency_s
        if retrieval_s is not None:
            if 0.0 <= retrieval_s <= max_s or self._plausible(retrieval_s):
                tally.observe(series.get("retrieval", m.retrieval_latency), retrieval_s)
                series.window("retrieval").observe(retrieval_s)
            tally.observe(series.get("documents", m.retrieved_documents), lt.document_count)
        generation_s = lt.generation_latency_s
        if generation_s is not None and (0.0 <= generation_s <= max_s or self._plausible(generation_s)):
            tally.observe(series.get("generation", m.generation_latency), generation_s)
        pipeline_s = lt.pipeline_latency_s
        if pipeline_s is not None and (0.0 <= pipeline_s <= max_s or self._plausible(pipeline_s)):
            tally.observe(series.get("pipeline", m.pipeline_latency), pipeline_s)
            series.window("pipeline").observe(pipeline_s)
        source = lt.contexts_source
        if source in sc.CONTEXTS_SOURCES:
            tally.inc(series.get("contexts:" + source, m.contexts_source, source))
        self._power.observe_traffic(key)
        self._releases.observe(key[0], lt.service, key[1], _release_attributes(lt))
        rate = self._power.rate_for(key) if self._power.adaptive else None
        if self._may_be_judged(lt, rate):
            return closed.trace, rate  # the full extraction, and the full path's own decision
        tally.inc(series.get("not_sampled", m.traces_skipped, sc.SKIP_NOT_SAMPLED))
        self._account(closed)
        return None

    def _may_be_judged(self, lt: LatencyTrace, rate: float | None) -> bool:
        """Whether ``SamplingPolicy.decide`` could pick this trace; False only when it surely won't."""
        policy = self._policy
        if in_sample(lt.trace_id, policy.rate_for(lt.pipeline) if rate is None else rate):
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
    """The metric children of one (service, pipeline) pair, each made when first used — as
    ``labels()`` in ``_process_one`` would, so the exposition is the same."""

    __slots__ = ("_agent", "_children", "_pipeline", "_service")

    def __init__(self, agent: LatencyOnlyMixin, service: str, pipeline: str) -> None:
        self._agent = agent
        self._service = service
        self._pipeline = pipeline
        self._children: dict[str, Any] = {}

    def get(self, name: str, family: Any, *more: str) -> Any:
        child = self._children.get(name)
        if child is None:
            child = self._children[name] = family.labels(self._service, self._pipeline, *more)
        return child

    def window(self, stage: str) -> SlidingQuantile:
        name = "window:" + stage
        window = self._children.get(name)
        if window is None:
            window = self._children[name] = self._agent._window(stage, self._service, self._pipeline)
        return window


def _release_attributes(lt: LatencyTrace) -> dict[str, Any]:
    if lt.model is None and lt.prompt_version is None:
        return _NO_ATTRIBUTES
    key = (lt.model, lt.prompt_version)
    out = _RELEASE_ATTRIBUTES.get(key)
    if out is None:  # the same few models and prompt versions come in every trace: made once, read-only
        out = {}
        if lt.model is not None:
            out[sc.LLM_MODEL_NAME] = lt.model
        if lt.prompt_version is not None:
            out[sc.LLM_PROMPT_TEMPLATE_VERSION] = lt.prompt_version
        if len(lt.model or "") + len(lt.prompt_version or "") <= 256:  # values are the sender's: bounded
            if len(_RELEASE_ATTRIBUTES) >= 1024:
                _RELEASE_ATTRIBUTES.clear()
            _RELEASE_ATTRIBUTES[key] = out
    return out


_RELEASE_ATTRIBUTES: dict[tuple[str | None, str | None], dict[str, Any]] = {}
