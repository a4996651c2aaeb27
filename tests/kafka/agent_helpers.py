"""Agent-side helpers for the Kafka tests: config, a real (scripted) judge, trace accounting."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry

from ragmon import semconv as sc
from ragmon.config import AgentConfig, load_agent_config
from ragmon.types import RagTrace, Scores


def kafka_agent_config(bootstrap: str, topic: str, group: str, **kw: Any) -> AgentConfig:
    settings: dict[str, Any] = {
        "source": "kafka", "receiver_port": 0, "metrics_port": 0,
        "kafka_bootstrap_servers": bootstrap, "kafka_topics": (topic,), "kafka_group_id": group,
        "kafka_commit_interval_s": 0.5, "trace_timeout_s": 3.0, "shutdown_grace_s": 10.0,
        "sample_rate": 1.0,
    }
    settings.update(kw)
    return load_agent_config(settings, environ={})


@dataclass
class SleepyJudge:
    """A real ``Judge``: fixed scores after ``delay_s`` (0 = at once); remembers what it scored
    and the most traces it ever held at once."""

    delay_s: float = 0.0
    name: str = "sleepy"
    bounds_own_duration: bool = False
    circuit_state: str = "closed"
    scored: list[str] = field(default_factory=list)
    active: int = 0
    max_active: int = 0

    async def score(self, trace: RagTrace) -> Scores:
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            self.scored.append(trace.trace_id)
            return Scores(
                {sc.METRIC_FAITHFULNESS: 0.9, sc.METRIC_ANSWER_RELEVANCY: 0.8, sc.METRIC_CONTEXT_PRECISION: 0.7},
                judge=self.name,
            )
        finally:
            self.active -= 1

    async def aclose(self) -> None:
        return None


def total(registry: CollectorRegistry, name: str, **labels: str) -> float:
    """Sum of every sample of ``name`` whose labels include ``labels``."""
    out = 0.0
    for family in registry.collect():
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                out += sample.value
    return out


@dataclass(frozen=True)
class Accounting:
    received: float
    scored: float
    skipped: float
    failed: float
    duplicate: float

    @property
    def balanced(self) -> bool:
        return self.received == self.scored + self.skipped + self.failed


def accounting(registry: CollectorRegistry) -> Accounting:
    return Accounting(
        received=total(registry, f"{sc.M_TRACES_RECEIVED}_total"),
        scored=total(registry, f"{sc.M_TRACES_SCORED}_total"),
        skipped=total(registry, f"{sc.M_TRACES_SKIPPED}_total"),
        failed=total(registry, f"{sc.M_TRACES_FAILED}_total"),
        duplicate=total(registry, f"{sc.M_DEDUP_HITS}_total"),
    )


def accounting_from_scrape(samples: list[tuple[str, dict[str, str], float]]) -> Accounting:
    def s(name: str) -> float:
        return sum(v for n, _, v in samples if n == name)

    return Accounting(s(f"{sc.M_TRACES_RECEIVED}_total"), s(f"{sc.M_TRACES_SCORED}_total"),
                      s(f"{sc.M_TRACES_SKIPPED}_total"), s(f"{sc.M_TRACES_FAILED}_total"),
                      s(f"{sc.M_DEDUP_HITS}_total"))
