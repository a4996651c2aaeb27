"""The agent with ``source="kafka"`` against a real broker: round trip to /metrics, a real
collector (rotel) in front, poison messages, a slow judge, rebalancing and a broker outage.
Every test checks that each trace sent is accounted for (received = scored + skipped + failed)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from aiokafka import AIOKafkaProducer
from prometheus_client import CollectorRegistry

from ragmon import semconv as sc
from ragmon.agent import Agent
from ragmon.quality import online_names
from tests.helpers.net import free_port
from tests.helpers.scrape import scrape
from tests.helpers.traffic import OtlpTraffic

from .agent_helpers import Accounting, SleepyJudge, accounting, kafka_agent_config, total
from .conftest import Broker, create_topic, eventually
from .kafka_traffic import KafkaTraffic, rag_request

pytestmark = pytest.mark.kafka

ROTEL = Path(__import__("rotel").__file__).parent / "rotel-agent"


@contextlib.asynccontextmanager
async def kafka_agent(bootstrap: str, topic: str, group: str, judge=None, **kw) -> AsyncIterator[Agent]:
    agent = Agent(kafka_agent_config(bootstrap, topic, group, **kw), registry=CollectorRegistry(), judge=judge)
    await agent.start()
    try:
        yield agent
    finally:
        await agent.stop()


async def send(traffic: KafkaTraffic | OtlpTraffic, n: int, start: int = 0) -> list[str]:
    return [await asyncio.to_thread(traffic.send, rag_request(start + i)) for i in range(n)]


async def test_round_trip_sdk_exporter_broker_agent_metrics(kafka: Broker, topic: str, group: str) -> None:
    """ragmon's Kafka exporter -> Apache Kafka -> agent (local judge) -> /metrics over HTTP."""
    await create_topic(kafka.bootstrap, topic, partitions=4)
    traffic = KafkaTraffic(kafka.bootstrap, topic)
    try:
        async with kafka_agent(kafka.bootstrap, topic, group, judge_concurrency=2) as agent:
            sent = await send(traffic, 6)
            assert await asyncio.to_thread(traffic.flush)
            await eventually(lambda: accounting(agent.metrics.registry).scored >= 6, timeout_s=120,
                             what="six scored traces")
            assert await agent.wait_idle(30)
            await eventually(lambda: total(agent.metrics.registry, f"{sc.M_KAFKA_COMMITS}_total", outcome="ok") >= 1,
                             what="a commit")
            metrics = await asyncio.to_thread(scrape, agent.metrics_port)
            ready = await asyncio.to_thread(httpx.get, f"http://127.0.0.1:{agent.metrics_port}/readyz", timeout=10)
    finally:
        traffic.close()
    assert ready.status_code == 200
    judge = "local"
    assert metrics.value(f"{sc.M_SPANS_RECEIVED}_total", source="kafka") == 6 * 3
    assert metrics.value(f"{sc.M_TRACES_RECEIVED}_total", service="kafka-svc", pipeline="support") == 6
    assert metrics.value(f"{sc.M_TRACES_SCORED}_total", judge=judge) == 6
    for metric in online_names():
        assert metrics.value(f"{sc.M_SCORE}_count", judge=judge, metric=metric) == 6
    assert metrics.value(f"{sc.M_RETRIEVAL_LATENCY}_count", pipeline="support") == 6
    assert metrics.value(f"{sc.M_KAFKA_MESSAGES}_total", topic=topic) == traffic.exporter.sent_messages
    assert {lab["partition"] for lab in metrics.labelsets(sc.M_KAFKA_LAG)} == {"0", "1", "2", "3"}
    assert metrics.value(sc.M_KAFKA_LAG) == 0
    assert len(sent) == 6


@contextlib.contextmanager
def rotel_collector(bootstrap: str, topic: str, fmt: str, log_dir: Path) -> Iterator[str]:
    """rotel (a Rust OpenTelemetry collector): OTLP/HTTP receiver -> Kafka exporter."""
    http_port, grpc_port = free_port(), free_port()
    cmd = [str(ROTEL), "start", "--otlp-http-endpoint", f"127.0.0.1:{http_port}",
           "--otlp-grpc-endpoint", f"127.0.0.1:{grpc_port}", "--exporter", "kafka",
           "--kafka-exporter-brokers", bootstrap, "--kafka-exporter-traces-topic", topic,
           "--kafka-exporter-format", fmt, "--kafka-exporter-compression", "gzip",
           "--batch-timeout", "100ms"]
    with open(log_dir / f"rotel-{fmt}.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, "RUST_LOG": "info"})
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", http_port)) == 0:
                    break
            assert proc.poll() is None, (log_dir / f"rotel-{fmt}.log").read_text()
            assert time.monotonic() < deadline, "rotel did not open its OTLP/HTTP port"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{http_port}/v1/traces"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.mark.skipif(not ROTEL.exists(), reason="rotel binary not installed")
@pytest.mark.parametrize(("fmt", "encoding"), [("protobuf", "otlp_proto"), ("json", "otlp_json")])
async def test_collector_interop_rotel_to_agent(kafka: Broker, topic: str, group: str, tmp_path: Path,
                                                fmt: str, encoding: str) -> None:
    """OpenTelemetry SDK -> OTLP/HTTP -> rotel's Kafka exporter -> the agent scores the traces."""
    await create_topic(kafka.bootstrap, topic, partitions=2)
    judge = SleepyJudge()
    with rotel_collector(kafka.bootstrap, topic, fmt, tmp_path) as endpoint:
        traffic = OtlpTraffic(endpoint, service="via-rotel")
        try:
            async with kafka_agent(kafka.bootstrap, topic, group, judge=judge, kafka_encoding=encoding) as agent:
                sent = await send(traffic, 5)
                await eventually(lambda: set(sent) <= set(judge.scored), timeout_s=60, what="traces via rotel")
                assert await agent.wait_idle(30)
                acc = accounting(agent.metrics.registry)
                dead = total(agent.metrics.registry, f"{sc.M_KAFKA_DEAD_LETTERS}_total")
                via = total(agent.metrics.registry, f"{sc.M_TRACES_SCORED}_total", service="via-rotel")
        finally:
            traffic.close()
    assert dead == 0
    assert acc.balanced and acc.received == acc.scored == 5
    assert via == 5
    assert sorted(judge.scored) == sorted(sent)


async def test_poison_messages_between_good_ones(kafka: Broker, topic: str, group: str) -> None:
    await create_topic(kafka.bootstrap, topic, partitions=1)
    dlq = topic + ".dlq"
    judge = SleepyJudge()
    traffic = KafkaTraffic(kafka.bootstrap, topic)
    producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap)
    await producer.start()
    sent: list[str] = []
    try:
        async with kafka_agent(kafka.bootstrap, topic, group, judge=judge, kafka_dead_letter_topic=dlq,
                               kafka_max_message_bytes=200_000) as agent:
            for i in range(4):
                sent += await send(traffic, 2, start=2 * i)
                assert await asyncio.to_thread(traffic.flush)
                await producer.send_and_wait(topic, b"garbage %d \xff\x00" % i)
            await producer.send_and_wait(topic, b"\x0a" * 250_000)  # oversize
            sent += await send(traffic, 2, start=100)
            assert await asyncio.to_thread(traffic.flush)
            await eventually(lambda: set(sent) <= set(judge.scored), timeout_s=60, what="good traces")
            assert await agent.wait_idle(30)
            acc = accounting(agent.metrics.registry)
            reg = agent.metrics.registry
            poison = total(reg, f"{sc.M_KAFKA_DEAD_LETTERS}_total", reason=sc.DROP_POISON_MESSAGE)
            oversize = total(reg, f"{sc.M_KAFKA_DEAD_LETTERS}_total", reason=sc.DROP_OVERSIZE_MESSAGE)
            dropped = total(reg, f"{sc.M_DROPPED}_total", reason=sc.DROP_POISON_MESSAGE)
    finally:
        traffic.close()
        await producer.stop()
    assert (poison, oversize, dropped) == (4, 1, 4)
    assert acc.balanced and acc.received == acc.scored == len(sent) == 10


async def test_slow_judge_pauses_consumption_and_bounds_memory(kafka: Broker, topic: str, group: str) -> None:
    await create_topic(kafka.bootstrap, topic, partitions=2)
    traffic = KafkaTraffic(kafka.bootstrap, topic)
    try:
        sent = await send(traffic, 16)
        assert await asyncio.to_thread(traffic.flush)
    finally:
        traffic.close()
    judge = SleepyJudge(delay_s=0.25)
    backlog_limit = 3
    max_backlog = max_lag = 0.0
    async with kafka_agent(kafka.bootstrap, topic, group, judge=judge, judge_concurrency=1,
                           judge_backlog=backlog_limit) as agent:
        reg = agent.metrics.registry
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while len(set(judge.scored)) < len(sent) and loop.time() < deadline:
            max_backlog = max(max_backlog, total(reg, sc.M_JUDGE_BACKLOG))
            max_lag = max(max_lag, total(reg, sc.M_KAFKA_LAG))
            await asyncio.sleep(0.05)
        assert await agent.wait_idle(30)
        acc = accounting(reg)
        paused = total(reg, f"{sc.M_KAFKA_PAUSED}_total")
        backlog_full = total(reg, f"{sc.M_TRACES_SKIPPED}_total", reason=sc.SKIP_BACKLOG_FULL)
    assert sorted(judge.scored) == sorted(sent)  # every trace judged once, none skipped for lack of room
    assert backlog_full == 0
    assert acc.balanced and acc.received == acc.scored == len(sent)
    assert paused > 1.0  # the consumer was paused while the judge caught up...
    assert max_backlog <= backlog_limit  # ...so the backlog never grew past its bound...
    assert judge.max_active == 1
    assert max_lag >= len(sent) / 4  # ...and the rest waited in Kafka, not in the agent's memory


async def test_two_agents_share_partitions_and_take_over(kafka: Broker, topic: str, group: str) -> None:
    await create_topic(kafka.bootstrap, topic, partitions=4)
    judge_a, judge_b = SleepyJudge(), SleepyJudge()
    traffic = KafkaTraffic(kafka.bootstrap, topic)
    try:
        agent_b = Agent(kafka_agent_config(kafka.bootstrap, topic, group), registry=CollectorRegistry(),
                        judge=judge_b)
        async with kafka_agent(kafka.bootstrap, topic, group, judge=judge_a) as agent_a:
            first = await send(traffic, 8)
            await eventually(lambda: set(first) <= set(judge_a.scored), timeout_s=60, what="A alone")
            await agent_b.start()
            await eventually(lambda: total(agent_b.metrics.registry, f"{sc.M_KAFKA_REBALANCES}_total",
                                           kind="assigned") >= 1
                             and total(agent_b.metrics.registry, sc.M_KAFKA_LAG) == 0
                             and _partitions(agent_b), timeout_s=60, what="B joins")
            assert 0 < len(_partitions(agent_b)) < 4
            second = await send(traffic, 8, start=8)
            await eventually(lambda: set(second) <= set(judge_a.scored) | set(judge_b.scored), timeout_s=60,
                             what="both score")
        # A stopped gracefully: B takes over every partition.
        third = await send(traffic, 8, start=16)
        await eventually(lambda: set(third) <= set(judge_b.scored), timeout_s=60, what="B takes over")
        await eventually(lambda: _partitions(agent_b) == {"0", "1", "2", "3"}, what="B owns all")
        assert await agent_b.wait_idle(30)
        acc_a, acc_b = accounting(agent_a.metrics.registry), accounting(agent_b.metrics.registry)
        await agent_b.stop()
    finally:
        traffic.close()
    everything = set(first + second + third)
    assert set(judge_a.scored) | set(judge_b.scored) == everything
    assert acc_a.balanced and acc_b.balanced
    assert acc_a.received > 0 and acc_b.received > 0
    # at least once: nothing lost; a redelivery only for traces in flight during a hand-over
    assert len(everything) <= acc_a.received + acc_b.received <= len(everything) + 4


def _partitions(agent: Agent) -> set[str]:
    return {s.labels["partition"] for f in agent.metrics.registry.collect() for s in f.samples
            if s.name == sc.M_KAFKA_LAG}


async def test_broker_outage_while_app_and_agent_keep_running(private_broker: Broker, topic: str,
                                                              group: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ragmon.kafka")
    broker = private_broker
    await create_topic(broker.bootstrap, topic, partitions=2)
    judge = SleepyJudge()
    traffic = KafkaTraffic(broker.bootstrap, topic, max_buffer_spans=5_000)
    sent: list[str] = []
    stop = threading.Event()

    def app() -> None:  # the user's app keeps serving requests throughout
        i = 0
        while not stop.is_set():
            sent.append(traffic.send(rag_request(i)))
            i += 1
            time.sleep(0.1)

    thread = threading.Thread(target=app)
    try:
        async with kafka_agent(broker.bootstrap, topic, group, judge=judge) as agent:
            thread.start()
            await eventually(lambda: len(judge.scored) >= 5, timeout_s=60, what="traffic flowing")
            await asyncio.to_thread(broker.stop)
            down_since = time.monotonic()
            # /readyz reports the outage once a commit or probe to the coordinator fails (bounded by
            # the source's commit timeout; how soon depends on the machine, so no clock here)
            await eventually(lambda: not agent._readiness()[0], timeout_s=90, what="/readyz reporting the outage")
            await asyncio.sleep(max(0.0, 10 - (time.monotonic() - down_since)))  # 10 s at least: traffic piles up
            assert thread.is_alive()  # the app was never blocked by the exporter
            await asyncio.to_thread(broker.start)
            await eventually(lambda: len(set(judge.scored)) >= len(sent) - 5, timeout_s=90,
                             what="catching up after the outage")
            stop.set()
            await asyncio.to_thread(thread.join, 10)
            assert await asyncio.to_thread(traffic.flush, 60_000)
            await eventually(lambda: set(sent) <= set(judge.scored), timeout_s=60, what="every trace scored")
            assert await agent.wait_idle(30)
            acc = accounting(agent.metrics.registry)
            commits_ok = total(agent.metrics.registry, f"{sc.M_KAFKA_COMMITS}_total", outcome="ok")
            ready = agent._readiness()[0]
    finally:
        stop.set()
        if thread.is_alive():
            thread.join(10)
        traffic.close()
    assert traffic.exporter.dropped_spans == 0
    assert set(judge.scored) == set(sent)
    assert len(judge.scored) == len(set(judge.scored))  # a redelivered trace is not scored twice
    assert acc.balanced
    assert acc.received == len(sent) + acc.duplicate  # the extra receptions are the counted duplicates
    assert commits_ok >= 1
    assert ready  # and it recovered
    outage_logs = [r for r in caplog.records if r.name == "ragmon.kafka" and "unavailable" in r.getMessage()]
    assert len(outage_logs) == 1  # logged once per outage, not once per retry


async def test_agent_stopped_while_the_broker_is_down_stops_cleanly(private_broker: Broker, topic: str,
                                                                   group: str) -> None:
    """Stopping during an outage (a deploy, Ctrl-C) ends without an error and leaves no connection
    open: aiokafka's consumer.stop() raises CancelledError when a fetch was retrying, which used to
    escape agent.stop() and leak the consumer's sockets (ragmon.closing)."""
    await create_topic(private_broker.bootstrap, topic, partitions=2)
    traffic = KafkaTraffic(private_broker.bootstrap, topic)
    try:
        sent, acc = await _stop_during_outage(private_broker, topic, group, traffic)
    finally:
        traffic.close()
    assert acc.balanced
    assert acc.received >= len(sent)
    gc.collect()  # the agent is gone: a socket it left open is reported now (a ResourceWarning: an error here)


async def _stop_during_outage(broker: Broker, topic: str, group: str,
                              traffic: KafkaTraffic) -> tuple[list[str], Accounting]:
    judge = SleepyJudge()
    agent = Agent(kafka_agent_config(broker.bootstrap, topic, group), registry=CollectorRegistry(), judge=judge)
    await agent.start()
    try:
        sent = await send(traffic, 5)
        assert await asyncio.to_thread(traffic.flush)
        await eventually(lambda: set(sent) <= set(judge.scored), timeout_s=60, what="traffic flowing")
        await asyncio.to_thread(broker.stop)
        await eventually(lambda: not agent._readiness()[0], timeout_s=90, what="/readyz reporting the outage")
    finally:
        await agent.stop()  # raised CancelledError here before
    return sent, accounting(agent.metrics.registry)
