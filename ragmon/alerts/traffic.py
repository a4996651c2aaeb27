"""Simulated traffic of one pipeline: requests, the agent's sampling, judged rows, counters.

Per simulated minute: requests arrive (Poisson, with a diurnal curve); the agent's sampler
decides the judging rate (a fixed rate, or power-based sampling — the agent's own
``PowerSampler`` on a simulated clock); the judged traces are real labelled rows drawn by
question group (whose mix moves with the hour of day) and by label (the true failing share of
each group, plus the incident); each row's judge scores increment the same counters the agent
increments for a rate-sampled trace (``ragmon_score_ratio_{sum,count}``,
``ragmon_score_squared_ratio_total``, ``ragmon_score_failures_total``; for the contradiction share
``ragmon_answers_checked_total`` and ``ragmon_answers_contradicting_total``, as ``count`` and
``failures``). The counters are "scraped" every ``scrape_s``.

The sampling decision of one trace is a hash of its id in the agent; over many traces that is a
Bernoulli draw with the rate, which is what is drawn here (binomially per minute): hashing
millions of random ids would cost minutes and change nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from .. import quality
from ..sampling.power import PowerSampler, PowerTarget
from .pools import CONTRADICTIONS, Pools

MINUTE = 60.0
DAY = 86_400.0
# The rules' baseline is the same window of each of the past 7 days (generate_rules.py SEASONAL_DAYS), and a long
# window waits while any of those days holds only part of it (a new pipeline: generate_rules.py _partial_day): 7
# days and the longest window (24 h) of warm-up give every measured window its whole baseline, a pipeline in its
# steady state. Under a day no window has any baseline, so nothing could page and a run would read as quiet.
WARMUP_DAYS = 8.0
MIN_WARMUP_DAYS = 1.0


@dataclass(frozen=True, slots=True)
class Incident:
    """A change of the true failing share of ``metric`` from ``start_s``: a step or a linear drift."""

    kind: str  # "none" | "step" | "drift"
    size: float = 0.0  # added to the failing share (0.10 = ten points)
    start_s: float = math.inf
    drift_s: float = DAY  # a drift reaches ``size`` after this long

    def added_share(self, t: float) -> float:
        if self.kind == "none" or t < self.start_s:
            return 0.0
        if self.kind == "drift":
            return self.size * min(1.0, (t - self.start_s) / self.drift_s)
        return self.size


@dataclass(frozen=True, slots=True)
class TrafficModel:
    rate_per_s: float  # mean requests per second of the pipeline
    days: float  # measured days, after the warm-up
    warmup_days: float = WARMUP_DAYS  # history before measuring (a week of baseline, whole for every window)
    diurnal: float = 0.6  # request rate swings by +-60 % over the day
    mix_shift: float = 0.8  # log-weight amplitude of each group's hour-of-day swing
    scrape_s: float = 300.0

    @property
    def total_s(self) -> float:
        return (self.warmup_days + self.days) * DAY

    def load(self, t: float) -> float:
        hour = (t % DAY) / 3600.0
        return self.rate_per_s * (1.0 + self.diurnal * math.sin(2 * math.pi * (hour - 9.0) / 24.0))


@dataclass(frozen=True, slots=True)
class Sampling:
    """The agent's sampling settings: a fixed rate, or power-based (``detect_drop`` set)."""

    rate: float = 1.0
    detect_drop: float | None = None
    alpha: float = 0.05
    power: float = 0.8
    window_s: float = 3600.0
    min_rate: float = 0.0
    max_rate: float = 1.0


@dataclass
class Counters:
    """Cumulative counters of one (pipeline, metric), one value per scrape."""

    count: list[float] = field(default_factory=list)
    total: list[float] = field(default_factory=list)
    squares: list[float] = field(default_factory=list)
    failures: list[float] = field(default_factory=list)


@dataclass
class PipelineRun:
    counters: dict[str, Counters]
    judged: int = 0
    requests: int = 0
    rates: list[float] = field(default_factory=list)  # judging rate at each scrape


class _GroupDraw:
    """Rows by (group, failing?) for one metric, and each group's own failing rate."""

    def __init__(self, pools: Pools, metric: str, base_share: float) -> None:
        flags = pools.failing_flags(metric)
        groups = pools.groups
        self.groups = groups
        self.rows: dict[tuple[str, int], np.ndarray] = {}
        every = {0: [], 1: []}  # type: dict[int, list[int]]
        for i, (row, flag) in enumerate(zip(pools.rows, flags, strict=True)):
            if flag is None:
                continue
            every[flag].append(i)
            self.rows.setdefault((row.group, flag), np.array([], dtype=np.int64))
        for g in groups:
            for flag in (0, 1):
                idx = [i for i in every[flag] if pools.rows[i].group == g]
                self.rows[(g, flag)] = np.array(idx or every[flag], dtype=np.int64)
        # each group's failing rate relative to the data's, scaled so that the mix mean is base_share
        overall = len(every[1]) / max(1, len(every[0]) + len(every[1]))
        self.share: dict[str, float] = {}
        for g in groups:
            n_bad = sum(1 for i in every[1] if pools.rows[i].group == g)
            n_all = n_bad + sum(1 for i in every[0] if pools.rows[i].group == g)
            relative = (n_bad / n_all) / overall if n_all and overall > 0 else 1.0
            self.share[g] = min(0.95, base_share * relative)


def group_weights(groups: tuple[str, ...], t: float, amplitude: float) -> np.ndarray:
    """Mix of question groups at time ``t``: each group peaks at its own hour of the day."""
    hour = (t % DAY) / 3600.0
    phases = np.arange(len(groups)) * (2 * math.pi / max(1, len(groups)))
    logw = amplitude * np.sin(2 * math.pi * hour / 24.0 + phases)
    w = np.exp(logw)
    return np.asarray(w / w.sum(), dtype=np.float64)


def simulate_pipeline(
    pools: Pools,
    traffic: TrafficModel,
    sampling: Sampling,
    incident: Incident,
    incident_metric: str | None,
    base_share: float,
    thresholds: Mapping[str, float],
    youden: Mapping[str, float],
    rng: np.random.Generator,
    on_minute: Callable[[float], None] | None = None,
) -> PipelineRun:
    """One pipeline over warm-up + measured days; counters of every metric the judge scored."""
    metrics = pools.metrics()
    scores = np.array([[np.nan if (v := r.value(m)) is None else v for m in metrics] for r in pools.rows],
                      dtype=np.float64)
    draw_metric = incident_metric or (pools.labelled_metrics() or metrics)[0]
    labelled = draw_metric in pools.labelled_metrics()
    draw = _GroupDraw(pools, draw_metric, base_share) if labelled else None
    groups = pools.groups
    by_group = {g: np.array([i for i, r in enumerate(pools.rows) if r.group == g]) for g in groups}
    # a contradiction's value is 0 (1: a clean answer), so it "fails" under 0.5
    thr = np.array([0.5 if m == CONTRADICTIONS else thresholds.get(m, quality.metric(m).threshold) for m in metrics])
    fed = [j for j, m in enumerate(metrics) if m != CONTRADICTIONS]  # the agent's sampler sees score metrics
    scale = np.array([1.0 / quality.correction_divisor(youden.get(m)) for m in metrics])

    now = [0.0]
    power: PowerSampler | None = None
    if sampling.detect_drop is not None:
        target = PowerTarget(drop=sampling.detect_drop, window_s=sampling.window_s, power=sampling.power,
                             alpha=sampling.alpha, min_rate=sampling.min_rate, max_rate=sampling.max_rate)
        power = PowerSampler(target, clock=lambda: now[0])
    key = ("sim", "pipeline")

    run = PipelineRun(counters={m: Counters() for m in metrics})
    acc = np.zeros((4, len(metrics)))  # count, sum, squares, failures since the start
    next_scrape = traffic.scrape_s
    t = 0.0
    while t < traffic.total_s:
        now[0] = t
        requests = int(rng.poisson(max(0.0, traffic.load(t)) * MINUTE))
        rate = power.rate_for(key) if power is not None else sampling.rate
        if power is not None and requests:
            power.observe_traffic(key, requests)
        judged = int(rng.binomial(requests, min(1.0, max(0.0, rate)))) if requests else 0
        run.requests += requests
        if judged:
            run.judged += judged
            weights = group_weights(groups, t, traffic.mix_shift)
            per_group = rng.multinomial(judged, weights)
            picked: list[np.ndarray] = []
            added = incident.added_share(t)
            for g, k in zip(groups, per_group, strict=True):
                if not k:
                    continue
                if draw is not None:
                    p_bad = min(1.0, max(0.0, draw.share[g] + added))
                    n_bad = int(rng.binomial(k, p_bad))
                    if n_bad:
                        picked.append(rng.choice(draw.rows[(g, 1)], n_bad))
                    if k - n_bad:
                        picked.append(rng.choice(draw.rows[(g, 0)], k - n_bad))
                else:
                    picked.append(rng.choice(by_group[g], k))
            values = scores[np.concatenate(picked)]
            present = ~np.isnan(values)
            filled = np.where(present, values, 0.0)
            fails = (filled < thr) & present
            acc[0] += present.sum(axis=0)
            acc[1] += filled.sum(axis=0)
            acc[2] += (filled * filled).sum(axis=0)
            acc[3] += fails.sum(axis=0)
            if power is not None:
                # the agent feeds its sampler each metric's failing flag in the alert's unit (÷ J)
                for j in fed:
                    if present[:, j].any():
                        power.observe_batch(key, metrics[j], (fails[present[:, j], j] * scale[j]).tolist())
        t += MINUTE
        if on_minute is not None:
            on_minute(t)
        if t >= next_scrape:
            next_scrape += traffic.scrape_s
            run.rates.append(rate)
            for j, m in enumerate(metrics):
                c = run.counters[m]
                c.count.append(acc[0, j])
                c.total.append(acc[1, j])
                c.squares.append(acc[2, j])
                c.failures.append(acc[3, j])
    return run
