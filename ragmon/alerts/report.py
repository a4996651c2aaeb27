"""From simulated runs to the numbers users plan with: false pages per 30 days, time to page."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .runner import RunResult
from .tails import summarize_tails
from .traffic import DAY

SEVERITIES = ("warning", "critical")
# Alerts of the rules file that no simulation here evaluates, and why.
HEALTH = ("reads the agent's own health counters, not a sampled estimate of quality: no sampling noise to "
          "simulate; it fires on a fault (its promtool tests in deploy/prometheus/tests pin when)")
NOT_SIMULATED = {
    "RagmonScoringStalled": HEALTH,
    "RagmonCoverageLow": HEALTH,
    "RagmonJudgeErrorsHigh": HEALTH,
    "RagmonJudgeBudgetExhausted": HEALTH,
    "RagmonKafkaLagGrowing": HEALTH,
    "RagmonAgentDown": HEALTH,
    "RagmonDetectionTargetMissed": ("reads the sampler's plan (ragmon_detectable_drop_ratio), a deterministic "
                                    "function of traffic and judge budget: when it fires it is true"),
    "RagmonOfflineEvalGateFailed": "reads scheduled `ragmon eval` runs on a golden set (Pushgateway), not traffic",
    "RagmonOfflineEvalRegression": "reads scheduled `ragmon eval` runs on a golden set (Pushgateway), not traffic",
    "RagmonOfflineEvalStale": "reads scheduled `ragmon eval` runs on a golden set (Pushgateway), not traffic",
}
LATENCY_ALERTS = ("RagmonRetrievalLatencyHigh",)


def _poisson_cdf(k: int, mean: float) -> float:
    term = total = math.exp(-mean)
    for i in range(1, k + 1):
        term *= mean / i
        total += term
    return total


def _solve(f: Any, lo: float, hi: float) -> float:
    for _ in range(100):  # bisection: f is monotone in the mean
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
    return (lo + hi) / 2


def rate_ci95(events: int, exposure_days: float) -> tuple[float, float]:
    """Exact (Garwood) 95 % interval of a Poisson count, as a rate per 30 days."""
    top = 10.0 + 3.0 * events
    # lower: P(X >= events | m) = 2.5 %; upper: P(X <= events | m) = 2.5 %
    lo = 0.0 if events == 0 else _solve(lambda m: 0.025 - (1.0 - _poisson_cdf(events - 1, m)), 0.0, top)
    hi = _solve(lambda m: _poisson_cdf(events, m) - 0.025, 0.0, top)
    scale = 30.0 / exposure_days if exposure_days > 0 else math.nan
    return lo * scale, hi * scale


def _within_by_start(runs: Sequence[RunResult], delays: Sequence[float], page_within_s: float) -> dict[str, list[int]]:
    """Paged in time / runs, by the quarter of the day the incident started in: when traffic ebbs after an
    incident, fewer traces see it."""
    out: dict[str, list[int]] = {}
    for r, d in zip(runs, delays, strict=True):
        quarter = int(r.incident.start_s % DAY // (DAY / 4))
        key = f"{6 * quarter:02d}-{6 * quarter + 6:02d}h"
        hit_runs = out.setdefault(key, [0, 0])
        hit_runs[0] += int(d <= page_within_s)
        hit_runs[1] += 1
    return dict(sorted(out.items()))


def delay_quantile_minutes(values: Sequence[float], q: float) -> float | None:
    """A quantile of delays in minutes, where a run never paged counts as infinitely late."""
    if not values:
        return None
    x = np.quantile(np.array(values, dtype=float), q, method="higher")
    return None if not math.isfinite(x) else round(float(x) / 60.0, 1)


def _counts_of(severity: str, counts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """The counts keyed "alertname/severity/..." of one severity, summed over runs, sorted by key."""
    out: dict[str, int] = {}
    for by_key in counts:
        for key, n in by_key.items():
            if key.split("/")[1] == severity:
                out[key] = out.get(key, 0) + n
    return dict(sorted(out.items()))


def summarize(results: Sequence[RunResult], page_within_s: float) -> dict[str, Any]:
    """The JSON contract of ``ragmon alerts simulate --out``, per severity."""
    # false pages: stationary runs only (every metric's series; incident runs carry only their metric)
    stationary = [r for r in results if r.incident.kind == "none"]
    exposure_days = sum(r.measured_s for r in stationary) / DAY
    out: dict[str, Any] = {
        "pipelines_simulated": len(results),
        "measured_pipeline_days": round(exposure_days, 2),
        "judged_per_hour": round(float(np.mean([r.judged_per_hour for r in results])), 1) if results else 0.0,
        "page_within_minutes": page_within_s / 60.0,
        "severities": {},
    }
    for severity in SEVERITIES:
        events = sum(r.false_pages.get(severity, 0) for r in stationary)
        measured = exposure_days > 0  # no stationary case run: no false-page number (JSON null)
        lo, hi = rate_ci95(events, exposure_days) if measured else (math.nan, math.nan)
        entry: dict[str, Any] = {
            "false_pages_per_30d": round(30.0 * events / exposure_days, 3) if measured else None,
            "false_pages_per_30d_ci95": [round(lo, 3), round(hi, 3)] if measured else None,
            "false_pages": events,
            "steps": {},
        }
        entry["false_pages_by_alert"] = _counts_of(severity, (r.by_alert for r in stationary))
        # which windows started them (one page may start in several windows at once)
        entry["false_windows_by_alert"] = _counts_of(severity, (r.by_window for r in stationary))
        for kind in ("step", "drift"):
            sizes = sorted({r.incident.size for r in results if r.incident.kind == kind})
            for size in sizes:
                runs = [r for r in results if r.incident.kind == kind and r.incident.size == size]
                delays = [r.first_page_s.get(severity, math.inf) for r in runs]
                within = sum(1 for d in delays if d <= page_within_s)
                key = f"{size:.2f}" if kind == "step" else f"drift_{size:.2f}"
                bucket = "steps" if kind == "step" else "drifts"
                entry.setdefault(bucket, {})[key] = {
                    "runs": len(runs),
                    "delays_minutes": [None if not math.isfinite(d) else round(d / 60.0, 1) for d in delays],
                    "p_detect": round(within / len(runs), 3),
                    "p_detect_ci95": [round(x, 3) for x in proportion_ci95(within, len(runs))],
                    "median_minutes": delay_quantile_minutes(delays, 0.5),
                    "p90_minutes": delay_quantile_minutes(delays, 0.9),
                    "never_paged": sum(1 for d in delays if not math.isfinite(d)),
                    # the simulated clock's time of day at the incident (traffic peaks at 15:00, ebbs at 03:00)
                    "start_hours": [round(r.incident.start_s % DAY / 3600.0, 2) for r in runs],
                    "within_by_start": _within_by_start(runs, delays, page_within_s),
                }
        out["severities"][severity] = entry
    # the contract's top level: the page (critical)
    page = out["severities"]["critical"]
    out["false_pages_per_30d"] = page["false_pages_per_30d"]
    out["steps"] = page["steps"]
    tails = summarize_tails(results)
    if tails is not None:
        out["tails"] = tails
    return out


def every_alert(rules: dict[str, Any], report: dict[str, Any], simulated: set[str]) -> dict[str, Any]:
    """Every alert of the rules file: its false firings per pipeline per 30 days (warnings and pages
    together, on stationary traffic) where this simulation evaluated it, else why not."""
    names = sorted({rule["alert"] for group in rules.get("groups", []) for rule in group.get("rules", [])
                    if "alert" in rule})
    days = report.get("measured_pipeline_days") or 0.0
    out: dict[str, Any] = {}
    for name in names:
        if name in simulated:
            if not days:
                out[name] = {"simulated": True, "false_per_30d": None, "why": "no stationary case run"}
                continue
            counts = {sev: sum(n for key, n in report["severities"][sev]["false_pages_by_alert"].items()
                               if key.split("/")[0] == name) for sev in SEVERITIES}
            total = sum(counts.values())
            lo, hi = rate_ci95(total, days)
            # each severity is its own rule (a warning and a page route apart): each has its own rate
            out[name] = {"simulated": True, "false": counts, "false_per_30d": round(30.0 * total / days, 3),
                         "false_per_30d_ci95": [round(lo, 3), round(hi, 3)],
                         "false_per_30d_by_severity": {sev: round(30.0 * n / days, 3) for sev, n in counts.items()}}
        else:
            why = NOT_SIMULATED.get(name) or (
                "simulated by `ragmon alerts simulate --latency`" if name in LATENCY_ALERTS else
                "simulated by `ragmon alerts simulate LABELS.jsonl` (judge scores)" if name.startswith("Ragmon")
                and not name.startswith("RagmonEvaluator") else
                "a declared evaluator's pass share: no labelled rows carry its verdicts")
            out[name] = {"simulated": False, "why": why}
    return out


def proportion_ci95(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson's 95 % interval of a share of k in n runs (sound at 0 and n, unlike the normal one)."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def table(report: dict[str, Any]) -> str:
    """Markdown table: one row per severity, false pages then each step and drift."""
    steps = sorted(report["severities"]["critical"].get("steps", {}))
    drifts = sorted(report["severities"]["critical"].get("drifts", {}))
    head = ["severity", "false pages / 30d [95% CI]"]
    head += [f"+{float(s) * 100:.0f} pts: paged ≤{report['page_within_minutes']:.0f} min, median, p90" for s in steps]
    head += [f"drift +{float(d.split('_')[1]) * 100:.0f} pts/day: paged, median" for d in drifts]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for severity in SEVERITIES:
        e = report["severities"][severity]
        if e["false_pages_per_30d"] is None:
            row = [severity, "not run (no stationary case)"]
        else:
            lo, hi = e["false_pages_per_30d_ci95"]
            row = [severity, f"{e['false_pages_per_30d']:.2f} [{lo:.2f}, {hi:.2f}]"]
        for s in steps:
            x = e["steps"][s]
            row.append(f"{x['p_detect'] * 100:.0f} %, {_fmt(x['median_minutes'])}, {_fmt(x['p90_minutes'])}")
        for d in drifts:
            x = e["drifts"][d]
            row.append(f"{x['p_detect'] * 100:.0f} %, {_fmt(x['median_minutes'])}")
        lines.append("| " + " | ".join(row) + " |")
    if "tails" in report:
        pooled = report["tails"]["all"]
        ratios = ", ".join(f"z > {level}: {pooled['above'][level]} ({pooled['ratio'][level]:.2f}× the normal tail)"
                           for level in pooled["above"])
        lines += ["", f"Test statistics over {pooled['points']:,} measured evaluations: {ratios}"]
    return "\n".join(lines)


def _fmt(minutes: float | None) -> str:
    return "never" if minutes is None else f"{minutes:.0f} min"
