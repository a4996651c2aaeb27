"""Retrieval-vs-generation diagnosis of one scored trace (pure).

Each quality metric has a diagnosis role in the metric table (``ragmon.quality``):

=====================  ==============================================================
role                   a value below its threshold means
=====================  ==============================================================
retrieval              retrieval failed (context precision, context recall)
grounding              generation invented claims (faithfulness), whatever retrieval did
answer                 generation answered badly (answer relevancy, answer correctness,
                       abstention) — blamed on generation only when retrieval looks fine
=====================  ==============================================================

which gives the diagnosis table:

=================  ==============  ==================  ==========================================
retrieval metrics  grounding       answer metrics      verdict
=================  ==============  ==================  ==========================================
high               high            high                ok
low                high            any                 retrieval_failure
low                low             any                 both (bad contexts, and claims beyond them)
high               low             any                 generation_failure (hallucination)
high               high            low                 generation_failure (wrong part / off-topic)
=================  ==============  ==================  ==========================================

With low retrieval metrics a low answer metric is not blamed on generation: an answer built
from the wrong documents is off-topic *because* retrieval failed, and retrieval is what to fix.
Only unfaithfulness (claims the bad contexts do not support either) adds generation: ``both``.

A metric the judge could not compute (None) never triggers a failure on its own.
"""

from __future__ import annotations

from collections.abc import Mapping

from ... import quality
from ... import semconv as sc
from ...quality import ROLE_ANSWER, ROLE_GROUNDING, ROLE_RETRIEVAL
from ...types import Scores

# metric name -> threshold; metrics left out use the table's default
DiagnosisThresholds = Mapping[str, float]


def thresholds(overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """The table's default thresholds with ``overrides`` applied (unknown names rejected)."""
    out = quality.default_thresholds()
    for name, value in (overrides or {}).items():
        if not quality.known(name):
            raise ValueError(f"diagnosis threshold for unknown metric {name!r}")
        out[name] = float(value)
    return out


def diagnose(scores: Scores, limits: DiagnosisThresholds | None = None,
             evaluator_roles: Mapping[str, str] | None = None) -> tuple[str, str]:
    """Return (verdict, short reason) with verdict in ``semconv.VERDICTS``.

    ``evaluator_roles``: the user-declared evaluators that take part (name -> role); one fails a
    trace when it scored 0 (fail)."""
    limits = limits or {}
    failed: dict[str, list[str]] = {ROLE_RETRIEVAL: [], ROLE_GROUNDING: [], ROLE_ANSWER: []}
    reasons = []
    for name, value in scores.values.items():
        spec = quality.metric(name)
        limit = limits.get(name, spec.threshold)
        if value is None or spec.role not in failed or value >= limit:
            continue
        failed[spec.role].append(name)
        reasons.append(f"{name} {value:.2f} < {limit:g}")
    for name, role in (evaluator_roles or {}).items():
        value = scores.custom.get(name)
        if value is None or role not in failed or value >= 0.5:
            continue
        failed[role].append(name)
        reasons.append(f"{name} failed")
    retrieval_bad = bool(failed[ROLE_RETRIEVAL])
    # off-topic contexts explain an off-topic answer; only a hallucination is generation's own fault
    generation_bad = bool(failed[ROLE_GROUNDING]) or (bool(failed[ROLE_ANSWER]) and not retrieval_bad)
    reason = "; ".join(reasons) or "all scores at or above thresholds"
    if retrieval_bad and generation_bad:
        return sc.VERDICT_BOTH, reason
    if retrieval_bad:
        return sc.VERDICT_RETRIEVAL, reason
    if generation_bad:
        return sc.VERDICT_GENERATION, reason
    return sc.VERDICT_OK, reason
