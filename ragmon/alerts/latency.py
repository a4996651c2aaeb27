"""Simulated retrieval latency of one pipeline: every request's duration into the agent's histogram.

The latency alerts (``RagmonRetrievalLatencyHigh``: the P95 over 5 minutes of all traffic, from the
histogram buckets, above 0.5 s / 1 s for 10 minutes) read ``ragmon_retrieval_latency_seconds``, which
the agent fills from every trace, sampled or not. Here every simulated request draws a retrieval
duration from a log-normal distribution (a healthy vector store: median ``median_s``, spread
``sigma``; P95 = median x e^(1.645 sigma)), and an incident multiplies durations by ``1 + size``
(a step: the store got slower). The cumulative bucket counts are scraped like the score counters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .traffic import MINUTE, Incident, TrafficModel

# the agent's latency histogram buckets (ragmon/export/metrics.py LATENCY_BUCKETS; a test keeps them equal)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.75, 1.0,
                   1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 30.0)
BUCKET = "ragmon_retrieval_latency_seconds_bucket"
COUNT = "ragmon_retrieval_latency_seconds_count"


MEDIAN_S = 0.12
SIGMA = 0.6  # P95 = 0.12 x e^(1.645 x 0.6) = 0.32 s: healthy, under the 0.5 s warning


@dataclass(frozen=True, slots=True)
class LatencyModel:
    median_s: float = MEDIAN_S
    sigma: float = SIGMA

    @property
    def p95_s(self) -> float:
        return float(self.median_s * np.exp(1.645 * self.sigma))


@dataclass
class LatencyRun:
    buckets: dict[float, list[float]] = field(default_factory=dict)  # le -> cumulative count per scrape
    count: list[float] = field(default_factory=list)
    requests: int = 0


def simulate_latency(traffic: TrafficModel, model: LatencyModel, incident: Incident,
                     rng: np.random.Generator) -> LatencyRun:
    """One pipeline's retrieval latency histogram over warm-up + measured days."""
    edges = np.array([*LATENCY_BUCKETS, np.inf])
    acc = np.zeros(len(edges))
    run = LatencyRun(buckets={le: [] for le in edges.tolist()})
    next_scrape = traffic.scrape_s
    t = 0.0
    while t < traffic.total_s:
        requests = int(rng.poisson(max(0.0, traffic.load(t)) * MINUTE))
        if requests:
            run.requests += requests
            slower = 1.0 + incident.added_share(t)
            durations = model.median_s * slower * np.exp(model.sigma * rng.standard_normal(requests))
            # cumulative buckets: a duration counts in every bucket whose bound it does not exceed
            acc += np.searchsorted(np.sort(durations), edges, side="right")
        t += MINUTE
        if t >= next_scrape:
            next_scrape += traffic.scrape_s
            for le, value in zip(edges.tolist(), acc.tolist(), strict=True):
                run.buckets[le].append(value)
            run.count.append(float(acc[-1]))
    return run


def counters(run: LatencyRun) -> dict[str, list[float]]:
    """Exported series names (with their ``le``) -> values per scrape."""
    out = {f'{BUCKET}{{le="{"+Inf" if le == float("inf") else f"{le:g}"}"}}': values
           for le, values in run.buckets.items()}
    out[COUNT] = run.count
    return out
