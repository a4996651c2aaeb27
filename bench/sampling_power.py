"""Fixed-rate vs power-based judge sampling on simulated traffic: judged traces per hour and time to
detect an injected drop.

Three pipelines with different volumes and score spreads run for a week (the drop alerts' 7d
baseline), then the mean score of every pipeline drops by ``--drop`` (0.05). Each minute the
benchmark applies the drop alerts' statistics to what was judged: the 1h mean against the 7d mean,
Welch z from the counts, sums and sums of squares (exactly what ``deploy/prometheus/ragmon-rules.yml``
computes), with the rules' count guards and their ``for: 10m``. Strategies:

* ``fixed 1%``          every pipeline judged at 1 % (a common default);
* ``power-based``       ``ragmon.sampling.power.PowerSampler`` (``--detect-drop 0.05 --within 1h
                        --power 0.8 --alpha 0.05``), the agent's own code on a simulated clock;
* ``fixed, equal power`` the one fixed rate that gives *every* pipeline the power-based target
                        (what a fixed rate must cost to watch the quietest pipeline as well).

Scores are Beta-distributed with the pipeline's mean and standard deviation; judged counts are
binomial draws of the minute's traffic at the rate (the agent's hash sampling is a uniform draw per
trace id). Reported per strategy and pipeline: judged traces per hour, the drop its sample can
detect, the share of runs whose significance test (z > 1.96 for 10 minutes) caught the drop within
1 h / 3 h, the median time to detection, the same for the warning alert (also needs the 1h mean
0.05 below the 7d mean), and the share of runs in which either fired in the 24 h before the drop
(tested every minute, as Prometheus does: 24 roughly independent hours a day).

    python bench/sampling_power.py              # 20 runs per strategy (a few minutes on 2 cores)
    python bench/sampling_power.py --runs 5     # quicker, noisier
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ragmon.sampling.power import PowerSampler, PowerTarget, required_n

WEEK_MIN = 7 * 24 * 60
WINDOW_MIN = 60
FOR_MIN = 10  # the alerts' for: 10m
MIN_WINDOW, MIN_BASELINE = 30, 200  # MIN_SCORED_WINDOW / MIN_SCORED_BASELINE
Z_CRIT = 1.96  # DROP_Z
WARNING = 0.05  # DROP_WARNING


@dataclass(frozen=True)
class Pipeline:
    name: str
    per_s: float  # traffic
    mean: float
    sd: float


PIPELINES = (
    Pipeline("search", 40.0, 0.80, 0.22),  # busy, consistent
    Pipeline("support", 2.0, 0.80, 0.30),
    Pipeline("billing", 0.2, 0.80, 0.35),  # quiet, spread out
)


def beta(rng: np.random.Generator, mean: float, sd: float, n: int) -> np.ndarray:
    k = mean * (1 - mean) / (sd * sd) - 1
    return rng.beta(mean * k, (1 - mean) * k, size=n)


def window_stats(cums: tuple[np.ndarray, ...], start: int, end: int) -> tuple[float, float, float]:
    """(count, mean, variance) of the judged scores in minutes [start, end) from cumulative sums."""
    c_n, c_1, c_2 = cums
    k = float(c_n[end] - c_n[start])
    if k <= 0:
        return 0.0, math.nan, math.nan
    m = float(c_1[end] - c_1[start]) / k
    return k, m, max(0.0, float(c_2[end] - c_2[start]) / k - m * m)


def run(strategy: str, seed: int, drop: float, after_min: int, equal_rate: float) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(seed)
    now = [0.0]
    target = PowerTarget(drop=drop, window_s=3600, power=0.8, alpha=0.05)
    sampler = PowerSampler(target, clock=lambda: now[0]) if strategy == "power-based" else None
    total = WEEK_MIN + after_min
    out: dict[str, dict[str, float]] = {}
    # per pipeline, per minute: judged count, sum, sum of squares
    n = {p.name: np.zeros(total) for p in PIPELINES}
    s1 = {p.name: np.zeros(total) for p in PIPELINES}
    s2 = {p.name: np.zeros(total) for p in PIPELINES}
    for minute in range(total):
        now[0] = minute * 60.0
        for p in PIPELINES:
            arrivals = rng.poisson(p.per_s * 60)
            if strategy == "fixed 1%":
                rate = 0.01
            elif strategy == "fixed, equal power":
                rate = equal_rate
            else:
                assert sampler is not None
                sampler.observe_traffic(p.name, arrivals)
                rate = sampler.rate_for(p.name)
            judged = rng.binomial(arrivals, min(1.0, rate))
            mean = p.mean - (drop if minute >= WEEK_MIN else 0.0)
            scores = beta(rng, mean, p.sd, judged)
            if sampler is not None and judged:
                sampler.observe_batch(p.name, "faithfulness", scores.tolist())
            n[p.name][minute], s1[p.name][minute], s2[p.name][minute] = judged, scores.sum(), (scores**2).sum()
    for p in PIPELINES:
        cums = tuple(np.concatenate([[0.0], np.cumsum(a[p.name])]) for a in (n, s1, s2))
        sig_run = warn_run = 0
        first_sig = first_warn = math.inf
        false_sig = false_warn = 0.0
        for minute in range(WEEK_MIN - 24 * 60, total):
            end = minute + 1
            k_w, m_w, v_w = window_stats(cums, max(0, end - WINDOW_MIN), end)
            k_b, m_b, v_b = window_stats(cums, max(0, end - WEEK_MIN), end)
            ok = k_w >= MIN_WINDOW and k_b >= MIN_BASELINE
            d = m_b - m_w if ok else math.nan
            se = math.sqrt(v_w / k_w + v_b / k_b) if ok else math.nan
            z = d / se if ok and se > 0 else (math.inf if ok and d > 0 else 0.0)
            sig = ok and z > Z_CRIT
            sig_run = sig_run + 1 if sig else 0
            warn_run = warn_run + 1 if sig and d > WARNING else 0
            if minute < WEEK_MIN:
                false_sig = max(false_sig, float(sig_run > FOR_MIN))
                false_warn = max(false_warn, float(warn_run > FOR_MIN))
                continue
            if sig_run > FOR_MIN and first_sig == math.inf:
                first_sig = minute - WEEK_MIN
            if warn_run > FOR_MIN and first_warn == math.inf:
                first_warn = minute - WEEK_MIN
        judged_per_h = float(n[p.name][WEEK_MIN - 24 * 60: WEEK_MIN].sum()) / 24
        out[p.name] = {"judged_per_h": judged_per_h, "detect_min": first_sig, "warn_min": first_warn,
                       "false_sig": false_sig, "false_warn": false_warn}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--drop", type=float, default=0.05)
    parser.add_argument("--after-hours", type=float, default=6.0)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    after = int(args.after_hours * 60)
    # the fixed rate that gives the quietest pipeline the power-based target (capped at 1)
    needs = {p.name: required_n(args.drop, p.sd, 0.05, 0.8, 3600) / (p.per_s * 3600) for p in PIPELINES}
    equal_rate = min(1.0, max(needs.values()))
    strategies = ("fixed 1%", "power-based", "fixed, equal power")
    started = time.perf_counter()
    results: dict[str, dict[str, list[dict[str, float]]]] = {s: {p.name: [] for p in PIPELINES} for s in strategies}
    for strategy in strategies:
        for seed in range(args.runs):
            for name, row in run(strategy, seed, args.drop, after, equal_rate).items():
                results[strategy][name].append(row)
    elapsed = time.perf_counter() - started

    def pct(rows: list[dict[str, float]], key: str, limit: float) -> str:
        return f"{100 * sum(r[key] <= limit for r in rows) / len(rows):.0f} %"

    def median(rows: list[dict[str, float]], key: str) -> str:
        value = statistics.median(r[key] for r in rows)
        return "never" if value == math.inf else f"{value:.0f} min"

    print(f"injected drop {args.drop} in every pipeline after a 7-day baseline; {args.runs} runs per strategy; "
          f"'fixed, equal power' = {equal_rate:.1%}; {elapsed:.0f} s")
    print("| strategy | pipeline (traffic, score sd) | judged / h | detectable drop | significant within 1 h / 3 h "
          "| median time to significance | warning alert within 3 h | median time to warning "
          "| false significance / false warning (24 h before) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    summary: dict[str, object] = {"equal_rate": equal_rate, "runs": args.runs, "drop": args.drop, "rows": []}
    for strategy in strategies:
        total = 0.0
        for p in PIPELINES:
            rows = results[strategy][p.name]
            judged = statistics.mean(r["judged_per_h"] for r in rows)
            total += judged
            detectable = 2.8016 * p.sd * math.sqrt((1 + 1 / 168) / judged) if judged else math.inf
            line = (f"| {strategy} | {p.name} ({p.per_s:g}/s, {p.sd:g}) | {judged:,.0f} | {detectable:.3f} | "
                    f"{pct(rows, 'detect_min', 60)} / {pct(rows, 'detect_min', 180)} | {median(rows, 'detect_min')} | "
                    f"{pct(rows, 'warn_min', 180)} | {median(rows, 'warn_min')} | "
                    f"{100 * statistics.mean(r['false_sig'] for r in rows):.0f} % / "
                    f"{100 * statistics.mean(r['false_warn'] for r in rows):.0f} % |")
            print(line)
            summary["rows"].append({"strategy": strategy, "pipeline": p.name, "judged_per_h": judged,  # type: ignore[union-attr]
                                    "detectable_drop": detectable, "rows": rows})
        print(f"| {strategy} | **all** | **{total:,.0f}** | | | | | | |")
    if args.json:
        args.json.write_text(json.dumps(summary, default=str, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
