"""SIGKILL a real ``ragmon agent --source kafka`` process mid-stream, start another, and check
at-least-once: what the first one committed it had accounted for; the second one resumes from
the committed offsets and accounts for everything after them."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from aiokafka import AIOKafkaConsumer
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ragmon import semconv as sc
from tests.helpers.net import free_port
from tests.helpers.scrape import scrape

from .agent_helpers import Accounting, accounting_from_scrape
from .conftest import Broker, committed_offsets, create_topic, eventually
from .kafka_traffic import KafkaTraffic, rag_request

pytestmark = pytest.mark.kafka

PARTITIONS = 2


def start_agent(bootstrap: str, topic: str, group: str, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    cmd = [sys.executable, "-m", "ragmon", "agent", "--source", "kafka", "--kafka-bootstrap-servers", bootstrap,
           "--kafka-topics", topic, "--kafka-group-id", group, "--metrics-port", str(port),
           "--judge", "local", "--sample-rate", "1.0", "--judge-concurrency", "2",
           "--kafka-commit-interval-s", "0.5", "--trace-timeout-s", "3", "--shutdown-grace-s", "10"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGMON_")}
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    return proc, port


def agent_accounting(port: int) -> Accounting | None:
    try:
        return accounting_from_scrape(scrape(port).samples)
    except httpx.HTTPError:
        return None


async def trace_ids_by_offset(bootstrap: str, topic: str, messages: int) -> dict[tuple[int, int], set[str]]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False)
    await consumer.start()
    out: dict[tuple[int, int], set[str]] = {}
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while len(out) < messages and loop.time() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for r in records:
                    req = ExportTraceServiceRequest.FromString(r.value)
                    out[(r.partition, r.offset)] = {s.trace_id.hex() for rs in req.resource_spans
                                                    for ss in rs.scope_spans for s in ss.spans}
    finally:
        await consumer.stop()
    return out


def traces_at_or_after(messages: dict[tuple[int, int], set[str]], offsets: dict[int, int | None]) -> set[str]:
    return {t for (p, o), ids in messages.items() if o >= (offsets.get(p) or 0) for t in ids}


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


async def test_sigkill_mid_stream_then_restart_loses_nothing(
        kafka: Broker, topic: str, group: str, tmp_path: Path, agents: list[subprocess.Popen[bytes]]) -> None:
    await create_topic(kafka.bootstrap, topic, partitions=PARTITIONS)
    traffic = KafkaTraffic(kafka.bootstrap, topic)
    log = tmp_path / "agents.log"
    try:
        sent = [await asyncio.to_thread(traffic.send, rag_request(i)) for i in range(20)]
        assert await asyncio.to_thread(traffic.flush)
        first, port_a = start_agent(kafka.bootstrap, topic, group, log)
        agents.append(first)

        def a_scored(n: int) -> bool:
            acc = agent_accounting(port_a)
            return acc is not None and acc.scored >= n

        await eventually(lambda: a_scored(5), timeout_s=120, what="the first agent scoring")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while not any((await committed_offsets(kafka.bootstrap, group, topic, PARTITIONS)).values()):
            assert loop.time() < deadline, "the first agent never committed"
            await asyncio.sleep(0.2)
        # More traffic arrives while it works; then it is killed without warning.
        sent += [await asyncio.to_thread(traffic.send, rag_request(i)) for i in range(20, 40)]
        assert await asyncio.to_thread(traffic.flush)
        committed_before = await committed_offsets(kafka.bootstrap, group, topic, PARTITIONS)
        snapshot = await asyncio.to_thread(agent_accounting, port_a)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        traffic.close()
    assert snapshot is not None  # mid-stream: traces in the judge are received, not yet accounted
    committed = await committed_offsets(kafka.bootstrap, group, topic, PARTITIONS)
    messages = await trace_ids_by_offset(kafka.bootstrap, topic, traffic.exporter.sent_messages)
    assert {t for ids in messages.values() for t in ids} == set(sent)  # everything reached Kafka

    # The first agent committed only past traces it had accounted for.
    below_before = set(sent) - traces_at_or_after(messages, committed_before)
    assert any(committed_before.values())
    assert snapshot.received >= len(below_before)

    # The second agent resumes from the committed offsets and accounts for everything after them.
    remaining = traces_at_or_after(messages, committed)
    assert remaining  # the kill left work behind, so the restart is really exercised
    second, port_b = start_agent(kafka.bootstrap, topic, group, log)
    agents.append(second)

    def skipped_b() -> float:  # listed in the first agent's commit metadata: accounted by it
        return sum(v for n, labels, v in scrape(port_b).samples
                   if n == f"{sc.M_KAFKA_HANDOVER}_total" and labels.get("kind") == sc.HANDOVER_SKIPPED)

    def b_done() -> bool:
        acc = agent_accounting(port_b)
        return acc is not None and acc.received + skipped_b() >= len(remaining) and acc.balanced

    await eventually(b_done, timeout_s=180, what="the restarted agent catching up")
    await asyncio.sleep(1.0)  # nothing more arrives: the count is final
    final = await asyncio.to_thread(agent_accounting, port_b)
    skipped = await asyncio.to_thread(skipped_b)
    second.send_signal(signal.SIGTERM)
    assert second.wait(60) == 0
    assert final is not None and final.balanced
    # exactly the uncommitted traces, none lost, none extra (less those the first agent listed as done)
    assert final.received + skipped == len(remaining)
    assert final.scored + final.skipped + final.failed == final.received
    # Everything committed after the restart: a third start would have nothing to do.
    ends: dict[int, int] = {}
    for p, o in messages:
        ends[p] = max(ends.get(p, 0), o + 1)
    assert await committed_offsets(kafka.bootstrap, group, topic, PARTITIONS) == {
        p: ends.get(p) for p in range(PARTITIONS)}
