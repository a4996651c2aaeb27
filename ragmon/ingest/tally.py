"""Metric updates of a batch, applied together: one call per metric child (``Tally.flush``).

prometheus_client takes a lock on every ``inc`` and, for a histogram, walks its buckets in Python
on every ``observe``: per trace of the latency-only path that cost as much as reading the trace.
The hot paths record here instead and flush once per submission, or once per fetched Kafka batch.
Counters get the sum of their increments. A histogram gets each bucket's count and its sum added
value by value in arrival order, so the exposition is exactly the one ``observe`` per value gives
(the float sum included). Nothing awaits between recording and flushing, so a scrape never sees
half a batch.

The one-pass histogram update writes prometheus_client's own Histogram fields (``_upper_bounds``,
``_buckets``, ``_sum``): its public API has no "observe many". That is why pyproject.toml pins
``prometheus-client`` below its next major version, and tests/ingest/test_tally.py fails when the
installed version leaves that range or the fields change shape; a child without them is observed
value by value (``observe_all``), never wrongly.
"""

from __future__ import annotations

import bisect
from typing import Any


class Tally:
    """Pending counter increments and histogram observations, by metric child."""

    __slots__ = ("_counts", "_observed")

    def __init__(self) -> None:
        self._counts: dict[Any, float] = {}
        self._observed: dict[Any, list[float]] = {}

    def inc(self, child: Any, amount: float = 1) -> None:
        """``child.inc(amount)``, later."""
        counts = self._counts
        counts[child] = counts.get(child, 0) + amount

    def observe(self, child: Any, value: float) -> None:
        """``child.observe(value)`` (a histogram child), later."""
        values = self._observed.get(child)
        if values is None:
            self._observed[child] = [value]
        else:
            values.append(value)

    def flush(self) -> None:
        """Apply everything recorded so far."""
        if self._counts:
            counts, self._counts = self._counts, {}
            for child, amount in counts.items():
                child.inc(amount)
        if self._observed:
            observed, self._observed = self._observed, {}
            for child, values in observed.items():
                observe_all(child, values)


def observe_all(child: Any, values: list[float]) -> None:
    """``child.observe(v)`` for each value, in one pass over prometheus_client's histogram child
    (its ``_upper_bounds``, ``_buckets`` and ``_sum``); through ``child.observe_many(values)`` where
    the child has that; else value by value."""
    bounds = getattr(child, "_upper_bounds", None)
    if bounds is None:
        many = getattr(child, "observe_many", None)  # e.g. export/latency.SlidingQuantile
        if many is not None:
            many(values)
            return
    buckets = getattr(child, "_buckets", None)
    total = getattr(child, "_sum", None)
    if len(values) == 1 or bounds is None or buckets is None or total is None or len(bounds) != len(buckets):
        for value in values:
            child.observe(value)
        return
    counts = [0] * len(bounds)
    running = total.get()
    for value in values:
        running += value  # in arrival order: the same float sum as one observe() each
        if value == value:  # a NaN lands in no bucket (observe() finds no bound >= it)
            counts[bisect.bisect_left(bounds, value)] += 1
    total.set(running)
    for index, count in enumerate(counts):
        if count:
            buckets[index].inc(count)
