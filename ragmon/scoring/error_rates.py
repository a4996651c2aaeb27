"""A judge's measured error rates per metric: how often it flags a failing answer (sensitivity)
and passes a good one (specificity), at the metric's threshold.

The drop alerts test the share of answers the judge flags (score below the threshold). That
share is not the share of answers that really fail: a judge misses some failures and flags some
good answers. With sensitivity ``se`` and specificity ``sp``, a true failing share ``pi`` shows up
as ``pi * se + (1 - pi) * (1 - sp)``; the rules invert this (Rogan-Gladen) to show the estimated
true share, and power-based sampling sizes samples in that unit. The agent exports the rates as
``ragmon_judge_sensitivity_ratio`` / ``ragmon_judge_specificity_ratio``.

Where the rates come from: a judge profile fitted on the user's labels (``ragmon calibrate --fit``,
cross-validated, in the profile's ``meta.error_rates``), else the defaults below, measured on
human-labelled data the judge was not fitted to. A judge with neither (the LLM judge without a
profile) exports none and the alerts stay in the flagged share, uncorrected.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .. import semconv as sc

CONTRADICTIONS = "contradictions"  # the contradiction verdict's key (ragmon_answers_contradicting_total)


@dataclass(frozen=True, slots=True)
class ErrorRates:
    sensitivity: float  # P(score < threshold | humans say it fails)
    specificity: float  # P(score >= threshold | humans say it passes)
    source: str
    score_gap: float | None = None  # E[score | passes] - E[score | fails]: a mean drop in failing-share points

    @property
    def youden(self) -> float:
        """J = sensitivity + specificity - 1: how much of a true change the flagged share shows."""
        return self.sensitivity + self.specificity - 1.0


# The local judge at threshold 0.5, shipped coefficients: the mean over the three RAGTruth dev
# halves of the bench data (bench/data/README.md; QA 0.770 / 0.742, summaries 0.730 / 0.575,
# data-to-text 0.670 / 0.793; `ragmon calibrate` on each file). Re-measure when the judge changes (docs/alerts.md).
# The score gap (passing answers' mean score minus failing ones'): QA 0.359, summaries 0.163, data-to-text
# 0.219 (`ragmon calibrate --bootstrap 0` on each file, 2026-12-05: its `score_gap`).
LOCAL_DEFAULTS: Mapping[str, ErrorRates] = {
    sc.METRIC_FAITHFULNESS: ErrorRates(0.723, 0.703, "RAGTruth dev halves (qa, summary, data2txt), mean", 0.247),
    # The contradiction verdict (an answer with at least one contradicted claim: the lexical checks and
    # the trained reader) against RAGTruth's "conflict" spans, on the rows the reader never trained on
    # (bench/fit_reader_stack.py, the shipped reader ed635d12 on an AVX2-only AMD EPYC, 2026-12-06: QA
    # 0.278 / 0.692, summaries 0.414 / 0.550, data-to-text 0.400 / 0.655; the reader before it, 6eabc334:
    # 0.278 / 0.720, 0.414 / 0.562, 0.379 / 0.727, J 0.03). Youden's J is ~0 (-0.004): the check reads
    # one-edit contradictions (negations, numbers) but does not separate RAGTruth's conflicts from faithful
    # answers, so the rules leave the share uncorrected (J < 0.1).
    CONTRADICTIONS: ErrorRates(0.364, 0.632, "RAGTruth dev halves, reader's held-out fold, mean"),
}


def from_profile_meta(meta: Mapping[str, Any]) -> dict[str, ErrorRates]:
    """``meta.error_rates`` of a fitted profile: {metric: {"sensitivity": x, "specificity": y}}."""
    out: dict[str, ErrorRates] = {}
    raw = meta.get("error_rates")
    if not isinstance(raw, Mapping):
        return out
    for metric, value in raw.items():
        if not isinstance(value, Mapping):
            continue
        se, sp, gap = value.get("sensitivity"), value.get("specificity"), value.get("score_gap")
        if isinstance(se, int | float) and isinstance(sp, int | float) and 0 <= se <= 1 and 0 <= sp <= 1:
            # a gap outside (0, 1] says the scores do not separate the labels: no mean correction then
            score_gap = float(gap) if isinstance(gap, int | float) and 0 < gap <= 1 else None
            out[str(metric)] = ErrorRates(float(se), float(sp), "fitted profile", score_gap)
    return out


@runtime_checkable
class DeclaresErrorRates(Protocol):
    """A judge with measured error rates per metric (the local judge: its profile's or the defaults)."""

    @property
    def error_rates(self) -> Mapping[str, ErrorRates]: ...


def error_rates_of(judge: object) -> dict[str, ErrorRates]:
    """The error rates a judge declares (``DeclaresErrorRates``), per metric; {} if none."""
    if not isinstance(judge, DeclaresErrorRates):
        return {}
    return {str(k): v for k, v in judge.error_rates.items() if isinstance(v, ErrorRates)}
