"""Agreement statistics between a judge's scores and human labels — numpy only.

Conventions: ``labels`` are 1 for the *good* class (faithful, relevant) and 0 for the
*failure* class; ``scores`` are the judge's scores, higher meaning better. A score below the
threshold predicts a failure. Precision, recall and F1 are reported for the failure class,
because that is what a monitor is for.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..evaluation import ir
from ..evaluation.stats import bootstrap_statistic

ArrayLike = Sequence[float] | np.ndarray


def _arrays(labels: ArrayLike, scores: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(labels, dtype=np.int64)
    s = np.asarray(scores, dtype=np.float64)
    if y.shape != s.shape or y.ndim != 1:
        raise ValueError(f"labels and scores must be 1-d of equal length, got {y.shape} and {s.shape}")
    return y, s


def rankdata(values: ArrayLike) -> np.ndarray:
    """1-based ranks with ties given their average rank (as scipy.stats.rankdata)."""
    v = np.asarray(values, dtype=np.float64)
    order = np.argsort(v, kind="mergesort")
    sorted_v = v[order]
    ranks = np.empty(len(v), dtype=np.float64)
    # boundaries of runs of equal values
    starts = np.flatnonzero(np.r_[True, sorted_v[1:] != sorted_v[:-1]])
    ends = np.r_[starts[1:], len(v)]
    for lo, hi in zip(starts, ends, strict=True):
        ranks[order[lo:hi]] = (lo + 1 + hi) / 2.0  # mean of ranks lo+1 .. hi
    return ranks


def roc_auc(labels: ArrayLike, scores: ArrayLike) -> float:
    """Probability that a random good item scores above a random failure (ties count 1/2).

    Mann-Whitney rank formula; NaN when only one class is present.
    """
    y, s = _arrays(labels, scores)
    n_pos = int((y == 1).sum())
    n_neg = int((y == 0).sum())
    if n_pos == 0 or n_neg == 0:
        return math.nan
    ranks = rankdata(s)
    return float((ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


@dataclass(frozen=True, slots=True)
class Confusion:
    """Counts with the failure class (label 0) as the positive class."""

    tp: int  # failure predicted failure
    fp: int  # good predicted failure
    fn: int  # failure predicted good
    tn: int  # good predicted good


def confusion(labels: ArrayLike, scores: ArrayLike, threshold: float) -> Confusion:
    y, s = _arrays(labels, scores)
    pred_fail = s < threshold
    fail = y == 0
    return Confusion(
        tp=int((pred_fail & fail).sum()),
        fp=int((pred_fail & ~fail).sum()),
        fn=int((~pred_fail & fail).sum()),
        tn=int((~pred_fail & ~fail).sum()),
    )


def _div(a: float, b: float) -> float:
    return a / b if b else math.nan


def balanced_accuracy(c: Confusion) -> float:
    """Mean of the recall of each class (NaN when a class is absent)."""
    return (_div(c.tp, c.tp + c.fn) + _div(c.tn, c.tn + c.fp)) / 2.0


def precision_recall_f1(c: Confusion) -> tuple[float, float, float]:
    """For the failure class. F1 is NaN when both precision and recall are undefined or 0."""
    p = _div(c.tp, c.tp + c.fp)
    r = _div(c.tp, c.tp + c.fn)
    f1 = _div(2 * p * r, p + r) if not (math.isnan(p) or math.isnan(r)) else math.nan
    return p, r, f1


def cohen_kappa(c: Confusion) -> float:
    """Agreement beyond chance between the judge's verdicts and the labels."""
    n = c.tp + c.fp + c.fn + c.tn
    if n == 0:
        return math.nan
    observed = (c.tp + c.tn) / n
    p_fail_pred = (c.tp + c.fp) / n
    p_fail_true = (c.tp + c.fn) / n
    expected = p_fail_pred * p_fail_true + (1 - p_fail_pred) * (1 - p_fail_true)
    if expected == 1.0:
        return math.nan if observed != 1.0 else 1.0
    return (observed - expected) / (1.0 - expected)


def best_threshold(labels: ArrayLike, scores: ArrayLike) -> tuple[float, float]:
    """The threshold that maximises balanced accuracy (equivalently Youden's J = TPR - FPR).

    Candidates are midpoints between consecutive distinct scores (and just above the largest),
    so the threshold does not sit on any item's score. Returns (threshold, balanced accuracy).
    """
    y, s = _arrays(labels, scores)
    if len(s) == 0 or (y == 1).all() or (y == 0).all():
        return math.nan, math.nan
    distinct = np.unique(s)
    candidates = np.r_[(distinct[:-1] + distinct[1:]) / 2.0, distinct[-1] + 1e-9]
    n_fail = (y == 0).sum()
    n_good = (y == 1).sum()
    # vectorised: for each candidate, failures below it and goods at or above it
    order = np.argsort(s)
    s_sorted, y_sorted = s[order], y[order]
    below = np.searchsorted(s_sorted, candidates, side="left")
    fail_cum = np.r_[0, np.cumsum(y_sorted == 0)]
    good_cum = np.r_[0, np.cumsum(y_sorted == 1)]
    tpr = fail_cum[below] / n_fail
    tnr = (n_good - good_cum[below]) / n_good
    ba = (tpr + tnr) / 2.0
    best = int(np.argmax(ba))
    return float(candidates[best]), float(ba[best])


def bootstrap_ci(
    labels: ArrayLike,
    scores: ArrayLike,
    statistic: Callable[[np.ndarray, np.ndarray], float],
    *,
    n: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
    baseline: ArrayLike | None = None,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic(labels, scores)`` over resampled rows: ``ragmon
    eval``'s bootstrap (``evaluation.stats.bootstrap_statistic``) on (label, score) pairs. With
    ``baseline`` (another judge's scores of the same rows), the interval of the paired difference
    ``statistic(labels, scores) - statistic(labels, baseline)``, both taken on each resample.

    Resamples in which the statistic is undefined (NaN, e.g. one class only) are dropped; NaN, NaN
    when there is nothing to resample.
    """
    y, s = _arrays(labels, scores)
    if n <= 0 or len(y) == 0:
        return math.nan, math.nan
    b = None if baseline is None else _arrays(labels, baseline)[1]

    def resampled(idx: np.ndarray) -> float:
        value = statistic(y[idx], s[idx])
        return value if b is None else value - statistic(y[idx], b[idx])

    interval = bootstrap_statistic(resampled, len(y), n_resamples=n, seed=seed, alpha=alpha)
    return (math.nan, math.nan) if interval is None else interval


# --- ranking metrics for per-context labels -------------------------------------------------
def ranking_order(scores: ArrayLike) -> np.ndarray:
    """Indices by descending score; ties keep the original (retriever) order."""
    s = np.asarray(scores, dtype=np.float64)
    return np.argsort(-s, kind="stable")


def ranking_metrics(
    labels_per_query: Sequence[Sequence[int]], scores_per_query: Sequence[Sequence[float]], k: int
) -> dict[str, float]:
    """MAP, MRR and NDCG@k of the judge's ordering (``ragmon eval``'s IR functions, ``evaluation.ir``)
    over queries with at least one relevant item; a query with nothing relevant is not computable
    and left out (the rule of ``evaluation.ir``), ``queries`` says how many counted."""
    aps, rrs, ndcgs = [], [], []
    for labels, scores in zip(labels_per_query, scores_per_query, strict=True):
        gold = {str(i): int(label) for i, label in enumerate(labels)}
        if not any(grade > 0 for grade in gold.values()):
            continue
        ranking = [str(i) for i in ranking_order(scores)]
        aps.append(ir.average_precision(ranking, gold))
        rrs.append(ir.reciprocal_rank(ranking, gold))
        ndcgs.append(ir.ndcg_at(ranking, gold, k))
    if not aps:
        return {"map": math.nan, "mrr": math.nan, f"ndcg@{k}": math.nan, "queries": 0}
    return {
        "map": float(np.mean(aps)),
        "mrr": float(np.mean(rrs)),
        f"ndcg@{k}": float(np.mean(ndcgs)),
        "queries": len(aps),
    }
