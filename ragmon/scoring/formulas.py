"""RAGAS metric formulas, shared by every judge mode (pure, synchronous, no I/O).

The definitions follow RAGAS (Es et al., 2023, and the ``ragas`` library):

* faithfulness      = supported claims / claims
                      (no claims -> ``None``: an answer that states nothing cannot be
                      checked; it is *not* counted as perfectly faithful)
* context precision = Σᵢ (precision@i · vᵢ) / (Σᵢ vᵢ + ε), vᵢ ∈ {0, 1} in rank order
                      (no contexts -> ``None``; all irrelevant -> 0)
* answer relevancy  = mean cosine(generated question_j, user question), 0 when the answer
                      is noncommittal (no generated question -> ``None``); clipped to [0, 1]
                      because ``Scores`` are ratios (a negative cosine means "unrelated").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

EPSILON = 1e-10  # RAGAS's ε: keeps the all-irrelevant case at 0 instead of 0/0


def faithfulness(verdicts: Sequence[bool]) -> float | None:
    """Share of the answer's claims that the contexts support; None when there are no claims."""
    if not verdicts:
        return None
    return sum(1 for v in verdicts if v) / len(verdicts)


def context_precision(verdicts: Sequence[bool], epsilon: float = EPSILON) -> float | None:
    """RAGAS rank-weighted average precision over per-context relevance verdicts (rank order)."""
    if not verdicts:
        return None
    relevant_so_far = 0
    numerator = 0.0
    for i, relevant in enumerate(verdicts, start=1):
        if relevant:
            relevant_so_far += 1
            numerator += relevant_so_far / i  # precision@i, counted only where v_i = 1
    score = numerator / (relevant_so_far + epsilon)
    return min(1.0, max(0.0, score))


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
