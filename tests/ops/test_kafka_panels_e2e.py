"""End to end for the Kafka half of the dashboard and rules (the part test_dashboard_e2e.py
allows to be empty, because its agent reads OTLP/HTTP): a real Kafka broker (KRaft, started
like the tests/kafka harness does), spans written to a topic by ragmon's Kafka exporter from
the OpenTelemetry SDK, one poison message, an agent with ``--source kafka``, and a real
Prometheus. Every dashboard/rule expression that reads a ``ragmon_kafka_*`` series must then
return data; for the lag alert, each operand without its threshold (see the other test's
docstring for what "returns data" means)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from prometheus_client import CollectorRegistry

from ragmon.agent import Agent
from ragmon.config import load_agent_config

from .conftest import REPO, require_binary
from .stack import Prometheus, scrape_config, shrink_rules, wait_for
from .test_dashboard_e2e import DASHBOARD, dashboard_queries, operands, prom_rules, substitute, varied

pytestmark = [pytest.mark.prometheus, pytest.mark.kafka, pytest.mark.timeout(300)]

TOPIC = "ops_otlp_spans"


@pytest.fixture
def broker(tmp_path: Path):  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from kafka_broker import KafkaBroker
    finally:
        sys.path.remove(str(REPO / "scripts"))
    broker = KafkaBroker(tmp_path / "kafka", num_partitions=2)
    try:
        broker.start(timeout_s=120)
    except Exception as exc:  # noqa: BLE001  # no java / no jars: the kafka harness says how to get them
        broker.stop()
        pytest.skip(f"cannot start a Kafka broker ({exc}); see scripts/kafka_broker.py")
    try:
        yield broker
    finally:
        broker.stop()


async def test_kafka_expressions_return_data(tmp_path: Path, broker) -> None:  # type: ignore[no-untyped-def]
    require_binary("prometheus")
    from tests.kafka.kafka_traffic import KafkaTraffic

    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=1)])
    finally:
        await admin.close()

    rules = tmp_path / "rules.yml"
    rules.write_text(shrink_rules(None, for_="1s", interval="1s"))
    config = load_agent_config(
        {
            "source": "kafka",
            "kafka_bootstrap_servers": broker.bootstrap,
            "kafka_topics": TOPIC,
            "kafka_group_id": "ops-e2e",
            "kafka_commit_interval_s": 0.5,
            "receiver_port": 0,
            "metrics_port": 0,
            "trace_timeout_s": 1.0,
            "judge": "local",
        },
        environ={},
    )
    agent = Agent(config, registry=CollectorRegistry())
    prom = Prometheus(tmp_path)
    async with agent:
        prom.start(scrape_config(agent.metrics_port, rule_files=[str(rules)]))
        try:
            await asyncio.to_thread(wait_for, prom.targets_up, 30, "the first scrape of the agent")
            traffic = KafkaTraffic(broker.bootstrap, TOPIC, service="shop")
            try:
                for round_ in range(3):  # rounds spread over several scrapes, so counters move
                    for i in range(5):
                        await asyncio.to_thread(traffic.send, varied(round_ * 5 + i))
                    await asyncio.to_thread(traffic.flush)
                    await asyncio.sleep(2.5)
            finally:
                await asyncio.to_thread(traffic.provider.shutdown)
            producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
            await producer.start()
            try:  # one poison message: dead-lettered and counted
                await producer.send_and_wait(TOPIC, b"\x00 this is not OTLP")
            finally:
                await producer.stop()
            await asyncio.to_thread(check_kafka_expressions, prom)
        finally:
            prom.stop()


def check_kafka_expressions(prom: Prometheus) -> None:
    wait_for(lambda: prom.query("ragmon_kafka_dead_letters_total > 0"), 60, "the poison message to be counted")
    wait_for(lambda: prom.query("sum(ragmon_traces_scored_total) >= 15"), 90, "15 traces scored from Kafka")
    time.sleep(3)  # more scrape + rule evaluation rounds
    checked, problems = 0, []
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    for where, raw in dashboard_queries(dashboard):
        expr = substitute(raw)
        if "kafka" in expr:
            checked += 1
            if not prom.query(expr):
                problems.append(f"{where}: no data for {expr}")
    for rule in (r for g in prom_rules(prom) for r in g["rules"]):
        if "kafka" not in rule["query"]:
            continue
        for part in [rule["name"], rule["query"]] if rule["type"] == "recording" else operands(rule["query"]):
            checked += 1
            if not prom.query(part):
                problems.append(f"{rule['type']} rule {rule['name']}: no data for {part}")
    assert not problems, "\n".join(problems)
    assert checked >= 8
