"""Joins what the demo injected (by trace id) with what the agent concluded (pure, thread-safe).

The runner calls ``record_request`` for every request the app served and registers
``on_scores`` as the agent's score listener; either may come first for a trace.
``snapshot`` returns per-kind statistics for the summary.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from .. import semconv as sc
from ..scoring.metrics.diagnosis import DiagnosisThresholds
from ..scoring.metrics.diagnosis import thresholds as diagnosis_thresholds
from ..types import RagTrace, Scores
from .app import DemoAnswer
from .failures import FailureKind

# The verdicts that count as "caught" for each injected kind, and the score that should drop.
EXPECTED_VERDICTS: Mapping[FailureKind, frozenset[str]] = {
    FailureKind.RETRIEVAL_MISS: frozenset({sc.VERDICT_RETRIEVAL, sc.VERDICT_BOTH}),
    FailureKind.CONTRADICTION: frozenset({sc.VERDICT_GENERATION, sc.VERDICT_BOTH}),
    FailureKind.OFF_TOPIC: frozenset({sc.VERDICT_GENERATION, sc.VERDICT_BOTH}),
}
SIGNAL_METRIC: Mapping[FailureKind, str] = {
    FailureKind.RETRIEVAL_MISS: sc.METRIC_CONTEXT_PRECISION,
    FailureKind.CONTRADICTION: sc.METRIC_FAITHFULNESS,
    FailureKind.OFF_TOPIC: sc.METRIC_ANSWER_RELEVANCY,
}
DEFAULT_SLOW_THRESHOLD_S = 0.5


@dataclass(frozen=True, slots=True)
class _Scored:
    scores: Mapping[str, float]
    verdict: str
    retrieval_s: float | None


@dataclass(slots=True)
class KindStats:
    """What happened to the requests of one injected kind."""

    kind: FailureKind
    sent: int = 0
    scored: int = 0
    means: dict[str, float] = field(default_factory=dict)  # metric -> mean over scored traces
    verdicts: dict[str, int] = field(default_factory=dict)
    caught: int = 0  # scored traces whose verdict matched the kind (slow: latency over threshold)
    signal_below: int = 0  # scored traces whose signal metric fell below its threshold
    retrieval_p95_s: float | None = None  # as the app measured it, over every request of this kind

    @property
    def flagged(self) -> int:
        """Scored traces with any verdict other than ok."""
        return self.scored - self.verdicts.get(sc.VERDICT_OK, 0)

    def as_dict(self) -> dict[str, object]:
        return {
            "sent": self.sent, "scored": self.scored, "means": dict(self.means),
            "verdicts": dict(self.verdicts), "caught": self.caught, "flagged": self.flagged,
            "signal_below_threshold": self.signal_below, "retrieval_p95_s": self.retrieval_p95_s,
        }


@dataclass(frozen=True, slots=True)
class TrackerSnapshot:
    kinds: Mapping[FailureKind, KindStats]
    unmatched_scored: int  # scored traces the demo did not send (another app on the same agent)
    contradiction_changes: Mapping[str, int]  # number/name/negation -> count sent
    # number/name/negation -> (caught, scored): which kinds of changed fact the judge notices
    contradiction_caught: Mapping[str, tuple[int, int]] = field(default_factory=dict)


def _p95(values: list[float]) -> float | None:
    return float(np.quantile(np.asarray(values), 0.95)) if values else None


class DemoTracker:
    def __init__(
        self, thresholds: DiagnosisThresholds | None = None, slow_threshold_s: float = DEFAULT_SLOW_THRESHOLD_S
    ) -> None:
        self.thresholds = diagnosis_thresholds(thresholds)
        self.slow_threshold_s = slow_threshold_s
        self._lock = threading.Lock()
        self._kind_by_trace: dict[str, FailureKind] = {}
        self._sent: Counter[FailureKind] = Counter()
        self._retrieval_s: dict[FailureKind, list[float]] = {k: [] for k in FailureKind}
        self._scored: dict[str, _Scored] = {}
        self._changes: Counter[str] = Counter()
        self._change_by_trace: dict[str, str] = {}

    def threshold(self, metric: str) -> float:
        return float(self.thresholds[metric])

    def record_request(self, answer: DemoAnswer) -> None:
        with self._lock:
            self._sent[answer.failure] += 1
            self._retrieval_s[answer.failure].append(answer.retrieval_s)
            if answer.trace_id:
                self._kind_by_trace[answer.trace_id] = answer.failure
            if answer.contradiction is not None:
                self._changes[answer.contradiction.change] += 1
                if answer.trace_id:
                    self._change_by_trace[answer.trace_id] = answer.contradiction.change

    def on_scores(self, trace: RagTrace, scores: Scores, verdict: str) -> None:
        """The agent's score listener (called on the agent's loop after each scored trace)."""
        with self._lock:
            self._scored[trace.trace_id] = _Scored(scores.as_dict(), verdict, trace.retrieval_latency_s)

    @property
    def sent_total(self) -> int:
        with self._lock:
            return sum(self._sent.values())

    def snapshot(self) -> TrackerSnapshot:
        with self._lock:
            kinds = {k: KindStats(k, sent=self._sent[k]) for k in FailureKind}
            sums: dict[FailureKind, dict[str, list[float]]] = {k: {} for k in FailureKind}
            unmatched = 0
            by_change: dict[str, list[int]] = {}
            for trace_id, result in self._scored.items():
                kind = self._kind_by_trace.get(trace_id)
                if kind is None:
                    unmatched += 1
                    continue
                stats = kinds[kind]
                stats.scored += 1
                stats.verdicts[result.verdict] = stats.verdicts.get(result.verdict, 0) + 1
                for metric, value in result.scores.items():
                    sums[kind].setdefault(metric, []).append(value)
                signal = SIGNAL_METRIC.get(kind)
                if signal is not None:
                    signal_value = result.scores.get(signal)
                    if signal_value is not None and signal_value < self.threshold(signal):
                        stats.signal_below += 1
                    caught = result.verdict in EXPECTED_VERDICTS[kind]
                    stats.caught += caught
                    change = self._change_by_trace.get(trace_id)
                    if change is not None:
                        tally = by_change.setdefault(change, [0, 0])
                        tally[0] += caught
                        tally[1] += 1
                elif (kind is FailureKind.SLOW_RETRIEVAL and result.retrieval_s is not None
                      and result.retrieval_s >= self.slow_threshold_s):
                    stats.caught += 1
            for kind, stats in kinds.items():
                stats.means = {m: float(np.mean(v)) for m, v in sums[kind].items() if v}
                stats.retrieval_p95_s = _p95(self._retrieval_s[kind])
            return TrackerSnapshot(
                kinds, unmatched, dict(self._changes), {c: (t[0], t[1]) for c, t in by_change.items()}
            )


def fmt_ratio(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f}%)" if whole else "–"


def is_nan(value: float | None) -> bool:
    return value is None or math.isnan(value)
