"""The three online metrics from an ``Analysis``: faithfulness, answer relevancy and context
precision through the fitted coefficients of ``model``, with the details and the one-line
reason that error analysis (/worst) shows."""

from __future__ import annotations

import numpy as np

from ... import semconv as sc
from ...types import ScoreDetails
from .. import claim_verdicts
from ..metrics import abstention, formulas
from ..metrics.formulas import context_precision as rank_weighted_precision
from ..reader import verdicts as reader_verdicts
from ..text import content_tokens
from . import coefficients as coef
from . import model as local_model
from ._analysis import Analysis
from ._profile import DEFAULT_PROFILE, JudgeProfile
from .evidence import ClaimEvidence

_REASON_CHARS = 160


def short(text: str, limit: int = _REASON_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def online_values(
    analysis: Analysis, details: ScoreDetails, profile: JudgeProfile = DEFAULT_PROFILE
) -> dict[str, float | None]:
    """The three metrics of ``analysis``; their explanations go into ``details``."""
    faithfulness = _faithfulness(analysis, details, profile)
    relevancy = _answer_relevancy(analysis, details, profile)
    precision = _context_precision(analysis.context_features, details, profile)
    if analysis.contexts_ignored:
        details["contexts_ignored"] = analysis.contexts_ignored
    details["reason"] = _reason(faithfulness, relevancy, precision, details)
    return {
        sc.METRIC_FAITHFULNESS: faithfulness,
        sc.METRIC_ANSWER_RELEVANCY: relevancy,
        sc.METRIC_CONTEXT_PRECISION: precision,
    }


def _reason(
    faithfulness: float | None, relevancy: float | None, precision: float | None, details: ScoreDetails
) -> str:
    """One short line for error analysis (/worst): the weakest metric and why."""
    candidates = []
    if faithfulness is not None:
        claim = details.get("least_supported_claim", "")
        why = details.get("faithfulness_reason", "")
        candidates.append((faithfulness, f"unsupported claim {claim!r}: {why}" if claim else str(why)))
    if relevancy is not None:
        candidates.append((relevancy, details.get("answer_relevancy_reason", "answer relevancy")))
    if precision is not None:
        bad = details.get("irrelevant_contexts", [])
        candidates.append((precision, f"contexts {bad} look irrelevant to the question" if bad else
                           "context precision"))
    if not candidates:
        return "nothing to score"
    score, text = min(candidates, key=lambda c: c[0])
    if score >= 0.5:
        return "no metric below 0.5"
    return short(str(text), 2 * _REASON_CHARS)


def _faithfulness(analysis: Analysis, details: ScoreDetails, profile: JudgeProfile) -> float | None:
    evidence: list[ClaimEvidence] = analysis.evidence
    if not evidence:
        return None  # no answer (or nothing checkable in it)
    if analysis.n_contexts == 0:
        details["faithfulness_reason"] = "no contexts to support the answer"
        return 0.0
    supports = [local_model.claim_support(e) for e in evidence]
    weights = dict(profile.faithfulness_weights) if profile.faithfulness_weights is not None else None
    threshold = profile.faithfulness_threshold if weights is not None else None
    score = local_model.faithfulness(evidence, supports, analysis.shape, weights, threshold,
                                     cap=not analysis.readings)
    if analysis.readings:
        # a claim the reader did not read (a statement about the passages, a changed fact the lexical
        # checks name, a filler its window does not restate) keeps the judge's own verdict
        verdicts = [_verdict(e, s) if r is None else reader_verdicts.verdict(e.claim, r, e.contradiction(), e.evidence)
                    for e, s, r in zip(evidence, supports, analysis.readings, strict=True)]
        score = _with_reader(score, analysis.readings, verdicts, evidence, details)
    else:
        verdicts = [_verdict(e, s) for e, s in zip(evidence, supports, strict=True)]
    contradicted = [i for i, v in enumerate(verdicts) if v.verdict == claim_verdicts.CONTRADICTED]
    weakest = contradicted[0] if contradicted else int(np.argmin(supports))
    if contradicted:
        details["contradicted_claims"] = len(contradicted)
    details["claims"] = len(evidence)
    details["unsupported_claims"] = sum(s < 0.5 for s in supports)
    details["least_supported_claim"] = short(evidence[weakest].claim)
    details["least_supported_support"] = round(float(supports[weakest]), 3)
    details["least_supported_evidence"] = short(evidence[weakest].evidence)
    details["faithfulness_reason"] = verdicts[weakest].reason or evidence[weakest].reason()
    details[claim_verdicts.DETAIL_KEY] = claim_verdicts.as_details(verdicts)
    return score


def _with_reader(score: float, readings: tuple[reader_verdicts.ClaimReading | None, ...],
                 verdicts: list[claim_verdicts.ClaimVerdict], evidence: list[ClaimEvidence],
                 details: ScoreDetails) -> float:
    """Faithfulness (``score``: the base model's, before any contradiction cap) with the reader's
    answer-level features stacked on it (``coef.READER_WEIGHTS``, fitted on the reader's held-out fold),
    then capped by the lexical contradictions (and, with ``CAP_READER_CONTRADICTIONS``, the reader's)."""
    features = reader_verdicts.answer_features(readings)
    details["reader"] = {k: round(v, 4) for k, v in features.items()}
    weights = coef.READER_WEIGHTS
    if weights:
        z = weights.get("bias", 0.0) + weights.get("base", 1.0) * local_model.logit(score)
        z += sum(weights.get(k, 0.0) * v for k, v in features.items())
        score = local_model.sigmoid(z)
    lexical = sum(e.contradiction() is not None for e in evidence)
    reader_only = sum(v.verdict == claim_verdicts.CONTRADICTED and e.contradiction() is None
                      for v, e in zip(verdicts, evidence, strict=True))
    capped = (lexical if coef.CAP_CONTRADICTIONS else 0) + (reader_only if coef.CAP_READER_CONTRADICTIONS else 0)
    return formulas.with_contradictions(score, capped, len(verdicts)) if capped else score


def _verdict(e: ClaimEvidence, support: float) -> claim_verdicts.ClaimVerdict:
    """supported / contradicted / unsupported, with the deciding context sentence and why."""
    hard = e.contradiction()
    if hard is not None:
        return claim_verdicts.ClaimVerdict(e.claim, claim_verdicts.CONTRADICTED, e.evidence, hard)
    if support >= 0.5:
        return claim_verdicts.ClaimVerdict(e.claim, claim_verdicts.SUPPORTED, e.evidence, None)
    return claim_verdicts.ClaimVerdict(e.claim, claim_verdicts.UNSUPPORTED, e.evidence or None, e.reason())


def _informative_claims(question: str, claims: list[str]) -> list[int]:
    """Indexes of the claims that contain a content word the question does not."""
    asked = set(content_tokens(question))
    return [i for i, claim in enumerate(claims) if set(content_tokens(claim)) - asked]


def _answer_relevancy(analysis: Analysis, details: ScoreDetails, profile: JudgeProfile) -> float | None:
    question_vec, answer_vec, claim_vecs = analysis.question_vec, analysis.answer_vec, analysis.claim_vecs
    if question_vec is None or answer_vec is None or not analysis.question or not analysis.answer:
        return None
    whole = float(answer_vec @ question_vec)
    best_claim = float((claim_vecs @ question_vec).max()) if len(claim_vecs) else whole
    informative = _informative_claims(analysis.question, analysis.claims)
    if len(claim_vecs) == len(analysis.claims) and informative and len(informative) < len(analysis.claims):
        # the answer repeats (part of) the question and says something else: judge what it adds,
        # so an echo cannot lend its closeness to the question to off-topic text
        best_claim = float((claim_vecs[informative] @ question_vec).max())
        whole = best_claim
    features = local_model.relevancy_features(analysis.question, analysis.answer, whole, best_claim,
                                              claims=len(analysis.claims))
    refusal = abstention.check(analysis.answer)
    weights = dict(profile.relevancy_weights) if profile.relevancy_weights is not None else None
    score = local_model.answer_relevancy(features, refusal.abstained, weights, profile.relevancy_threshold)
    details["answer_question_cosine"] = round(features["cos"], 3)
    details["answer_relevancy_features"] = {k: round(v, 4) for k, v in features.items()}
    if refusal.abstained:
        details["abstained"] = True
        details["answer_relevancy_reason"] = f"the answer declines to answer ({refusal.phrase})"
    elif score < 0.5:
        details["answer_relevancy_reason"] = (
            "the answer adds nothing beyond the question's own words" if features["new_share"] < 0.2
            else "the answer is semantically far from the question"
        )
    return score


def _context_precision(
    features: list[local_model.ContextFeatures], details: ScoreDetails, profile: JudgeProfile
) -> float | None:
    if not features:
        return None
    threshold = profile.context_threshold
    if threshold is None and len(features) == 1:
        threshold = coef.CONTEXT_THRESHOLD_SINGLE  # nothing to compare with: the absolute scale
    weights = dict(profile.context_weights) if profile.context_weights is not None else None
    relevance = [local_model.context_relevance(f, threshold, weights) for f in features]
    verdicts = [r >= local_model.CONTEXT_RELEVANT_THRESHOLD for r in relevance]
    details["context_relevance"] = [round(r, 3) for r in relevance]
    irrelevant = [i for i, v in enumerate(verdicts) if not v]
    if irrelevant:
        details["irrelevant_contexts"] = irrelevant[:20]
    if not any(verdicts):
        details["context_precision_reason"] = "no retrieved context looks relevant to the question"
    return rank_weighted_precision(verdicts)
