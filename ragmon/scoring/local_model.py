"""How the local judge turns evidence features into scores.

Faithfulness and context relevance are logistic models over a handful of interpretable
features; their coefficients live in ``local_coefficients.py`` (plain numbers, refitted by
``bench/fit_local_judge.py`` and reported on held-out data in docs/judges.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from . import local_coefficients as coef
from .claims import TextFacts
from .evidence import ClaimEvidence

CONTEXT_RELEVANT_THRESHOLD = coef.CONTEXT_THRESHOLD


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def _clip01(x: float) -> float:
    return 0.0 if x < 0.0 else 1.0 if x > 1.0 else x


def _linear(weights: dict[str, float], features: dict[str, float]) -> float:
    return weights.get("bias", 0.0) + sum(w * features[name] for name, w in weights.items() if name != "bias")


# --- faithfulness ---------------------------------------------------------------------------
def claim_features(e: ClaimEvidence) -> dict[str, float]:
    """Interpretable per-claim features (all roughly in [0, 1])."""
    return {
        "max_cos": e.max_cos,
        "coverage": e.coverage,
        "local_coverage": e.local_coverage,
        "bigram_coverage": e.bigram_coverage,
        "missing_number": 1.0 if e.missing_numbers else 0.0,
        "local_missing_number": 1.0 if e.local_missing_numbers else 0.0,
        "missing_entity": 1.0 if e.missing_entities else 0.0,
        "negation_mismatch": 1.0 if e.negation_mismatch else 0.0,
        "short_claim": 1.0 if e.n_tokens <= 3 else 0.0,
    }


def claim_support(e: ClaimEvidence) -> float:
    """Probability-like support of one claim by the contexts."""
    return _sigmoid(_linear(coef.CLAIM_WEIGHTS, claim_features(e)))


def answer_features(evidence: Sequence[ClaimEvidence], supports: Sequence[float]) -> dict[str, float]:
    """Answer-level aggregates of the per-claim evidence (input of the faithfulness model)."""
    n = len(evidence)
    feats = [claim_features(e) for e in evidence]
    return {
        "min_support": min(supports),
        "mean_support": sum(supports) / n,
        "min_cos": min(f["max_cos"] for f in feats),
        "mean_cos": sum(f["max_cos"] for f in feats) / n,
        "min_coverage": min(f["coverage"] for f in feats),
        "mean_coverage": sum(f["coverage"] for f in feats) / n,
        "min_bigram": min(f["bigram_coverage"] for f in feats),
        "mean_bigram": sum(f["bigram_coverage"] for f in feats) / n,
        "any_missing_number": max(f["missing_number"] for f in feats),
        "any_local_missing_number": max(f["local_missing_number"] for f in feats),
        "share_missing_entity": sum(f["missing_entity"] > 0 for f in feats) / n,
        "any_negation_mismatch": max(f["negation_mismatch"] for f in feats),
        "log_claims": math.log1p(n),
    }


def faithfulness(evidence: Sequence[ClaimEvidence], supports: Sequence[float]) -> float:
    return _sigmoid(_linear(coef.ANSWER_WEIGHTS, answer_features(evidence, supports)))


# --- answer relevancy -----------------------------------------------------------------------
def answer_relevancy(whole_cos: float, best_claim_cos: float) -> float:
    """Cosine(question, answer) mapped to [0, 1]: ~0.1 is unrelated text, ~0.55+ on topic."""
    cos = max(whole_cos, best_claim_cos)
    return _clip01((cos - coef.RELEVANCY_COS_LOW) / (coef.RELEVANCY_COS_HIGH - coef.RELEVANCY_COS_LOW))


# --- context relevance ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ContextFeatures:
    best_cos: float  # best cosine between the question and a sentence of the context
    question_coverage: float  # share of the question's content words found in the context
    question_entity_coverage: float  # share of the question's names found (1 when it has none)
    answer_type_match: float  # the question asks for a number/date and the context has one
    length: float  # log words of the context, scaled


_NUMERIC_WH = ("how many", "how much", "how long", "how old", "how far", "how tall", "how big",
               "what year", "when", "what percentage", "how large", "how fast", "how deep")


def is_numeric_question(question: str) -> bool:
    q = question.lower()
    return any(cue in q for cue in _NUMERIC_WH)


def context_features(
    question: TextFacts,
    numeric_question: bool,
    best_cos: float,
    tokens: set[str],
    numbers: set[str],
    text: str,
) -> ContextFeatures:
    q_tokens = question.tokens
    coverage = len(q_tokens & tokens) / len(q_tokens) if q_tokens else 0.0
    ents = question.entities
    ent_cov = len(ents & tokens) / len(ents) if ents else 1.0
    return ContextFeatures(
        best_cos=best_cos,
        question_coverage=coverage,
        question_entity_coverage=ent_cov,
        answer_type_match=1.0 if (numeric_question and numbers) else 0.0,
        length=min(math.log1p(len(text.split())) / 5.0, 1.0),
    )


def context_relevance(f: ContextFeatures) -> float:
    feats = {
        "best_cos": f.best_cos,
        "question_coverage": f.question_coverage,
        "question_entity_coverage": f.question_entity_coverage,
        "answer_type_match": f.answer_type_match,
        "length": f.length,
    }
    return _sigmoid(_linear(coef.CONTEXT_WEIGHTS, feats))
