"""The mean drop's tail on stationary traffic, against a normal statistic on the same traffic.

``bench/alerts_simulate.py``'s fleet parts count, through promtool, how often each alert's test statistic sits
above 2 … 5 (``ragmon/alerts/tails.py``), as a multiple of the normal tail the false-page budget assumes. Most mean
drops above 4.5 came from one pipeline (seed 5's p004): one pipeline's evaluations are one correlated episode, so a
pooled share of evaluations says little about a tail by itself. This bench asks how often the *same* traffic would
put a normal statistic there.

It replays the parts' pipelines alone (the simulator's own draws: ``runner.pipeline_rng``, the same rows, counts and
sampling as in the part), and computes, at every 5-minute evaluation of the measured days, each window's mean drop
against its skew limit as the rules do (``deploy/prometheus/generate_rules.py`` ``_mean_drop_rules``: the window's
mean against the same window of the 7 days before, in standard errors of the baseline's variance, less the skew
term). Beside each pipeline, ``--replicas`` normal replicas: the same counts every 5 minutes, each 5-minute sum of
scores drawn normal with the hour of day's mean and variance of that pipeline's own scores, and the drop's plain z
(no skew term: a normal sum has none). A replica's statistic is standard normal when nothing changes, with the
same windows, counts and overlap between evaluations — what the budget assumes. Reported per statistic (metric ×
window) and for any statistic of a pipeline: the pipelines whose statistic passed each level (the independent
unit), the replicas' mean, and the share of replica sets (replica k of every pipeline) with as many or more;
beside them the evaluations and episodes above each level. Also the sampler's lowest rate, and the spread and
autocorrelation of each metric's hourly deviations (what a mechanism carrying a drop from hour to hour would show).

The replica of the statistic is checked against promtool's own counts in ``tests/alerts/test_tails_null.py``.

    PYTHONPATH=. python bench/tails_null.py --seeds 1,2,3,4,5 --out docs/alerts-simulation/tails/tails-null.json
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from ragmon.alerts import command  # noqa: E402
from ragmon.alerts.pools import CONTRADICTIONS, judge_build  # noqa: E402
from ragmon.alerts.promtool import drop_z  # noqa: E402
from ragmon.alerts.runner import pipeline_rng  # noqa: E402
from ragmon.alerts.traffic import DAY, Counters, PipelineRun, simulate_pipeline  # noqa: E402
from ragmon.scoring.onnx_runner import cpu_model  # noqa: E402

sys.path.insert(0, str(ROOT / "deploy" / "prometheus"))
import generate_rules as rules_source  # noqa: E402  (the windows, baseline days and variance floor the rules use)

WINDOWS = {w: rules_source._seconds(w) for w in (rules_source.WINDOW, *rules_source.LONG_WINDOWS)}
SEASONAL_DAYS = rules_source.SEASONAL_DAYS  # the baseline is the same window of the days before
MIN_SCORE_VARIANCE = rules_source.MIN_SCORE_VARIANCE
LEVELS = (3.0, 3.5, 4.0, 4.5, 5.0)


def drop_statistic(count: np.ndarray, total: np.ndarray, squares: np.ndarray, scrape_s: float, first: int,
                   z: float | None) -> dict[str, np.ndarray]:
    """Per window, the mean drop at every scrape after the first ``first`` (cumulative counters, one value per
    scrape): the plain z, or with ``z`` (the rules' DROP_Z) against its skew limit, ``drop_z − (limit − z)``.
    A baseline day before the first scrape is left out, as Prometheus leaves out a day without data."""
    c, s, q = (np.concatenate([[0.0], np.asarray(x, dtype=np.float64)]) for x in (count, total, squares))
    day = round(DAY / scrape_s)
    at = np.arange(first + 1, len(c))
    out: dict[str, np.ndarray] = {}
    for name, seconds in WINDOWS.items():
        w = round(seconds / scrape_s)
        n_w, s_w = _increase(c, at, w), _increase(s, at, w)
        n_b = sum(_increase(c, at - d * day, w) for d in range(1, SEASONAL_DAYS + 1))
        s_b = sum(_increase(s, at - d * day, w) for d in range(1, SEASONAL_DAYS + 1))
        q_b = sum(_increase(q, at - d * day, w) for d in range(1, SEASONAL_DAYS + 1))
        with np.errstate(divide="ignore", invalid="ignore"):
            mean_b = s_b / n_b
            var_b = np.maximum(q_b / n_b - mean_b**2, MIN_SCORE_VARIANCE)
            stat = (mean_b - s_w / n_w) / np.sqrt(var_b * (1 / n_w + 1 / n_b))
            if z is not None:
                stat = stat - (z * z - 1) / 6 * mean_b / np.sqrt(var_b * n_w)
        out[name] = np.where((n_w > 0) & (n_b > 0), stat, np.nan)
    return out


def _increase(cum: np.ndarray, end: np.ndarray, w: int) -> np.ndarray:
    """A cumulative counter's increase over the ``w`` scrapes up to each of ``end``; 0 where they began before it."""
    return np.where(end - w >= 0, cum[np.clip(end, 0, None)] - cum[np.clip(end - w, 0, None)], 0.0)


def normal_replica(count: Sequence[float], total: Sequence[float], squares: Sequence[float], scrape_s: float,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative sums and squares of a replica: each scrape's count as in the replay, its sum of scores normal
    with the hour of day's mean and variance (over every day of the replay)."""
    n = np.diff(np.concatenate([[0.0], np.asarray(count, dtype=np.float64)]))
    t = np.diff(np.concatenate([[0.0], np.asarray(total, dtype=np.float64)]))
    q = np.diff(np.concatenate([[0.0], np.asarray(squares, dtype=np.float64)]))
    hour = ((np.arange(1, len(n) + 1) * scrape_s) % DAY // 3600).astype(int)
    hours = np.arange(24)
    n_h = np.array([n[hour == h].sum() for h in hours])
    mean_h = np.array([t[hour == h].sum() for h in hours]) / np.maximum(n_h, 1)
    var_h = np.maximum(np.array([q[hour == h].sum() for h in hours]) / np.maximum(n_h, 1) - mean_h**2, 0.0)
    sums = n * mean_h[hour] + np.sqrt(n * var_h[hour]) * rng.standard_normal(len(n))
    # squares as n normal scores with that sum would have them: sum^2 / n, plus the spread around their own mean
    # (n - 1) var, which is independent of the sum. Squares at their expectation instead would tie the baseline's
    # variance to its mean (E[x^2] - mean^2 falls as the mean rises) and fatten the replica's tail.
    replica_squares = np.where(n > 0, sums**2 / np.maximum(n, 1) + np.maximum(n - 1, 0) * var_h[hour], 0.0)
    return np.cumsum(sums), np.cumsum(replica_squares)


def exceedances(stat: np.ndarray, levels: Sequence[float]) -> dict[str, list[int]]:
    """Per level: [evaluations above it, episodes (runs of consecutive evaluations above it)]."""
    out = {}
    for level in levels:
        above = np.nan_to_num(stat, nan=-math.inf) > level
        starts = int(above[0]) + int(np.sum(above[1:] & ~above[:-1])) if len(above) else 0
        out[f"{level:g}"] = [int(above.sum()), starts]
    return out


def hourly_deviations(c: Counters, scrape_s: float) -> np.ndarray:
    """Each whole hour's mean score minus that hour of day's mean over every day, in its standard error: (days, 24).
    Independent hours give a spread of sqrt(1 - 1/days) and no autocorrelation."""
    per_hour = round(3600 / scrape_s)
    n, t, q = (np.diff(np.concatenate([[0.0], np.asarray(x, dtype=np.float64)])) for x in (c.count, c.total, c.squares))
    hours = len(n) // per_hour // 24 * 24
    n, t, q = (x[:hours * per_hour].reshape(hours, per_hour).sum(axis=1).reshape(-1, 24) for x in (n, t, q))
    mean_h = t.sum(axis=0) / n.sum(axis=0)
    var_h = q.sum(axis=0) / n.sum(axis=0) - mean_h**2
    return np.asarray((t / n - mean_h) / np.sqrt(var_h / n))


def replay(prepared: command.Prepared, seed: int, pipeline: int, run: int = 0) -> PipelineRun:
    """One pipeline of a stationary cell (of its run ``run``), drawn as the runner draws it."""
    case = command._cases("stationary")[0]
    settings = prepared.settings
    traffic = settings.traffic
    rng = pipeline_rng(seed, case, run, pipeline)
    incident = case.incident(rng, traffic.warmup_days * DAY, traffic.total_s)
    youden = {m: se + sp - 1.0 for m, (se, sp) in settings.error_rates.items()}
    run = simulate_pipeline(prepared.pools, traffic, settings.sampling, incident, settings.incident_metric,
                            settings.base_share, settings.thresholds, youden, rng)
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3,4,5", help="the fleet parts (fleet100-1rps-stationary-seedN)")
    parser.add_argument("--replicas", type=int, default=20, help="normal replicas of each pipeline")
    parser.add_argument("--work", type=Path, default=ROOT / ".cache" / "alerts-bench")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    import alerts_simulate as cells_of

    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    started = time.monotonic()
    cells = dict(cells_of.cells(args.work))
    rng = np.random.default_rng(20261207)
    # per statistic ("metric/window"): each pipeline's highest value, and its replicas' (pipelines x replicas);
    # evaluations and episodes above each level, pooled over pipelines (replicas: their mean)
    highest: dict[str, list[float]] = {}
    replica_highest: dict[str, list[np.ndarray]] = {}
    counts: dict[str, dict[str, np.ndarray]] = {}  # key -> level -> [evaluations, episodes, their replica means]
    top: list[dict[str, Any]] = []
    deviations: dict[str, list[np.ndarray]] = {}  # metric -> each pipeline's hourly deviations, flattened in time
    lowest_rate = 1.0
    z = None
    for seed in seeds:
        parsed = argparse.ArgumentParser()
        command.add_arguments(parsed)
        ns = parsed.parse_args(["simulate", *cells[f"fleet100-1rps-stationary-seed{seed}"], "--cache",
                                str(args.work / "scores")])
        prepared = command.prepare(ns)
        z = drop_z(prepared.rules)
        traffic = prepared.settings.traffic
        first = round(traffic.warmup_days * DAY / traffic.scrape_s)  # the evaluations promtool counts as measured
        for p in range(prepared.settings.pipelines):
            run = replay(prepared, seed, p)
            lowest_rate = min(lowest_rate, *run.rates)
            for metric, c in run.counters.items():
                if metric == CONTRADICTIONS:
                    continue
                deviations.setdefault(metric, []).append(hourly_deviations(c, traffic.scrape_s).ravel())
                count = np.array(c.count)
                stats = drop_statistic(count, np.array(c.total), np.array(c.squares), traffic.scrape_s, first, z)
                replicas = [drop_statistic(count, *normal_replica(c.count, c.total, c.squares, traffic.scrape_s, rng),
                                           traffic.scrape_s, first, None) for _ in range(args.replicas)]
                for window, stat in stats.items():
                    key = f"{metric}/{window}"
                    highest.setdefault(key, []).append(float(np.nanmax(stat)))
                    replica_highest.setdefault(key, []).append(np.array([np.nanmax(r[window]) for r in replicas]))
                    per_level = counts.setdefault(key, {f"{lv:g}": np.zeros(4) for lv in LEVELS})
                    mine = exceedances(stat, LEVELS)
                    theirs = [exceedances(r[window], LEVELS) for r in replicas]
                    for lv in per_level:
                        per_level[lv] += [*mine[lv], *np.mean([t[lv] for t in theirs], axis=0)]
                    top.append({"seed": seed, "pipeline": p, "metric": metric, "window": window,
                                "max": round(highest[key][-1], 3)})
            print(f"seed {seed} p{p:03d}: {time.monotonic() - started:.0f}s", flush=True)
    keys = list(highest)
    pipelines = len(highest[keys[0]])
    report: dict[str, Any] = {
        "seeds": seeds, "pipelines": pipelines, "replicas": args.replicas, "drop_z": z, "levels": list(LEVELS),
        "judge_build": judge_build(), "cpu": cpu_model(), "python": platform.python_version(),
        "by_statistic": {key: _row(np.array(highest[key]), np.array(replica_highest[key]), counts[key])
                         for key in keys},
    }
    # any statistic of a pipeline: its highest over every metric and window
    any_real = np.max([highest[k] for k in keys], axis=0)
    any_replica = np.max([replica_highest[k] for k in keys], axis=0)
    report["any_statistic"] = _row(any_real, any_replica, None)
    report["lowest_sampling_rate"] = lowest_rate
    report["hourly_deviations"] = {m: _hourly(d) for m, d in deviations.items()}
    report["highest"] = sorted(top, key=lambda r: -r["max"])[:10]
    report["seconds"] = round(time.monotonic() - started, 1)
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(_table(report))
    return 0


def _hourly(per_pipeline: list[np.ndarray]) -> dict[str, Any]:
    """Spread of the hourly deviations, pooled, and their autocorrelation at 1, 2, 3 and 6 hours (mean over
    pipelines, with its standard error if the hours are independent)."""
    pooled = np.concatenate(per_pipeline)
    lags = {str(lag): round(float(np.mean([np.corrcoef(d[:-lag], d[lag:])[0, 1] for d in per_pipeline])), 4)
            for lag in (1, 2, 3, 6)}
    return {"spread": round(float(pooled.std()), 4), "autocorrelation": lags,
            "autocorrelation_se": round(1 / math.sqrt(pooled.size), 4)}


def _row(real: np.ndarray, replicas: np.ndarray, counts: dict[str, np.ndarray] | None) -> dict[str, Any]:
    """Per level: pipelines whose statistic passed it (the independent unit: one pipeline's evaluations are one
    correlated episode), the replicas' mean count, and the share of replica sets (replica k of every pipeline)
    with as many or more; with ``counts``, evaluations and episodes too."""
    out = {}
    for level in LEVELS:
        lv = f"{level:g}"
        above = int(np.sum(real > level))
        per_set = np.sum(replicas > level, axis=0)  # replicas: (pipelines, replica sets)
        row: dict[str, Any] = {"pipelines": above, "normal_pipelines": round(float(per_set.mean()), 3),
                               "normal_at_least_as_many": round(float(np.mean(per_set >= above)), 3)}
        if counts is not None:
            e, ep, ne, nep = counts[lv]
            row.update({"evaluations": int(e), "episodes": int(ep), "normal_evaluations": round(float(ne), 2),
                        "normal_episodes": round(float(nep), 3)})
        out[lv] = row
    return out


def _table(report: dict[str, Any]) -> str:
    lines = [f"{report['pipelines']} pipelines, {report['replicas']} normal replicas each. Pipelines whose statistic "
             "passed each level: replay | normal replicas' mean | share of replica sets with as many or more "
             "[evaluations above: replay / normal]",
             "| statistic | " + " | ".join(f"> {lv:g}" for lv in report["levels"]) + " |",
             "|---|" + "---|" * len(report["levels"])]
    rows = [*report["by_statistic"].items(), ("any statistic", report["any_statistic"])]
    for key, row in rows:
        cells = [f"{r['pipelines']} · {r['normal_pipelines']:g} · {r['normal_at_least_as_many']:.2f}"
                 + (f" [{r['evaluations']} / {r['normal_evaluations']:g}]" if "evaluations" in r else "")
                 for r in row.values()]
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
