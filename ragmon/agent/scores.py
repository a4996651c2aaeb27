"""The score recorder: what a judged trace leaves behind.

The judge's scores and the declared evaluators' are merged in one place (``EvaluatorSet.merge``,
shared with ``ragmon eval``'s row scoring), then exported: score histograms, sums of squares and
failing shares per (service, pipeline, judge, metric, sample stream), the share of answers that
contradict their sources, the diagnosis verdict, the worst traces (``/worst``), the trace inspector
(``/traces/{id}``) and the score listeners. Rate-stream failing shares also go to the power sampler
(``observe_shares``), in the unit the alerts test (``error_rates``: the judge's Youden J per metric).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping

from .. import semconv as sc
from .._log import LogOnce
from ..evaluators import EvaluatorSet
from ..export.inspector import RecentTraces
from ..export.metrics import AgentMetrics
from ..export.worst import WorstTraces
from ..quality import is_failing
from ..scoring import claim_verdicts
from ..scoring.metrics.diagnosis import diagnose
from ..types import RagTrace, Scores

__all__ = ["ScoreListener", "ScoreRecorder"]

ScoreListener = Callable[[RagTrace, Scores, str], None]
SharesObserver = Callable[[Hashable, Mapping[str, bool], Mapping[str, float]], None]


class ScoreRecorder:
    """Records judged traces (``record``) and those retrieval left without context (``no_context``)."""

    def __init__(self, metrics: AgentMetrics, *, thresholds: Mapping[str, float], evaluators: EvaluatorSet,
                 worst: WorstTraces, inspector: RecentTraces | None, observe_shares: SharesObserver,
                 log_once: LogOnce) -> None:
        self._m = metrics
        self._thresholds = dict(thresholds)
        self._evaluators = evaluators
        self._roles = evaluators.roles
        self.worst = worst
        self.inspector = inspector
        self._observe_shares = observe_shares
        self._log_once = log_once
        self._youden: dict[str, float] = {}  # metric -> the judge's J (scoring/error_rates.py), set at start
        self.listeners: list[ScoreListener] = []

    def use_youden(self, youden: Mapping[str, float]) -> None:
        """The judge's Youden J per metric: failing shares are handed to the sampler divided by it."""
        self._youden = dict(youden)

    def record(self, trace: RagTrace, scores: Scores, judge_name: str, stream: str) -> None:
        """A judged trace's scores, of the sample ``stream`` (rate | priority)."""
        m = self._m
        service, pipeline = m.labels_sp(trace.service, trace.pipeline)
        m.traces_scored.labels(service, pipeline, judge_name).inc()
        exemplar = {"trace_id": trace.trace_id}
        values = scores.as_dict()
        failing_flags: dict[str, bool] = {}
        for metric, value in values.items():
            clamped = min(1.0, max(0.0, float(value)))
            m.score.labels(service, pipeline, judge_name, metric, stream).observe(clamped, exemplar=exemplar)
            m.score_squares.labels(service, pipeline, judge_name, metric, stream).inc(clamped * clamped)
            # the child exists from the first score (at 0), so the failing share is 0, not absent, and
            # increase() sees the first failure
            failures = m.score_failures.labels(service, pipeline, judge_name, metric, stream)
            failing = failing_flags[metric] = is_failing(clamped, self._thresholds.get(metric))
            if failing:
                failures.inc()
        if stream == sc.SAMPLE_STREAM_RATE:
            # rate-stream scores are the unbiased sample means alerts read; priority ones only explain.
            # The sampler sizes the sample for the alerts' test: failing shares, in the corrected unit
            self._observe_shares((service, pipeline), failing_flags, self._youden)
        labels = (service, pipeline, judge_name, stream)
        if self._evaluators:
            scores = self._record_evaluators(trace, scores, labels)
        self._count_contradictions(scores, labels)
        verdict, reason = diagnose(scores, self._thresholds, self._roles)
        m.diagnosis.labels(service, pipeline, verdict).inc()
        shown = {**values, **{k: v for k, v in scores.custom.items() if v is not None}}
        self.worst.offer(
            trace_id=trace.trace_id, service=trace.service, pipeline=trace.pipeline, scores=shown,
            verdict=verdict, reason=reason, question=trace.question, answer=trace.answer,
            detail=scores.details.get("reason"),
            contradicted=claim_verdicts.contradicted(scores.details),
        )
        if self.inspector is not None:
            self.inspector.record(trace, scores=shown, verdict=verdict, reason=reason, judge=judge_name,
                                  details=scores.details)
        for listener in self.listeners:
            try:
                listener(trace, scores, verdict)
            except Exception:  # noqa: BLE001  # a user's listener must not break scoring
                self._log_once.warning("listener", "score listener raised", exc_info=True)

    def no_context(self, trace: RagTrace) -> None:
        """Retrieval ran and returned nothing: its own verdict, counted and shown, not judged."""
        service, pipeline = self._m.labels_sp(trace.service, trace.pipeline)
        self._m.diagnosis.labels(service, pipeline, sc.VERDICT_NO_CONTEXT).inc()
        if self.inspector is not None:
            self.inspector.record(trace, scores={}, verdict=sc.VERDICT_NO_CONTEXT,
                                  reason="the retrieval returned no documents", judge="none")

    def _record_evaluators(self, trace: RagTrace, scores: Scores, labels: tuple[str, str, str, str]) -> Scores:
        """Run the declared evaluators (the LLM judge's criteria verdicts are in ``scores.custom``);
        export each as ragmon_score_ratio{metric=<name>}; return the scores with theirs added."""
        merged, results = self._evaluators.merge(trace, scores)
        service, pipeline, judge_name, stream = labels
        m = self._m
        for name, value in results.scores.items():
            if value is None:
                continue
            if self._evaluators.by_name[name].buckets:
                m.score.labels(service, pipeline, judge_name, name, stream).observe(value)
            elif stream == sc.SAMPLE_STREAM_RATE:
                # compact: the unbiased stream only (3 series per evaluator and pair); priority-stream
                # verdicts are shown in /worst and /traces/{id}, not exported
                m.score_family.observe_compact((service, pipeline, judge_name, name, stream), value)
        for name, reason in results.errors:
            m.evaluator_errors.labels(name, reason).inc()
            self._log_once.warning(f"evaluator:{name}:{reason}", "evaluator %s could not judge a trace (%s); "
                                   "counted in ragmon_evaluator_errors_total, logged once", name, reason)
        return merged

    def _count_contradictions(self, scores: Scores, labels: tuple[str, str, str, str]) -> None:
        """The share of answers that contradict their sources: checked answers, and those with a
        contradicted claim (both children exist from the first check, so the share is 0, not absent)."""
        contradicts = claim_verdicts.contradicts(scores.details)
        if contradicts is None:
            return
        self._m.answers_checked.labels(*labels).inc()
        counter = self._m.answers_contradicting.labels(*labels)
        if contradicts:
            counter.inc()
