"""Retrieval-vs-generation diagnosis of one scored trace (pure).

The diagnosis table:

=====================  ==============  ==================  ===================
context precision      faithfulness    answer relevancy    verdict
=====================  ==============  ==================  ===================
high                   high            high                ok
low                    high            any                 retrieval_failure
low                    low             any                 both (bad contexts, and claims beyond them)
high                   low             any                 generation_failure (hallucination)
high                   high            low                 generation_failure (attended to the wrong part / off-topic)
=====================  ==============  ==================  ===================

With low context precision a low answer relevancy is not blamed on generation: an answer built
from the wrong documents is off-topic *because* retrieval failed, and retrieval is what to fix.
Only unfaithfulness (claims the bad contexts do not support either) adds generation: ``both``.

A metric the judge could not compute (None) never triggers a failure on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import semconv as sc
from ..types import Scores


@dataclass(frozen=True, slots=True)
class DiagnosisThresholds:
    faithfulness: float = 0.5
    answer_relevancy: float = 0.5
    context_precision: float = 0.5


def _below(value: float | None, threshold: float) -> bool:
    return value is not None and value < threshold


def diagnose(scores: Scores, thresholds: DiagnosisThresholds) -> tuple[str, str]:
    """Return (verdict, short reason) with verdict in ``semconv.VERDICTS``."""
    retrieval_bad = _below(scores.context_precision, thresholds.context_precision)
    hallucination = _below(scores.faithfulness, thresholds.faithfulness)
    off_topic = _below(scores.answer_relevancy, thresholds.answer_relevancy)
    # off-topic contexts explain an off-topic answer; only a hallucination is generation's own fault
    generation_bad = hallucination or (off_topic and not retrieval_bad)
    reasons = []
    if retrieval_bad:
        reasons.append(f"context_precision {scores.context_precision:.2f} < {thresholds.context_precision}")
    if hallucination:
        reasons.append(f"faithfulness {scores.faithfulness:.2f} < {thresholds.faithfulness}")
    if off_topic:
        reasons.append(f"answer_relevancy {scores.answer_relevancy:.2f} < {thresholds.answer_relevancy}")
    reason = "; ".join(reasons) or "all scores at or above thresholds"
    if retrieval_bad and generation_bad:
        return sc.VERDICT_BOTH, reason
    if retrieval_bad:
        return sc.VERDICT_RETRIEVAL, reason
    if generation_bad:
        return sc.VERDICT_GENERATION, reason
    return sc.VERDICT_OK, reason
