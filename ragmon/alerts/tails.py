"""How often the alerts' test statistics sit above a level on stationary traffic, against the normal tail.

The false-page budget (``quality.alert_alpha``) sizes z so that each test, if its statistic is standard normal
when nothing changed, fires its share of the month's false pages. A fleet's z (5.05 for 100 pipelines) is
reached so rarely that counting false pages cannot check that assumption in any affordable simulation (0 pages
in 3 fleet-days bounds a rate only to 37 a month). The statistic's tail can be checked where it is seen: the
share of measured evaluations above 2, 3, 4 … against 1 − Φ(level). A ratio near 1 (or under it) up to the
highest level with exceedances says the normal model the budget extrapolates from holds on this traffic, judge
and sampling; a ratio that grows with the level is a heavier tail, which the budget does not allow for.

Evaluations of one pipeline are correlated (a window moves by one evaluation), so the interval is a bootstrap
over pipelines, which are independent.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

from .promtool import TAIL_POINTS as POINTS
from .runner import RunResult

BOOTSTRAP = 2000


def _family(key: str) -> str:
    """'ragmon:score_failures:rise_z6h/faithfulness' -> 'score_failures:rise/faithfulness' (every window)."""
    record, _, metric = key.partition("/")
    stem = record.split(":", 1)[1].rsplit("_z", 1)[0]
    return f"{stem}/{metric}"


def _row(counts: np.ndarray, levels: Sequence[str]) -> dict[str, Any]:
    """``counts``: (pipelines, 1 + levels) evaluations then exceedances; the pooled shares and their ratios to
    the normal tail, with a bootstrap interval over pipelines where anything was above."""
    total = counts.sum(axis=0)
    points = int(total[0])
    out: dict[str, Any] = {POINTS: points, "above": {}, "share_above": {}, "normal": {}, "ratio": {}, "ratio_ci95": {}}
    if points == 0:
        return out
    rng = np.random.default_rng(0)
    draws = counts[rng.integers(0, len(counts), size=(BOOTSTRAP, len(counts)))].sum(axis=1)
    for i, level in enumerate(levels, start=1):
        normal = 1.0 - NormalDist().cdf(float(level))
        share = total[i] / points
        out["above"][level] = int(total[i])
        out["share_above"][level] = float(f"{share:.4g}")
        out["normal"][level] = float(f"{normal:.4g}")
        out["ratio"][level] = round(share / normal, 3)
        if total[i] > 0:
            ratios = draws[:, i] / np.maximum(draws[:, 0], 1) / normal
            lo, hi = np.quantile(ratios, [0.025, 0.975])
            out["ratio_ci95"][level] = [round(float(lo), 3), round(float(hi), 3)]
        else:  # nothing above: a bootstrap of zeros says nothing
            out["ratio_ci95"][level] = None
    return out


def summarize_tails(results: Sequence[RunResult]) -> dict[str, Any] | None:
    """Per statistic (every window of it together) and over all of them as they page: evaluations measured, how
    many were above each level, and the ratio to the normal tail. None when the runs counted no tails."""
    runs = [r for r in results if r.incident.kind == "none" and r.tails]
    if not runs:
        return None
    levels = [k for k in next(iter(runs[0].tails.values())) if k != POINTS]
    columns = [POINTS, *levels]
    families = sorted({_family(key) for r in runs for key in r.tails})

    def counts(keep: Any) -> np.ndarray:
        return np.array([[sum(c[col] for key, c in r.tails.items() if keep(key)) for col in columns] for r in runs],
                        dtype=np.int64)

    # "all" pools the statistics as they page: where the mean's drop was also counted against its skew limit,
    # that one stands for it (the raw drop, paged above the limit and not above z, keeps its own row)
    at_limit = any(f.startswith("score_ratio:drop_at_limit/") for f in families)
    every = counts(lambda key: not (at_limit and _family(key).startswith("score_ratio:drop/")))
    return {
        "levels": [float(x) for x in levels],
        "pipelines": len(runs),
        "mean_drop": "against its skew limit" if at_limit else "raw",  # which one "all" pools
        # per pipeline: its evaluations, then those above each level (reports pool over pipelines: pooled_tails)
        "all": {**_row(every, levels), "per_pipeline": every.tolist()},
        "by_statistic": {f: _row(counts(lambda key, f=f: _family(key) == f), levels) for f in families},
    }


def pooled_tails(reports: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The pooled row of several reports' tails (the same levels), every pipeline of every report in the bootstrap."""
    tails = [r["tails"] for r in reports if r.get("tails")]
    def counted(t: dict[str, Any]) -> tuple[Any, str]:
        return t["levels"], t.get("mean_drop", "raw")

    if not tails or any(counted(t) != counted(tails[0]) for t in tails):
        return None  # other levels, or the mean's drop counted another way, do not pool
    levels = list(tails[0]["all"]["above"])
    rows = np.array([row for t in tails for row in t["all"]["per_pipeline"]], dtype=np.int64)
    return {**_row(rows, levels), "pipelines": len(rows)}
