"""Bootstrap statistics for the evaluation report and the gate: pure, seeded, vectorised (numpy).

* :func:`bootstrap_mean` — the mean of per-question values with a **percentile bootstrap** 95%
  interval: draw ``n_resamples`` samples of size ``n`` with replacement, take each sample's mean,
  and report the 2.5th and 97.5th percentiles of those means (linear interpolation).
* :func:`paired_bootstrap` — the per-question delta ``d_i = current_i - baseline_i`` over the
  question ids both runs have a value for; its mean, the percentile interval of the resampled mean
  delta, and a two-sided bootstrap p-value for "the true mean delta is 0"::

      opposite = #{b : mean_b <= 0}   if mean(d) > 0
                 #{b : mean_b >= 0}   if mean(d) < 0
      p = min(1, 2 * (opposite + 1) / (n_resamples + 1))          (p = 1 when mean(d) == 0)

  The +1 keeps p above 0 (a finite number of resamples cannot prove p = 0). Like every bootstrap
  test it is optimistic for very few questions; with fewer than 2 pairs there is no p-value.

Missing values: None and non-finite floats (NaN, inf) are skipped — they mean "not computable".
Edge cases: no values -> mean and interval None; one value -> the degenerate interval (x, x).
Every call with the same ``seed`` and the same number of values draws the same resamples, so a
report is reproducible. Resamples are drawn in chunks of at most ~4 M indices to bound memory
(:func:`resample_indices`, shared with :func:`bootstrap_statistic`, the interval of any statistic,
which ``ragmon calibrate`` uses: one bootstrap for the whole project).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

DEFAULT_RESAMPLES: Final = 2000
DEFAULT_SEED: Final = 0
_CI_PERCENTILES: Final = (2.5, 97.5)
_MAX_CHUNK_ELEMENTS: Final = 4_000_000

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class MeanEstimate:
    """A mean over ``n`` questions with its percentile-bootstrap 95% interval."""

    n: int
    mean: float | None
    ci95: tuple[float, float] | None

    def to_dict(self) -> dict[str, Any]:
        """``{"mean": x, "ci95": [lo, hi], "n": n}`` (None where not computable)."""
        return {"mean": self.mean, "ci95": None if self.ci95 is None else list(self.ci95), "n": self.n}


@dataclass(frozen=True, slots=True)
class PairedDelta:
    """``current - baseline`` over ``n`` shared question ids, with interval and two-sided p-value."""

    n: int
    current_mean: float | None
    baseline_mean: float | None
    mean_delta: float | None
    ci95: tuple[float, float] | None
    p_value: float | None


def _finite(values: Iterable[float | None]) -> FloatArray:
    return np.fromiter((v for v in values if v is not None and math.isfinite(v)), dtype=np.float64)


def resample_indices(n: int, n_resamples: int, seed: int) -> Iterator[npt.NDArray[np.intp]]:
    """Row indices of ``n_resamples`` with-replacement samples of ``n`` rows, in chunks (one 2-D array
    of at most ~4 M indices each): the one resampling scheme of ragmon's bootstraps. The draws do not
    depend on the chunking, so the same ``seed`` always gives the same resamples."""
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    rng = np.random.default_rng(seed)
    chunk = max(1, _MAX_CHUNK_ELEMENTS // max(n, 1))
    for start in range(0, n_resamples, chunk):
        stop = min(start + chunk, n_resamples)
        yield rng.integers(0, n, size=(stop - start, n), dtype=np.intp)


def _resampled_means(values: FloatArray, n_resamples: int, seed: int) -> FloatArray:
    """Means of ``n_resamples`` with-replacement samples of ``values`` (all the same size)."""
    means = np.empty(n_resamples, dtype=np.float64)
    start = 0
    for idx in resample_indices(values.shape[0], n_resamples, seed):
        means[start : start + idx.shape[0]] = values[idx].mean(axis=1)
        start += idx.shape[0]
    return means


def bootstrap_statistic(
    statistic: Callable[[npt.NDArray[np.intp]], float], n: int, *, n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED, alpha: float = 0.05,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of any statistic of ``n`` rows, given as a function of the
    resampled row indices (``ragmon calibrate``: ROC AUC, balanced accuracy, kappa of (label, score)
    pairs). Resamples where the statistic is undefined (NaN) are dropped; None when none is defined."""
    if n < 1:
        return None
    values = [v for idx in resample_indices(n, n_resamples, seed) for row in idx
              if not math.isnan(v := statistic(row))]
    if not values:
        return None
    lo, hi = np.quantile(values, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(lo), float(hi)


def _interval(means: FloatArray) -> tuple[float, float]:
    lo, hi = np.percentile(means, _CI_PERCENTILES)
    return float(lo), float(hi)


def bootstrap_mean(
    values: Iterable[float | None], *, n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> MeanEstimate:
    """Mean of the finite values with a percentile-bootstrap 95% interval (see the module docstring)."""
    data = _finite(values)
    n = int(data.shape[0])
    if n == 0:
        return MeanEstimate(n=0, mean=None, ci95=None)
    mean = float(data.mean())
    if n == 1:
        return MeanEstimate(n=1, mean=mean, ci95=(mean, mean))
    return MeanEstimate(n=n, mean=mean, ci95=_interval(_resampled_means(data, n_resamples, seed)))


def bootstrap_ci(
    values: Iterable[float | None], *, n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> tuple[float, float] | None:
    """Only the 95% interval of :func:`bootstrap_mean`; None when there is no value."""
    return bootstrap_mean(values, n_resamples=n_resamples, seed=seed).ci95


def _p_value(mean_delta: float, means: FloatArray) -> float:
    if mean_delta == 0.0:
        return 1.0
    opposite = int(np.count_nonzero(means <= 0.0 if mean_delta > 0.0 else means >= 0.0))
    return min(1.0, 2.0 * (opposite + 1) / (int(means.shape[0]) + 1))


def paired_bootstrap(
    current: Mapping[str, float | None],
    baseline: Mapping[str, float | None],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> PairedDelta:
    """Paired bootstrap of ``current - baseline`` over ids with a finite value in both mappings.

    Ids are paired in sorted order, so the result does not depend on mapping order.
    """
    shared = sorted(
        key
        for key, value in current.items()
        if value is not None
        and math.isfinite(value)
        and key in baseline
        and (other := baseline[key]) is not None
        and math.isfinite(other)
    )
    n = len(shared)
    if n == 0:
        return PairedDelta(n=0, current_mean=None, baseline_mean=None, mean_delta=None, ci95=None, p_value=None)
    cur = np.fromiter((current[key] for key in shared), dtype=np.float64, count=n)
    base = np.fromiter((baseline[key] for key in shared), dtype=np.float64, count=n)
    deltas = cur - base
    mean_delta = float(deltas.mean())
    ci95: tuple[float, float] = (mean_delta, mean_delta)
    p_value: float | None = None
    if n > 1:
        means = _resampled_means(deltas, n_resamples, seed)
        ci95, p_value = _interval(means), _p_value(mean_delta, means)
    return PairedDelta(
        n=n,
        current_mean=float(cur.mean()),
        baseline_mean=float(base.mean()),
        mean_delta=mean_delta,
        ci95=ci95,
        p_value=p_value,
    )
