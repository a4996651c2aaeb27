"""RAGAS metric formulas, shared by every judge mode (pure, synchronous, no I/O).

The definitions follow RAGAS (Es et al., 2023, and the ``ragas`` library):

* faithfulness      = supported claims / claims
                      (no claims -> ``None``: an answer that states nothing cannot be
                      checked; it is *not* counted as perfectly faithful)
* context precision = Σᵢ (precision@i · vᵢ) / Σᵢ vᵢ, vᵢ ∈ {0, 1} in rank order
                      (no contexts -> ``None``; all irrelevant -> 0). RAGAS writes the
                      denominator Σᵢ vᵢ + ε only to turn the all-irrelevant 0/0 into 0; that case
                      is handled explicitly, so every other score is exact (one relevant context
                      out of two at rank 2 is 0.5, not 0.49999999995, and compares equal to a
                      0.5 threshold).
* answer relevancy  = mean cosine(generated question_j, user question), 0 when the answer
                      is noncommittal (no generated question -> ``None``); clipped to [0, 1]
                      because ``Scores`` are ratios (a negative cosine means "unrelated").

Reference-based (offline, ``ragmon eval``):

* context recall     = reference claims attributable to the contexts / reference claims
                       (no reference claims -> ``None``)
* answer correctness = 0.75 · F1 + 0.25 · similarity, the RAGAS default weights, where
                       F1 = TP / (TP + ½(FP + FN)) (0 when TP = 0), TP = answer claims the
                       reference states, FP = answer claims it does not, FN = reference claims
                       the answer does not state; similarity = cosine(answer, reference)
                       embeddings clipped to [0, 1] (no reference claims -> ``None``)

Citations (offline; see ``citations.py`` for how claims and markers are paired):

* citation presence    = claims with at least one citation marker / claims
* citation correctness = cited claims supported by one of the contexts they cite / cited claims
                         (a marker that names no known context is a citation that cannot be
                         correct; no cited claim -> ``None``)
* citation coverage    = claims cited AND supported by a cited context / claims
                         (= presence × correctness; no claims -> ``None``)

Abstention (``no_answer`` questions): 1.0 when the app declined to answer, 0.0 when it answered.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np

EPSILON = 1e-10  # RAGAS's ε (kept for callers); context_precision no longer needs it


def faithfulness(verdicts: Sequence[bool]) -> float | None:
    """Share of the answer's claims that the contexts support; None when there are no claims."""
    if not verdicts:
        return None
    return sum(1 for v in verdicts if v) / len(verdicts)


# A contradicted claim lowers faithfulness by half its share of the claims and caps it below the
# diagnosis threshold — one claim that says the opposite of its sources fails the answer, however
# many others are supported (docs/judges.md, "Contradicted claims").
CONTRADICTION_CAP = 0.45


def with_contradictions(score: float, contradicted: int, claims: int) -> float:
    """``score`` of an answer with ``contradicted`` of its ``claims`` contradicted:
    ``min(score × (1 − contradicted / (2 × claims)), CONTRADICTION_CAP)``; unchanged without one."""
    if contradicted <= 0 or claims <= 0:
        return score
    return min(score * (1.0 - min(contradicted, claims) / (2.0 * claims)), CONTRADICTION_CAP)


def faithfulness_with_contradictions(verdicts: Sequence[bool], contradicted: int) -> float | None:
    """``faithfulness`` (the RAGAS share of supported claims) with ``with_contradictions`` applied."""
    share = faithfulness(verdicts)
    if share is None:
        return None
    return with_contradictions(share, contradicted, len(verdicts))


def context_precision(verdicts: Sequence[bool], epsilon: float = 0.0) -> float | None:
    """RAGAS rank-weighted average precision over per-context relevance verdicts (rank order).

    Exact: computed in rationals and rounded once, with no ε in the denominator (all
    irrelevant -> 0.0). A positive ``epsilon`` reproduces RAGAS's ``Σ vᵢ + ε`` denominator."""
    if not verdicts:
        return None
    relevant_so_far = 0
    numerator = Fraction(0)
    for i, relevant in enumerate(verdicts, start=1):
        if relevant:
            relevant_so_far += 1
            numerator += Fraction(relevant_so_far, i)  # precision@i, counted only where v_i = 1
    if relevant_so_far == 0:
        return 0.0
    if epsilon:
        return min(1.0, max(0.0, float(numerator) / (relevant_so_far + epsilon)))
    # in rationals, rounded once: every score is the float nearest the true ratio
    return min(1.0, max(0.0, float(numerator / relevant_so_far)))


def mean_cosine(question_vector: np.ndarray, generated_vectors: np.ndarray) -> float:
    """Mean cosine similarity between one vector and each row of a matrix (any norms)."""
    q = np.asarray(question_vector, dtype=np.float64).reshape(-1)
    g = np.asarray(generated_vectors, dtype=np.float64).reshape(len(generated_vectors), -1)
    q_norm = np.linalg.norm(q)
    g_norms = np.linalg.norm(g, axis=1)
    denom = np.clip(q_norm * g_norms, 1e-12, None)
    return float(np.mean((g @ q) / denom))


def answer_relevancy(
    question_vector: np.ndarray, generated_vectors: np.ndarray, noncommittal: bool
) -> float | None:
    """RAGAS answer relevancy from embeddings; 0 when noncommittal, None with no questions."""
    if noncommittal:
        return 0.0
    if len(generated_vectors) == 0:
        return None
    return min(1.0, max(0.0, mean_cosine(question_vector, generated_vectors)))


# --- reference-based (offline) ------------------------------------------------------------------
ANSWER_CORRECTNESS_WEIGHTS = (0.75, 0.25)  # RAGAS default: (factuality F1, semantic similarity)


def context_recall(attributed: Sequence[bool]) -> float | None:
    """RAGAS context recall: share of the reference answer's claims that the contexts support;
    None when the reference has no claims."""
    if not attributed:
        return None
    return sum(1 for a in attributed if a) / len(attributed)


def claim_f1(tp: int, fp: int, fn: int) -> float | None:
    """RAGAS's factuality F1 over claim counts: TP / (TP + ½(FP + FN)), 0 when TP = 0.

    None when there is nothing to compare (no claim on either side)."""
    if tp < 0 or fp < 0 or fn < 0:
        raise ValueError("claim counts cannot be negative")
    if tp + fp + fn == 0:
        return None
    if tp == 0:
        return 0.0
    return tp / (tp + 0.5 * (fp + fn))


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two vectors (any norms); 0 when either is the zero vector."""
    x = np.asarray(a, dtype=np.float64).reshape(-1)
    y = np.asarray(b, dtype=np.float64).reshape(-1)
    denom = float(np.linalg.norm(x) * np.linalg.norm(y))
    return float(x @ y) / denom if denom > 1e-12 else 0.0


def answer_correctness(
    tp: int, fp: int, fn: int, similarity: float | None,
    weights: tuple[float, float] = ANSWER_CORRECTNESS_WEIGHTS,
) -> float | None:
    """RAGAS answer correctness: weighted mean of the claim F1 and the semantic similarity.

    ``similarity`` is the cosine of the answer's and the reference's embeddings; it is clipped
    to [0, 1] (a negative cosine means "unrelated"). None similarity (no embedding available)
    leaves the F1 alone. None when there are no claims on either side.
    """
    f1 = claim_f1(tp, fp, fn)
    if f1 is None:
        return None
    w_f1, w_sim = weights
    if similarity is None or w_sim == 0:
        return f1
    sim = min(1.0, max(0.0, float(similarity)))
    return min(1.0, max(0.0, (w_f1 * f1 + w_sim * sim) / (w_f1 + w_sim)))


# --- citations (offline) -------------------------------------------------------------------------
def citation_presence(n_claims: int, n_cited: int) -> float | None:
    """Claims with a citation marker / claims; None when the answer has no claims."""
    if n_claims <= 0:
        return None
    return min(1.0, n_cited / n_claims)


def citation_correctness(cited_supported: Sequence[bool]) -> float | None:
    """Cited claims supported by a context they cite / cited claims; None when nothing is cited."""
    if not cited_supported:
        return None
    return sum(1 for v in cited_supported if v) / len(cited_supported)


def citation_coverage(n_claims: int, n_cited_and_supported: int) -> float | None:
    """Claims that are cited AND supported by a cited context / claims; None without claims."""
    if n_claims <= 0:
        return None
    return min(1.0, n_cited_and_supported / n_claims)


def abstention(abstained: bool) -> float:
    """no_answer questions: 1.0 when the app declined to answer, 0.0 when it answered anyway."""
    return 1.0 if abstained else 0.0
