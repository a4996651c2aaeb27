"""Turn (labelled row, judge scores) pairs into the calibration report: a dict for JSON and a
terminal table. Pure: no I/O except ``format_table`` returning a string."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import quality
from ..types import Scores
from . import stats
from .dataset import LabelledRow


# judge metric -> the human label it is compared with
def metric_labels() -> dict[str, str]:
    """metric -> the human label it is calibrated against, from the metric table."""
    return {m.name: m.label for m in quality.rows() if m.label is not None}
THRESHOLD_RULE = "maximises balanced accuracy (equivalently Youden's J = TPR - FPR), in-sample"


@dataclass(frozen=True, slots=True)
class Scored:
    row: LabelledRow
    scores: Scores


def _finite(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) else round(float(x), 4) + 0.0  # + 0.0: no "-0.0"


def _with_ci(
    y: np.ndarray, s: np.ndarray, fn: Callable[[np.ndarray, np.ndarray], float], n_boot: int, seed: int
) -> dict[str, Any]:
    lo, hi = stats.bootstrap_ci(y, s, fn, n=n_boot, seed=seed)
    return {"value": _finite(fn(y, s)), "ci95": [_finite(lo), _finite(hi)]}


def _at(threshold: float, fn: Callable[[stats.Confusion], float]) -> Callable[[np.ndarray, np.ndarray], float]:
    return lambda y, s: fn(stats.confusion(y, s, threshold))


def metric_report(
    labels: Sequence[int], scores: Sequence[float], threshold: float, n_boot: int, seed: int
) -> dict[str, Any]:
    """Agreement of one judge metric with one binary label (failure class = label 0)."""
    y = np.asarray(labels, dtype=np.int64)
    s = np.asarray(scores, dtype=np.float64)
    c = stats.confusion(y, s, threshold)
    best_t, best_ba = stats.best_threshold(y, s)

    def precision(c: stats.Confusion) -> float:
        return stats.precision_recall_f1(c)[0]

    def recall(c: stats.Confusion) -> float:
        return stats.precision_recall_f1(c)[1]

    def f1(c: stats.Confusion) -> float:
        return stats.precision_recall_f1(c)[2]

    return {
        "n": len(y),
        "n_failure": int((y == 0).sum()),
        "threshold": threshold,
        "confusion": {"tp": c.tp, "fp": c.fp, "fn": c.fn, "tn": c.tn},
        "roc_auc": _with_ci(y, s, stats.roc_auc, n_boot, seed),
        "balanced_accuracy": _with_ci(y, s, _at(threshold, stats.balanced_accuracy), n_boot, seed),
        "precision_failure": _with_ci(y, s, _at(threshold, precision), n_boot, seed),
        "recall_failure": _with_ci(y, s, _at(threshold, recall), n_boot, seed),
        "f1_failure": _with_ci(y, s, _at(threshold, f1), n_boot, seed),
        "cohen_kappa": _with_ci(y, s, _at(threshold, stats.cohen_kappa), n_boot, seed),
        "best_threshold": {"value": _finite(best_t), "balanced_accuracy": _finite(best_ba), "rule": THRESHOLD_RULE},
        "mean_score": _finite(float(s.mean())) if len(s) else None,
        # passing answers' mean score minus failing ones': what a drop of the mean score is worth in
        # failing-share points (the judge's score gap, ragmon_judge_score_gap_ratio; docs/alerts.md)
        "score_gap": _finite(float(s[y == 1].mean() - s[y == 0].mean())) if 0 < (y == 0).sum() < len(y) else None,
    }


def context_scores(scores: Scores, n_contexts: int) -> list[float] | None:
    """The judge's per-context relevance, in context order, from its details.

    The local judge gives floats (``context_relevance``); the LLM judge gives verdicts
    (``context_relevant``): True/False count as 1/0 and ties keep the retriever's order.
    """
    for value in (scores.details.get("context_relevance"), scores.details.get("context_relevant")):
        if value is not None and len(value) == n_contexts:
            return [float(v) for v in value]
    return None


def ranking_report(
    labels: Sequence[Sequence[int]], scores: Sequence[Sequence[float]], k: int, n_boot: int, seed: int
) -> dict[str, Any]:
    """MAP / MRR / NDCG@k of the judge's ordering, with bootstrap intervals over queries,
    next to the same metrics for the order the contexts came in (the retriever's)."""
    judge = stats.ranking_metrics(labels, scores, k)
    given = stats.ranking_metrics(labels, [[-i for i in range(len(row))] for row in labels], k)
    out: dict[str, Any] = {"queries": judge["queries"], "k": k}
    keep = [i for i, row in enumerate(labels) if sum(row) > 0]
    rng = np.random.default_rng(seed)
    boots: dict[str, list[float]] = {"map": [], "mrr": [], f"ndcg@{k}": []}
    if keep and n_boot > 0:
        for _ in range(n_boot):
            idx = rng.choice(keep, size=len(keep), replace=True)
            m = stats.ranking_metrics([labels[i] for i in idx], [scores[i] for i in idx], k)
            for name in boots:
                boots[name].append(m[name])
    for name in boots:
        ci = [_finite(float(np.quantile(boots[name], q))) for q in (0.025, 0.975)] if boots[name] else [None, None]
        out[name] = {"value": _finite(judge[name]), "ci95": ci, "given_order": _finite(given[name])}
    flat_y = [v for row in labels for v in row]
    flat_s = [v for row in scores for v in row]
    out["per_context_auc"] = _finite(stats.roc_auc(flat_y, flat_s)) if flat_y else None
    return out


def build_report(
    scored: Sequence[Scored], threshold: float, n_boot: int, seed: int, k: int
) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    for metric, label_key in metric_labels().items():
        ys: list[int] = []
        ss: list[float] = []
        unscored = 0
        for item in scored:
            label = item.row.labels.get(label_key)
            if label is None:
                continue
            value = item.scores.get(metric)
            if value is None:
                unscored += 1
                continue
            ys.append(label)
            ss.append(float(value))
        if not ys and not unscored:
            continue
        entry: dict[str, Any] = metric_report(ys, ss, threshold, n_boot, seed) if ys else {"n": 0}
        entry["label"] = label_key
        entry["labelled_but_not_scored"] = unscored
        metrics[metric] = entry
    ranking_labels: list[list[int]] = []
    ranking_scores: list[list[float]] = []
    no_context_scores = 0
    for item in scored:
        if item.row.context_labels is None:
            continue
        per = context_scores(item.scores, len(item.row.contexts))
        if per is None:
            no_context_scores += 1
            continue
        ranking_labels.append(list(item.row.context_labels))
        ranking_scores.append(per)
    out: dict[str, Any] = {"metrics": metrics}
    if ranking_labels or no_context_scores:
        ranking: dict[str, Any] = (
            ranking_report(ranking_labels, ranking_scores, k, n_boot, seed) if ranking_labels else {}
        )
        ranking["rows_without_context_scores"] = no_context_scores
        out["context_ranking"] = ranking
    return out


def _fmt(entry: Mapping[str, Any] | None) -> str:
    if not entry or entry.get("value") is None:
        return "      -           "
    lo, hi = entry["ci95"]
    ci = f"[{lo:.2f},{hi:.2f}]" if lo is not None and hi is not None else "[  -  ,  -  ]"
    return f"{entry['value']:.3f} {ci}"


def format_table(report: Mapping[str, Any]) -> str:
    """A plain-text summary for the terminal."""
    lines = []
    head = (f"{'metric':18s} {'n':>5s} {'fail':>5s}  {'ROC AUC':18s} {'bal. accuracy':18s} "
            f"{'F1 (failure)':18s} {'kappa':18s} {'best thr':>8s}")
    lines.append(head)
    lines.append("-" * len(head))
    for metric, m in report.get("metrics", {}).items():
        if not m.get("n"):
            lines.append(f"{metric:18s} {0:5d}  (labelled but never scored: {m.get('labelled_but_not_scored', 0)})")
            continue
        best = m["best_threshold"]["value"]
        lines.append(
            f"{metric:18s} {m['n']:5d} {m['n_failure']:5d}  {_fmt(m['roc_auc'])} {_fmt(m['balanced_accuracy'])} "
            f"{_fmt(m['f1_failure'])} {_fmt(m['cohen_kappa'])} {best if best is not None else '-':>8}"
        )
    ranking = report.get("context_ranking")
    if ranking and ranking.get("queries"):
        k = ranking["k"]
        lines.append("")
        lines.append(f"context ranking over {ranking['queries']} queries (judge's order; given order in parentheses)")
        for name in ("map", "mrr", f"ndcg@{k}"):
            e = ranking[name]
            lines.append(f"  {name.upper():8s} {_fmt(e)}  ({e['given_order']})")
    return "\n".join(lines)
