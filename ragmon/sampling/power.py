"""Power-based sampling: judge each pipeline just often enough to see the rise you care about.

A drop alert (deploy/prometheus/generate_rules.py) compares the share of failing answers (score
below the metric's threshold) in the last window (1h) with the same hour of the previous 7 days,
with a one-sided two-proportion z test at level ``alpha`` (quality.alert_alpha(): few false pages
across many windows and metrics). Whether it sees a rise of ``D`` in the *true* failing share
depends on how many traces were judged in the window: the judge turns a rise of ``D`` into a rise
of ``D x J`` in the flagged share (J = sensitivity + specificity - 1, its measured error rates),
and the flagged share's standard error is ``sqrt(p (1 - p) / n)``. With ``sd`` the standard
deviation of a failing flag divided by J (the alert's corrected unit), the window needs about::

    n = ((z(1 - alpha) + z(power)) * sd / D)**2 * (1 + 1 / 7)

judged traces; the last factor is the baseline's own noise (seven windows). ``PowerSampler``
estimates each pipeline's ``sd`` (from the *rate* stream only: priority-sampled traces are a
biased population) and its traffic online, and sets its judging rate to
``n / (traffic x window)`` within ``[min_rate, max_rate]``. When the sum over pipelines exceeds
what the judge can take (token budget, concurrency), every pipeline's need is scaled by the same
factor, which spreads the loss evenly: all detectable rises grow by the same factor.

The drop alerts also test longer windows (6 h, 12 h and 24 h against the same windows of the past week)
for pipelines too quiet to show a rise within the hour. The rate is sized for the shortest window
(``window_s``) and capped at ``max_rate``; the plan then names the window that will catch the
target at that rate (``PipelinePlan.window_s``: the shortest of ``window_s`` and ``longer_windows_s``
whose sample detects ``drop``), and its ``detectable_drop`` is the rise that window detects — what
``ragmon_detectable_drop_ratio`` exports. A quiet pipeline is not judged less because a long window
could do with fewer traces: every judged trace makes the long window reach its test sooner.

The rate only moves the threshold of ``ragmon.sampling.in_sample``: the decision stays a hash of
the trace id, samples still nest, and replicas that see the same traffic choose the same rate.
With ``replicas`` agents sharing a pipeline's traffic (Kafka partitions, several sidecars), each
sees ``1/replicas`` of it; the rate is computed for the pipeline's total traffic.

Pure and synchronous; the clock is injected. Nothing here knows about Prometheus.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from statistics import NormalDist

from .. import quality

# a failing flag's typical standard deviation in the corrected unit (p = 0.3, J = 0.45: 0.46 / 0.45),
# used until a pipeline has its own estimate
PRIOR_SD = 1.0
PRIOR_WEIGHT = 30  # the prior counts as this many scores (shrinks early estimates toward PRIOR_SD)
BASELINE_WINDOWS = 7  # the drop alerts' baseline: the same hour of 7 days (generate_rules.py SEASONAL_DAYS)
UPDATE_EVERY_S = 60.0  # rates are recomputed at most this often (one rate per minute per pipeline)
CAPACITY_SAFETY = 0.8  # plan for this share of the judge's estimated capacity


def z_sum(alpha: float, power: float) -> float:
    """``z(1 - alpha) + z(power)``: how many standard errors a detectable rise spans (one-sided test)."""
    normal = NormalDist()
    return normal.inv_cdf(1.0 - alpha) + normal.inv_cdf(power)


def required_n(drop: float, sd: float, alpha: float, power: float, window_s: float,
               baseline_windows: float = BASELINE_WINDOWS) -> float:
    """Judged traces per window needed to detect ``drop`` in the window against the baseline.

    ``window_s`` is kept for callers that size by time; the baseline's noise depends only on how
    many windows it holds."""
    del window_s
    return (z_sum(alpha, power) * sd / drop) ** 2 * (1.0 + 1.0 / baseline_windows)


def detectable_drop(n: float, sd: float, alpha: float, power: float, window_s: float,
                    baseline_windows: float = BASELINE_WINDOWS) -> float:
    """The smallest true rise that ``n`` judged traces per window detect with ``power`` (inf for n=0)."""
    del window_s
    if n <= 0:
        return math.inf
    return z_sum(alpha, power) * sd * math.sqrt((1.0 + 1.0 / baseline_windows) / n)


@dataclass(frozen=True, slots=True)
class PowerTarget:
    """What the sampling must achieve: see a ``drop`` within ``window_s`` at ``alpha`` / ``power``."""

    drop: float = 0.05
    window_s: float = 3600.0
    power: float = 0.8
    alpha: float = 0.05
    min_rate: float = 0.0
    max_rate: float = 1.0
    replicas: int = 1
    # the rules' LONG_WINDOWS
    longer_windows_s: tuple[float, ...] = tuple(h * 3600.0 for h in quality.ALERT_WINDOWS_H[1:])

    @property
    def windows_s(self) -> tuple[float, ...]:
        """Every window the drop alerts test, shortest first."""
        return tuple(sorted({self.window_s, *self.longer_windows_s}))

    def catching_window(self, judged_per_s: float, sd: float) -> tuple[float, float]:
        """(window, detectable rise) for a judged rate: the shortest window whose sample detects
        ``drop``, else the longest window (with the rise it can detect)."""
        found = self.windows_s[-1]
        for w in self.windows_s:
            if detectable_drop(judged_per_s * w, sd, self.alpha, self.power, w) <= self.drop:
                found = w
                break
        return found, detectable_drop(judged_per_s * found, sd, self.alpha, self.power, found)

    def __post_init__(self) -> None:
        if not 0.0 < self.drop < 1.0:
            raise ValueError(f"drop must be in (0, 1), got {self.drop}")
        if not 0.0 < self.alpha < 1.0 or not 0.0 < self.power < 1.0:
            raise ValueError("alpha and power must be in (0, 1)")
        if not 0.0 <= self.min_rate <= self.max_rate <= 1.0:
            raise ValueError(f"need 0 <= min_rate <= max_rate <= 1, got {self.min_rate}, {self.max_rate}")
        if self.window_s <= 0 or self.replicas < 1 or any(w <= 0 for w in self.longer_windows_s):
            raise ValueError("windows must be > 0 and replicas >= 1")


@dataclass(frozen=True, slots=True)
class DetectSettings:
    """The power-sampling rows of the agent's settings table (``AgentConfig.section(DetectSettings)``):
    adaptive rates while ``detect_drop`` is set, else the sampler only reports the fixed rates."""

    detect_drop: float | None = None
    detect_within_s: float = 3600.0
    detect_power: float = 0.8
    detect_alpha: float = 0.05
    detect_min_rate: float = 0.0
    detect_max_rate: float = 1.0
    detect_replicas: int = 1

    @property
    def adaptive(self) -> bool:
        return self.detect_drop is not None

    def target(self) -> PowerTarget:
        """The target (a drop of 5 % when none is set: what the fixed rates are reported against)."""
        return PowerTarget(drop=self.detect_drop or 0.05, window_s=self.detect_within_s, power=self.detect_power,
                           alpha=self.detect_alpha, min_rate=self.detect_min_rate, max_rate=self.detect_max_rate,
                           replicas=self.detect_replicas)


class _Traffic:
    """Traces per second over the last window, from per-minute buckets (bounded memory)."""

    def __init__(self, window_s: float, now: float) -> None:
        self._bucket_s = 60.0
        self._buckets: dict[int, float] = {}
        self._keep = max(1, math.ceil(window_s / self._bucket_s))
        self._since = now

    def add(self, count: float, now: float) -> None:
        index = int(now // self._bucket_s)
        buckets = self._buckets
        if index in buckets:  # the usual case: the current minute
            buckets[index] += count
            return
        buckets[index] = 0.0 + count
        if len(self._buckets) > self._keep + 1:
            for old in sorted(self._buckets)[: len(self._buckets) - self._keep - 1]:
                del self._buckets[old]

    def per_second(self, now: float) -> float:
        start = now - self._keep * self._bucket_s
        total = sum(c for i, c in self._buckets.items() if (i + 1) * self._bucket_s > start)
        elapsed = min(self._keep * self._bucket_s, max(now - self._since, self._bucket_s))
        return total / elapsed


class _Moments:
    """Score mean and variance with exponential forgetting (time constant ``horizon_s``)."""

    def __init__(self, horizon_s: float) -> None:
        self._horizon = horizon_s
        self._w = self._s = self._ss = 0.0
        self._at: float | None = None

    def add(self, values: Iterable[float], now: float) -> None:
        if self._at is not None and now > self._at:
            decay = math.exp(-(now - self._at) / self._horizon)
            self._w, self._s, self._ss = self._w * decay, self._s * decay, self._ss * decay
        self._at = now
        for v in values:
            self._w += 1.0
            self._s += v
            self._ss += v * v

    @property
    def weight(self) -> float:
        return self._w

    def sd(self) -> float:
        """The estimated standard deviation, shrunk toward PRIOR_SD while there are few scores."""
        if self._w <= 0:
            return PRIOR_SD
        mean = self._s / self._w
        var = max(0.0, self._ss / self._w - mean * mean)
        shrunk = (self._w * var + PRIOR_WEIGHT * PRIOR_SD**2) / (self._w + PRIOR_WEIGHT)
        return math.sqrt(shrunk)


@dataclass(frozen=True, slots=True)
class PipelinePlan:
    """The decision for one pipeline at one update."""

    rate: float  # judging rate in [min_rate, max_rate]
    needed_rate: float  # the rate the target needs before bounds and budget (may exceed 1)
    traffic_per_s: float  # estimated traffic of the whole pipeline (all replicas)
    sd: float  # the largest estimated score standard deviation over its metrics
    judged_per_window: float  # expected judged traces per shortest window (all replicas) at ``rate``
    detectable_drop: float  # the rise the catching window's sample detects with the target's alpha and power
    window_s: float = 3600.0  # the window that catches the target at ``rate`` (else the longest window)

    @property
    def reaches_target(self) -> bool:
        return self.rate + 1e-12 >= self.needed_rate


class PowerSampler:
    """Per-pipeline judging rates sized by statistical power (see the module docstring).

    ``observe_traffic`` for every trace received, ``observe_scores`` for rate-stream scores,
    ``rate_for`` on every sampling decision. ``capacity_per_s`` returns the judged traces per
    second the judge can take (None = unbounded); it is asked at each update.
    """

    def __init__(
        self,
        target: PowerTarget,
        *,
        fixed: Callable[[Hashable], float] | None = None,
        capacity_per_s: Callable[[], float | None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
        update_every_s: float = UPDATE_EVERY_S,
        adaptive: bool = True,
        on_plan: Callable[[Hashable, PipelinePlan], None] | None = None,
    ) -> None:
        self.target = target
        self._fixed = fixed
        self._capacity = capacity_per_s
        self._clock = clock
        self._update_every = update_every_s
        self._adaptive = adaptive
        self._on_plan = on_plan
        self._traffic: dict[Hashable, _Traffic] = {}
        self._moments: dict[tuple[Hashable, str], _Moments] = {}
        self._metrics_of: dict[Hashable, set[str]] = {}
        self._plans: dict[Hashable, PipelinePlan] = {}
        self._updated_at: float | None = None

    @property
    def adaptive(self) -> bool:
        return self._adaptive

    def observe_traffic(self, key: Hashable, count: float = 1.0) -> None:
        now = self._clock()
        traffic = self._traffic.get(key)
        if traffic is None:
            traffic = self._traffic[key] = _Traffic(self.target.window_s, now)
        traffic.add(count, now)
        if self._updated_at is None or now - self._updated_at >= self._update_every:  # _maybe_update, inline
            self.update()

    def observe_scores(self, key: Hashable, scores: dict[str, float]) -> None:
        for metric, value in scores.items():
            self.observe_batch(key, metric, (value,))

    def observe_shares(self, key: Hashable, failing: Mapping[str, bool], youden: Mapping[str, float]) -> None:
        """One rate-sampled trace's failing flags, in the alerts' corrected unit (flag / J)."""
        for metric, flag in failing.items():
            self.observe_batch(key, metric, (float(flag) / quality.correction_divisor(youden.get(metric)),))

    def observe_batch(self, key: Hashable, metric: str, values: Iterable[float]) -> None:
        """Many rate-stream scores of one metric at once (simulations, benchmarks)."""
        now = self._clock()
        moments = self._moments.get((key, metric))
        if moments is None:
            moments = self._moments[(key, metric)] = _Moments(self.target.window_s * 24)
            self._metrics_of.setdefault(key, set()).add(metric)
        moments.add(values, now)

    def rate_for(self, key: Hashable) -> float:
        """The current judging rate of a pipeline (before the first update: ``max_rate`` when adaptive)."""
        plan = self._plans.get(key)
        if plan is not None:
            return plan.rate
        if not self._adaptive and self._fixed is not None:
            return self._fixed(key)
        return self.target.max_rate

    def rates(self) -> list[float]:
        return [p.rate for p in self._plans.values()]

    def plans(self) -> dict[Hashable, PipelinePlan]:
        return dict(self._plans)

    def update(self) -> dict[Hashable, PipelinePlan]:
        """Recompute every pipeline's plan now."""
        now = self._clock()
        self._updated_at = now
        t = self.target
        needs: dict[Hashable, tuple[float, float, float]] = {}  # key -> (traffic, sd, needed rate)
        for key, traffic in self._traffic.items():
            per_s = traffic.per_second(now) * t.replicas
            sd = max((self._moments[(key, m)].sd() for m in self._metrics_of.get(key, ())), default=PRIOR_SD)
            n = required_n(t.drop, sd, t.alpha, t.power, t.window_s)
            needed = n / (per_s * t.window_s) if per_s > 0 else math.inf
            needs[key] = (per_s, sd, needed)
        rates: dict[Hashable, float] = {}
        for key, (_per_s, _sd, needed) in needs.items():
            if self._adaptive:
                rates[key] = min(t.max_rate, max(t.min_rate, needed))
            else:
                rates[key] = self._fixed(key) if self._fixed is not None else t.max_rate
        capacity = self._capacity() if self._adaptive else None
        if capacity is not None:
            # judged traces/s this replica would send to the judge; scale every need by one factor
            demand = sum(needs[k][0] / t.replicas * r for k, r in rates.items())
            if demand > capacity * CAPACITY_SAFETY > 0:
                factor = capacity * CAPACITY_SAFETY / demand
                rates = {k: max(t.min_rate, r * factor) for k, r in rates.items()}
        plans = {}
        for key, (per_s, sd, needed) in needs.items():
            judged = per_s * t.window_s * rates[key]
            window, detectable = t.catching_window(per_s * rates[key], sd)
            plans[key] = PipelinePlan(
                rate=rates[key], needed_rate=needed, traffic_per_s=per_s, sd=sd, judged_per_window=judged,
                detectable_drop=detectable, window_s=window,
            )
        self._plans = plans
        if self._on_plan is not None:
            for key, plan in plans.items():
                self._on_plan(key, plan)
        return dict(plans)

    def _maybe_update(self, now: float) -> None:
        if self._updated_at is None or now - self._updated_at >= self._update_every:
            self.update()


class JudgeCost:
    """What one judged trace costs, as running averages (tokens, seconds), and from that the
    judged traces per second the judge can take: concurrency / seconds, token budget / tokens."""

    def __init__(self, smoothing: float = 0.05) -> None:
        self._a = smoothing
        self.tokens: float | None = None
        self.seconds: float | None = None

    def observe(self, tokens: int, seconds: float) -> None:
        if tokens > 0:
            self.tokens = tokens if self.tokens is None else self.tokens + self._a * (tokens - self.tokens)
        if seconds > 0:
            self.seconds = seconds if self.seconds is None else self.seconds + self._a * (seconds - self.seconds)

    def capacity_per_s(self, concurrency: int, budget: Callable[[float], float | None]) -> float | None:
        """The least of concurrency / mean seconds and ``budget(tokens per trace)``; None if unknown."""
        limits = []
        if self.seconds is not None and self.seconds > 0:
            limits.append(concurrency / self.seconds)
        if self.tokens is not None:
            by_budget = budget(self.tokens)
            if by_budget is not None:
                limits.append(by_budget)
        return min(limits) if limits else None
