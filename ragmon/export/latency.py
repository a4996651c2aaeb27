"""Exact P95 latency over a sliding time window, per (service, pipeline).

The histogram buckets give Prometheus-side quantiles; this gives the exact value the
agent saw, for the gauge. Memory is bounded by ``max_samples`` per key: under heavy
load the window holds the most recent ``max_samples`` values (documented in metrics.md).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from itertools import repeat

import numpy as np


class SlidingQuantile:
    def __init__(
        self, window_s: float, max_samples: int = 20_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._window_s = window_s
        # times and values in two deques: the quantile reads the values as one C-level copy
        self._times: deque[float] = deque(maxlen=max_samples)
        self._values: deque[float] = deque(maxlen=max_samples)
        self._clock = clock
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        with self._lock:
            self._times.append(self._clock())
            self._values.append(value)

    def observe_many(self, values: list[float]) -> None:
        """``observe`` for each value, at one moment (``Tally.flush`` hands a batch's over)."""
        with self._lock:
            now = self._clock()
            self._times.extend(repeat(now, len(values)))
            self._values.extend(values)

    def quantile(self, q: float) -> float:
        """The q-quantile (linear interpolation) of values in the window; NaN when empty."""
        cutoff = self._clock() - self._window_s
        with self._lock:
            while self._times and self._times[0] < cutoff:
                self._times.popleft()
                self._values.popleft()
            values = np.fromiter(self._values, dtype=np.float64, count=len(self._values))
        if not values.size:
            return float("nan")
        return float(np.quantile(values, q))
