"""The exact level of the drop alerts' rise test: how often it fires on a share that did not change.

The drop alerts compare a window's failing share (x of n) with the same windows of the past week
(y of m) and page when the test statistic exceeds z (quality.alert_alpha: 4.08 for one pipeline). The
normal approximation behind z is poor on the small counts of a quiet pipeline: the share's
distribution is skewed, and the plain two-proportion z with a pooled variance fires several times
more often than its level. ``level`` sums the two binomial distributions exactly (both at the same
true share p: nothing changed) over every (x, y) for which a statistic fires, so each statistic's real
false-firing rate per test is known, not assumed. docs/alerts.md has the table; the shipped rules use
the arcsine statistic, which stays at or below its level where the plain z does not.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np

STATISTICS: Final = ("plain", "continuity", "arcsine")


def _pmf(n: int, p: float) -> np.ndarray:
    k = np.arange(n + 1, dtype=np.float64)
    log = (math.lgamma(n + 1) - np.array([math.lgamma(i + 1) + math.lgamma(n - i + 1) for i in range(n + 1)])
           + k * math.log(p) + (n - k) * math.log1p(-p))
    return np.asarray(np.exp(log), dtype=np.float64)


def statistic(name: str, x: np.ndarray, n: int, y: np.ndarray, m: int) -> np.ndarray:
    """The rise statistic of window x/n against baseline y/m (arrays broadcast)."""
    if name == "arcsine":  # Anscombe: variance 1/(4n) whatever the share
        a = np.arcsin(np.sqrt((x + 0.375) / (n + 0.75)))
        b = np.arcsin(np.sqrt((y + 0.375) / (m + 0.75)))
        return np.asarray(2.0 * (a - b) / math.sqrt(1.0 / n + 1.0 / m))
    pooled = (x + y) / (n + m)
    se = np.sqrt(np.maximum(pooled * (1.0 - pooled), 1e-4) * (1.0 / n + 1.0 / m))
    diff = x / n - y / m
    if name == "continuity":  # Yates: half a count off each share
        diff = diff - 0.5 * (1.0 / n + 1.0 / m)
    if name != "plain" and name != "continuity":
        raise ValueError(f"unknown statistic {name!r}; known: {', '.join(STATISTICS)}")
    return np.asarray(diff / se)


def level(name: str, n: int, m: int, p: float, z: float) -> float:
    """P(statistic > z) when window and baseline are binomial draws of the same share ``p``."""
    x = np.arange(n + 1, dtype=np.float64)[:, None]
    y = np.arange(m + 1, dtype=np.float64)[None, :]
    fires = statistic(name, x, n, y, m) > z
    return float((np.outer(_pmf(n, p), _pmf(m, p)) * fires).sum())


def mean_level(scores: np.ndarray, n: int, z: float, *, baseline_factor: int = 7, draws: int = 1_000_000,
               seed: int = 0, chunk: int = 100_000) -> float:
    """P(the mean test's drop z > ``z``) when the window's ``n`` scores and the baseline's come from the same
    ``scores`` (nothing changed), by Monte Carlo: the window's mean from ``n`` draws with replacement, the
    baseline's mean as a normal of its ``baseline_factor * n`` draws and its variance the scores' own (a
    week of samples: its skew and its variance's noise are small next to the window's). A mean of a few
    dozen skewed scores has a heavier low tail than the normal z assumes; this says by how much."""
    rng = np.random.default_rng(seed)
    values = np.asarray(scores, dtype=np.float64)
    mu, var = float(values.mean()), float(values.var())
    m = baseline_factor * n
    se = math.sqrt(max(var, 1e-12) * (1.0 / n + 1.0 / m))
    fired = 0
    for start in range(0, draws, chunk):
        size = min(chunk, draws - start)
        window = values[rng.integers(0, len(values), size=(size, n))].mean(axis=1)
        baseline = rng.normal(mu, math.sqrt(var / m), size=size)
        fired += int(np.count_nonzero((baseline - window) / se > z))
    return fired / draws
