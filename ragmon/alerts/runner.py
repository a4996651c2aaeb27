"""One simulation: cases x runs x pipelines through the traffic model, then promtool, then counts.

Each simulated pipeline run becomes its own ``pipeline`` label in one promtool test per case (or per
``chunk`` pipelines of a case, for a fleet), so Prometheus evaluates all of them in one pass; cases run
in parallel (``jobs`` promtool processes), and the chunks of a case share the jobs the cases leave over
(one fleet case on 2 cores: two chunks at once). With ``Settings.latency`` set, the pipelines are latency
series instead (``latency.py``) and the retrieval latency alerts are evaluated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import semconv as sc
from .answers import PromtoolAnswers
from .cases import Case
from .latency import LatencyModel, simulate_latency
from .latency import counters as latency_counters
from .pools import CONTRADICTIONS, Pools
from .promtool import (
    EPISODE_QUERIES,
    LATENCY_SERIES,
    QUALITY_SERIES,
    Episode,
    SeriesSet,
    alert_series,
    drop_z,
    group_order_of,
    quality_rules,
    run_promtool,
    tail_columns,
    test_file,
)
from .traffic import DAY, Incident, Sampling, TrafficModel, simulate_pipeline

COUNTER_NAMES = {  # what the agent exports, by the traffic model's counter fields
    "count": "ragmon_score_ratio_count",
    "total": "ragmon_score_ratio_sum",
    "squares": "ragmon_score_squared_ratio_total",
    "failures": "ragmon_score_failures_total",
}
CONTRADICTION_COUNTERS = {  # the contradiction share's counters: no metric label
    "count": f"{sc.M_ANSWERS_CHECKED}_total",
    "failures": f"{sc.M_ANSWERS_CONTRADICTING}_total",
}
# promtool evaluates every group at one interval from t=0. The shipped quality group runs every
# minute; at 1m a simulated pipeline-fortnight costs ~30 s of promtool on these 2-core machines, at
# 5m ~5x less, so simulations evaluate every 5 minutes (time to page is then known to 5 minutes, and
# `for: 10m` holds over 3 evaluations instead of 11). --evaluation-interval 60 gives the exact cadence.
EVALUATION_S = 300.0


@dataclass(frozen=True, slots=True)
class RunResult:
    case: str
    pipeline: str
    incident: Incident
    measured_s: float  # seconds measured before the incident (false-page exposure)
    judged_per_hour: float
    requests_per_hour: float
    false_pages: dict[str, int]  # severity -> episodes before the incident (measured period)
    first_page_s: dict[str, float]  # severity -> seconds from the incident to the first page (inf: none)
    pages_after: dict[str, int]
    by_alert: dict[str, int] = field(default_factory=dict)  # "alertname/severity/metric" -> false pages
    # "alertname/severity/metric/window" -> false episodes of that window (a page may start in several)
    by_window: dict[str, int] = field(default_factory=dict)
    # with Settings.tail_levels: "record/metric" -> {"points": evaluations measured, "<level>": those above it}
    tails: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Settings:
    traffic: TrafficModel
    sampling: Sampling
    base_share: float
    thresholds: Mapping[str, float]
    error_rates: Mapping[str, tuple[float, float]]  # metric -> (sensitivity, specificity)
    score_gaps: Mapping[str, float]  # metric -> the judge's score gap (ragmon_judge_score_gap_ratio)
    judge: str
    incident_metric: str | None
    runs: int
    pipelines: int
    seed: int
    jobs: int = 2
    evaluation_s: float = EVALUATION_S
    chunk: int = 20  # simulated pipelines per promtool process (a fleet is split)
    latency: LatencyModel | None = None  # simulate retrieval latency instead of judge scores
    # levels at which each test statistic's tail is counted while measured (ragmon/alerts/tails.py); () = none
    tail_levels: tuple[float, ...] = ()


def pipeline_rng(seed: int, case: Case, run: int, pipeline: int) -> np.random.Generator:
    """The random stream of one simulated pipeline: its incident and its traffic. A pipeline's draws depend on
    the seed, the case, the run and its index only, so any one can be replayed alone."""
    return np.random.default_rng([seed, sum(ord(c) * (i + 1) for i, c in enumerate(case.name)), run, pipeline])


def simulate_case(pools: Pools, case: Case, settings: Settings, rules: dict[str, Any],
                  workdir: Path | None = None, chunk_jobs: int = 1,
                  answers: PromtoolAnswers | None = None) -> list[RunResult]:
    """One case's runs; its chunks of pipelines go to ``chunk_jobs`` promtool processes at once (a chunk
    answered before, in ``answers``, is not asked again)."""
    traffic = settings.traffic
    warmup_s = traffic.warmup_days * DAY
    end_s = traffic.total_s
    youden = {m: se + sp - 1.0 for m, (se, sp) in settings.error_rates.items()}
    sets: list[SeriesSet] = []
    meta: dict[str, tuple[Incident, float, float]] = {}
    hours = traffic.total_s / 3600.0
    for run in range(settings.runs):
        for p in range(settings.pipelines):
            rng = pipeline_rng(settings.seed, case, run, p)
            incident = case.incident(rng, warmup_s, end_s)
            name = f"{case.name}-r{run:02d}-p{p:03d}"
            if settings.latency is not None:
                lat = simulate_latency(traffic, settings.latency, incident, rng)
                series: dict[str, dict[str, Any]] = {"": latency_counters(lat)}
                n_scrapes, judged, requests = len(lat.count), 0, lat.requests
            else:
                sim = simulate_pipeline(pools, traffic, settings.sampling, incident, settings.incident_metric,
                                        settings.base_share, settings.thresholds, youden, rng)
                n_scrapes = len(next(iter(sim.counters.values())).count)
                # incidents are measured on their metric only (the other metrics' series cost promtool time
                # and their false pages are counted on stationary traffic)
                kept = {m: c for m, c in sim.counters.items()
                        if case.kind == "none" or m == settings.incident_metric}
                series, judged, requests = _series(kept), sim.judged, sim.requests
            phases = []
            for i in range(n_scrapes):
                t = (i + 1) * traffic.scrape_s
                phases.append(0 if t < warmup_s else 2 if t >= incident.start_s else 1)
            sets.append(SeriesSet(pipeline=name, judge=settings.judge, counters=series, phases=[0, *phases]))
            measured = min(incident.start_s, end_s) - warmup_s
            meta[name] = (incident, measured, judged / hours)
            meta[name + "#req"] = (incident, measured, requests / hours)
    gauges = {
        "ragmon_judge_sensitivity_ratio": {(settings.judge, m): se for m, (se, _sp) in settings.error_rates.items()},
        "ragmon_judge_specificity_ratio": {(settings.judge, m): sp for m, (_se, sp) in settings.error_rates.items()},
        "ragmon_judge_score_gap_ratio": {(settings.judge, m): gap for m, gap in settings.score_gaps.items()},
    }
    measured_total = end_s - warmup_s
    reads = LATENCY_SERIES if settings.latency is not None else QUALITY_SERIES
    kept_rules = quality_rules(rules, series=reads)
    false_q: list[Episode] = []
    first_q: list[Episode] = []
    after_q: list[Episode] = []
    window_q: list[Episode] = []
    columns = tail_columns(settings.tail_levels)
    drop_level = drop_z(kept_rules)  # the mean's drop is also counted against its skew limit, on this scale
    tail_q: list[list[Episode]] = [[] for _ in columns]
    size = max(1, settings.chunk)
    chunks = [sets[start:start + size] for start in range(0, len(sets), size)]

    def evaluate(chunk: list[SeriesSet]) -> list[list[Episode]]:
        def document(rule_file: Path) -> dict[str, Any]:
            return test_file(rule_file, chunk, gauges, traffic.scrape_s, settings.evaluation_s, end_s,
                             measured_total, tail_levels=settings.tail_levels, tail_z=drop_level,
                             group_order=group_order_of(kept_rules))

        return run_promtool(kept_rules, document, workdir=workdir, answers=answers,
                            kinds=EPISODE_QUERIES + len(tail_q))

    # each chunk is its own promtool test, so they may run side by side; map keeps their order
    with ThreadPoolExecutor(max_workers=max(1, min(chunk_jobs, len(chunks)))) as pool:
        for f_q, s_q, a_q, w_q, *t_q in pool.map(evaluate, chunks):
            window_q += w_q
            false_q += f_q
            first_q += s_q
            after_q += a_q
            for level_q, got in zip(tail_q, t_q, strict=True):
                level_q += got
    # an alert without a metric label (the contradiction rise) is known by the counters it reads
    series_of = {name: (CONTRADICTIONS if what == sc.M_ANSWERS_CONTRADICTING else "")
                 for name, what in alert_series(kept_rules, reads).items()}

    def metric_of(e: Episode) -> str:
        return e.metric or series_of.get(e.alertname, "")

    results = []
    for s in sets:
        incident, measured, judged_per_hour = meta[s.pipeline]
        false_pages: dict[str, int] = {}
        by_alert: dict[str, int] = {}
        for e in _of(false_q, s.pipeline):
            false_pages[e.severity] = false_pages.get(e.severity, 0) + int(e.value)
            key = f"{e.alertname}/{e.severity}/{metric_of(e)}"
            by_alert[key] = by_alert.get(key, 0) + int(e.value)
        by_window: dict[str, int] = {}
        for e in _of(window_q, s.pipeline):
            key = f"{e.alertname}/{e.severity}/{metric_of(e)}/{e.window or '-'}"
            by_window[key] = by_window.get(key, 0) + int(e.value)
        first: dict[str, float] = {}
        for e in _of(first_q, s.pipeline):
            delay = e.value - incident.start_s
            if metric_of(e) == (settings.incident_metric or metric_of(e)) and delay >= 0:
                first[e.severity] = min(first.get(e.severity, math.inf), delay)
        after: dict[str, int] = {}
        for e in _of(after_q, s.pipeline):
            after[e.severity] = after.get(e.severity, 0) + int(e.value)
        tails: dict[str, dict[str, int]] = {}
        names = list(dict.fromkeys(column for _window, _level, column in columns))
        for (_window, _level, column), samples in zip(columns, tail_q, strict=True):
            for e in _of(samples, s.pipeline):
                counts = tails.setdefault(f"{e.record}/{e.metric or CONTRADICTIONS}", {}.fromkeys(names, 0))
                counts[column] += int(e.value)
        results.append(RunResult(
            case=case_name_of(s.pipeline), pipeline=s.pipeline, incident=incident, measured_s=measured,
            judged_per_hour=judged_per_hour, requests_per_hour=meta[s.pipeline + "#req"][2],
            false_pages=false_pages, first_page_s=first, pages_after=after, by_alert=by_alert,
            by_window=by_window, tails=tails,
        ))
    return results


def _series(counters: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per simulated series, the exported counter names and their values ("" = no metric label)."""
    out: dict[str, dict[str, Any]] = {}
    for metric, c in counters.items():
        if metric == CONTRADICTIONS:
            out[""] = {name: getattr(c, field) for field, name in CONTRADICTION_COUNTERS.items()}
        else:
            out[metric] = {name: getattr(c, field) for field, name in COUNTER_NAMES.items()}
    return out


def case_name_of(pipeline: str) -> str:
    return pipeline.split("-r", 1)[0]


def _of(samples: list[Episode], pipeline: str) -> list[Episode]:
    return [e for e in samples if e.pipeline == pipeline]


def simulate(pools: Pools, cases: tuple[Case, ...], settings: Settings, rules: dict[str, Any],
             workdir: Path | None = None, answers: PromtoolAnswers | None = None) -> list[RunResult]:
    """Every case; cases run ``settings.jobs`` at a time (simulation in Python, evaluation in promtool), and
    the jobs the cases leave over evaluate a case's chunks side by side. With ``answers``, each chunk's
    promtool output is kept, and a chunk asked before is read back (a stopped run resumes)."""
    jobs = max(1, settings.jobs)
    chunk_jobs = max(1, jobs // max(1, len(cases)))

    def one(case: Case) -> list[RunResult]:
        return simulate_case(pools, case, settings, rules, workdir, chunk_jobs, answers)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        parts = list(pool.map(one, cases))
    return [r for part in parts for r in part]
