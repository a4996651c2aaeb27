"""Read the agent's counters for one service out of Prometheus metric families — from the
in-process registry or from an external agent's /metrics text — into ``AgentCounts``."""

from __future__ import annotations

import math
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Metric
from prometheus_client.parser import text_string_to_metric_families

from .. import semconv as sc
from .summary import AgentCounts


def counts_from_families(families: Iterable[Metric], service: str) -> AgentCounts:
    total: dict[str, float] = {}
    by_label: dict[str, dict[str, float]] = {}
    gauges: dict[str, float] = {}
    wanted = {
        sc.M_TRACES_RECEIVED + "_total": None,
        sc.M_TRACES_SAMPLED + "_total": None,
        sc.M_TRACES_SCORED + "_total": None,
        sc.M_TRACES_SKIPPED + "_total": sc.L_REASON,
        sc.M_TRACES_FAILED + "_total": sc.L_REASON,
        sc.M_DIAGNOSIS + "_total": sc.L_VERDICT,
    }
    for family in families:
        for sample in family.samples:
            if sample.labels.get(sc.L_SERVICE) != service:
                continue
            if sample.name in wanted:
                total[sample.name] = total.get(sample.name, 0.0) + sample.value
                label = wanted[sample.name]
                if label is not None:
                    key = sample.labels.get(label, sc.UNKNOWN_LABEL)
                    bucket = by_label.setdefault(sample.name, {})
                    bucket[key] = bucket.get(key, 0.0) + sample.value
            elif (sample.name in (sc.M_RETRIEVAL_LATENCY_P95, sc.M_PIPELINE_LATENCY_P95)
                  and not math.isnan(sample.value)):  # one pipeline in the demo: keep the largest
                gauges[sample.name] = max(gauges.get(sample.name, 0.0), sample.value)

    def ints(name: str) -> dict[str, int]:
        return {k: int(v) for k, v in by_label.get(name, {}).items()}

    return AgentCounts(
        received=int(total.get(sc.M_TRACES_RECEIVED + "_total", 0)),
        sampled=int(total.get(sc.M_TRACES_SAMPLED + "_total", 0)),
        scored=int(total.get(sc.M_TRACES_SCORED + "_total", 0)),
        skipped=ints(sc.M_TRACES_SKIPPED + "_total"),
        failed=ints(sc.M_TRACES_FAILED + "_total"),
        verdicts=ints(sc.M_DIAGNOSIS + "_total"),
        retrieval_p95_s=gauges.get(sc.M_RETRIEVAL_LATENCY_P95),
        pipeline_p95_s=gauges.get(sc.M_PIPELINE_LATENCY_P95),
    )


def counts_from_registry(registry: CollectorRegistry, service: str) -> AgentCounts:
    return counts_from_families(registry.collect(), service)


def counts_from_text(text: str, service: str) -> AgentCounts:
    """Parse Prometheus text exposition (raises ValueError on text that is not)."""
    return counts_from_families(text_string_to_metric_families(text), service)
