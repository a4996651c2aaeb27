"""``ragmon_score_ratio`` as one family: the built-in metrics' histogram plus the user-declared
evaluators' compact series (``_sum``, ``_count`` and the ``+Inf`` bucket that OpenMetrics
requires of every histogram).

A user-declared evaluator scores 1 (pass) or 0 (fail), so its sum and count already give the
share of passing answers: 20 more buckets would add series for nothing. An evaluator that declares
``buckets: true`` is observed into the histogram itself. One collector yields both, so
Prometheus sees a single ``ragmon_score_ratio`` family and the registry's duplicate check holds.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator

from prometheus_client import Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample


class ScoreFamily(Collector):
    """Collects ``histogram`` (built-ins) and the compact evaluator series as one family."""

    def __init__(self, histogram: Histogram, label_names: Iterable[str]) -> None:
        self.histogram = histogram
        self._label_names = tuple(label_names)
        self._lock = threading.Lock()
        self._compact: dict[tuple[str, ...], list[float]] = {}  # label values -> [sum, count]

    def observe_compact(self, label_values: tuple[str, ...], value: float) -> None:
        if len(label_values) != len(self._label_names):
            raise ValueError(f"expected {len(self._label_names)} label values, got {len(label_values)}")
        with self._lock:
            acc = self._compact.get(label_values)
            if acc is None:
                acc = self._compact[label_values] = [0.0, 0.0]
            acc[0] += value
            acc[1] += 1.0

    def describe(self) -> Iterable[Metric]:
        return self.histogram.describe()

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            compact = [(labels, acc[0], acc[1]) for labels, acc in self._compact.items()]
        for metric in self.histogram.collect():
            for values, total, count in compact:
                labels = dict(zip(self._label_names, values, strict=True))
                metric.samples.append(Sample(metric.name + "_bucket", {**labels, "le": "+Inf"}, count))
                metric.samples.append(Sample(metric.name + "_sum", labels, total))
                metric.samples.append(Sample(metric.name + "_count", labels, count))
            yield metric
