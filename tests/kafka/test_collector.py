"""The real OpenTelemetry Collector (the one ``make services`` builds, scripts/otelcol.py) in
front of Kafka: the OpenTelemetry SDK sends OTLP/HTTP to the Collector, its contrib
``kafkaexporter`` writes the topic (creating it), ragmon agents consume it. Also: aiokafka's
errors while the topic does not exist yet become one ragmon line."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable

import pytest
from prometheus_client import CollectorRegistry

from ragmon import semconv as sc
from ragmon.agent import Agent
from tests.helpers.traffic import OtlpTraffic

from .agent_helpers import SleepyJudge, accounting, kafka_agent_config, total
from .conftest import Broker, OtelCollector, create_topic, eventually
from .kafka_traffic import rag_request

pytestmark = pytest.mark.kafka


@contextlib.asynccontextmanager
async def kafka_agent(bootstrap: str, topic: str, group: str, judge: SleepyJudge, **kw: object
                      ) -> AsyncIterator[Agent]:
    agent = Agent(kafka_agent_config(bootstrap, topic, group, **kw), registry=CollectorRegistry(), judge=judge)
    await agent.start()
    try:
        yield agent
    finally:
        await agent.stop()


def waiting_lines(caplog: pytest.LogCaptureFixture, topic: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "ragmon.kafka" and f"waiting for topic {topic}" in r.getMessage()]


def _partitions(agent: Agent) -> set[str]:
    return {s.labels["partition"] for f in agent.metrics.registry.collect() for s in f.samples
            if s.name == sc.M_KAFKA_LAG}


async def test_collector_to_two_agents_each_trace_once(kafka: Broker, topic: str, group: str,
                                                       otelcol: Callable[..., OtelCollector],
                                                       caplog: pytest.LogCaptureFixture) -> None:
    """SDK -> OTLP/HTTP -> Collector (kafkaexporter, partition_traces_by_id) -> Kafka -> two agents
    in one group. The agents start before the topic exists: the Collector's first write creates it."""
    caplog.set_level(logging.INFO)
    judge_a, judge_b = SleepyJudge(), SleepyJudge()
    async with kafka_agent(kafka.bootstrap, topic, group, judge_a) as agent_a, \
            kafka_agent(kafka.bootstrap, topic, group, judge_b) as agent_b:
        # the agents ask for the topic before the Collector has created it
        await eventually(lambda: waiting_lines(caplog, topic), timeout_s=60, what="an agent waiting for the topic")
        collector = otelcol(kafka.bootstrap, topic)
        traffic = OtlpTraffic(collector.traces_endpoint, service="via-otelcol")
        try:
            first = await asyncio.to_thread(traffic.send, rag_request(0))  # creates the topic
            await eventually(lambda: first in judge_a.scored + judge_b.scored, timeout_s=120,
                             what="the first trace through the Collector")
            await eventually(lambda: _partitions(agent_a) and _partitions(agent_b), timeout_s=60,
                             what="both agents own partitions")
            sent = [first] + [await asyncio.to_thread(traffic.send, rag_request(i)) for i in range(1, 40)]
            await eventually(lambda: set(sent) <= set(judge_a.scored) | set(judge_b.scored), timeout_s=120,
                             what="every trace via the Collector")
            assert await agent_a.wait_idle(30) and await agent_b.wait_idle(30)
            acc_a, acc_b = accounting(agent_a.metrics.registry), accounting(agent_b.metrics.registry)
            via = (total(agent_a.metrics.registry, f"{sc.M_TRACES_SCORED}_total", service="via-otelcol")
                   + total(agent_b.metrics.registry, f"{sc.M_TRACES_SCORED}_total", service="via-otelcol"))
            dead = (total(agent_a.metrics.registry, f"{sc.M_KAFKA_DEAD_LETTERS}_total")
                    + total(agent_b.metrics.registry, f"{sc.M_KAFKA_DEAD_LETTERS}_total"))
        finally:
            traffic.close()
    assert "Everything is ready" in collector.log()  # the real Collector carried the traffic
    assert dead == 0
    assert sorted(judge_a.scored + judge_b.scored) == sorted(sent)  # each trace judged once, by one agent
    assert judge_a.scored and judge_b.scored  # and the partitions were shared
    assert acc_a.balanced and acc_b.balanced
    assert acc_a.received + acc_b.received == len(sent) == via
    # while the topic did not exist: one ragmon line per wait, none of aiokafka's ERROR lines
    aiokafka_errors = [r for r in caplog.records if r.name.startswith("aiokafka") and r.levelno >= logging.ERROR
                       and topic in r.getMessage()]
    assert aiokafka_errors == []
    assert 1 <= len(waiting_lines(caplog, topic)) <= 2  # one per agent at most (both share aiokafka's loggers)


async def test_collector_otlp_json_to_agent(kafka: Broker, topic: str, group: str,
                                            otelcol: Callable[..., OtelCollector]) -> None:
    """The kafkaexporter's otlp_json encoding, read with --kafka-encoding otlp_json."""
    await create_topic(kafka.bootstrap, topic, partitions=2)
    judge = SleepyJudge()
    collector = otelcol(kafka.bootstrap, topic, encoding="otlp_json")
    traffic = OtlpTraffic(collector.traces_endpoint, service="via-otelcol-json")
    try:
        async with kafka_agent(kafka.bootstrap, topic, group, judge, kafka_encoding="otlp_json") as agent:
            sent = [await asyncio.to_thread(traffic.send, rag_request(i)) for i in range(5)]
            await eventually(lambda: set(sent) <= set(judge.scored), timeout_s=120, what="traces via otlp_json")
            assert await agent.wait_idle(30)
            acc = accounting(agent.metrics.registry)
            spans = total(agent.metrics.registry, f"{sc.M_SPANS_RECEIVED}_total", source="kafka")
            latency = total(agent.metrics.registry, f"{sc.M_RETRIEVAL_LATENCY}_count", pipeline="support")
    finally:
        traffic.close()
    assert sorted(judge.scored) == sorted(sent)
    assert acc.balanced and acc.received == acc.scored == 5
    assert spans == 5 * 3
    assert latency == 5
