"""Every trace judged once, on whole data, while agents come and go (issue 28).

The app (``split_app.py``) uses ragmon's SDK with its default export interval and LLM calls of
0.3-2.0 s, 8 in flight, so traces are written in parts; the real OpenTelemetry Collector
(``kafkaexporter``, ``partition_traces_by_id``) writes each part as its own Kafka message; real
``ragmon agent`` processes (local judge, ``--export-judged``) consume the topic in one group.
Scenarios: a second agent joins mid-stream; a rolling restart of two agents (SIGTERM, a new
process, then the other); kill -9 of one agent. Each checks, from the agents' judged-trace files
and the topic itself: the traces really were written in parts, none was judged on part of its
data (every judged trace has its documents and its answer), and every trace was judged exactly
once — after a kill -9, at least once, with the traces judged twice no more than the survivor
counted as ``redelivered``.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ragmon import semconv as sc
from tests.helpers.net import free_port
from tests.helpers.scrape import scrape

from .conftest import REPO, Broker, OtelCollector, create_topic, eventually

pytestmark = pytest.mark.kafka

PARTITIONS = 4
REQUESTS = 200
RATE = 6.0  # requests started per second: about 35 s of traffic, 8 in flight at most


class AgentProc:
    """One ``ragmon agent --source kafka`` process writing what it judges to its own file."""

    def __init__(self, name: str, bootstrap: str, topic: str, group: str, work: Path) -> None:
        self.name = name
        self.port = free_port()
        self.judged = work / f"judged-{name}.jsonl"
        self.log = work / f"agent-{name}.log"
        cmd = [sys.executable, "-m", "ragmon", "agent", "--source", "kafka", "--kafka-bootstrap-servers", bootstrap,
               "--kafka-topics", topic, "--kafka-group-id", group, "--metrics-port", str(self.port),
               "--judge", "local", "--sample-rate", "1.0", "--judge-concurrency", "2",
               "--kafka-commit-interval-s", "0.5", "--trace-timeout-s", "20", "--shutdown-grace-s", "20",
               "--export-judged", str(self.judged)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAGMON_")}
        env["PYTHONPATH"] = str(REPO)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO)

    def metric(self, name: str, **labels: str) -> float | None:
        try:
            return scrape(self.port).value(name, **labels)
        except Exception:  # noqa: BLE001  # not up yet, or gone
            return None

    def partitions(self) -> int:
        try:
            return len(scrape(self.port).labelsets(sc.M_KAFKA_LAG))
        except Exception:  # noqa: BLE001
            return 0

    def records(self) -> list[dict]:
        if not self.judged.exists():
            return []
        records = [json.loads(line) for line in self.judged.read_text().splitlines() if line.strip()]
        for record in records:
            record["agent"] = self.name
        return records

    def terminate(self, timeout_s: float = 90) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout_s)


@pytest.fixture
def fleet(kafka: Broker, topic: str, group: str, tmp_path: Path) -> Iterator[Callable[[str], AgentProc]]:
    started: list[AgentProc] = []

    def start(name: str) -> AgentProc:
        agent = AgentProc(name, kafka.bootstrap, topic, group, tmp_path)
        started.append(agent)
        return agent

    yield start
    for agent in started:
        if agent.proc.poll() is None:
            agent.proc.kill()
            agent.proc.wait(10)


class App:
    """``split_app.py`` in its own process (the SDK sets OpenTelemetry's global provider)."""

    def __init__(self, endpoint: str, work: Path) -> None:
        self.out = work / "sent.txt"
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        env = {k: v for k, v in env.items() if not k.startswith(("RAGMON_", "OTEL_"))}
        with open(self.out, "wb") as out, open(work / "app.log", "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.kafka.split_app", "--endpoint", endpoint,
                 "--requests", str(REQUESTS), "--rate", str(RATE)], stdout=out, stderr=err, env=env, cwd=REPO)

    def sent(self) -> list[str]:
        return [line for line in self.out.read_text().split() if line]

    async def finish(self) -> list[str]:
        code = await asyncio.to_thread(self.proc.wait, 180)
        assert code == 0, (self.out.parent / "app.log").read_text()[-3000:]
        return self.sent()


async def parts_per_trace(bootstrap: str, topic: str) -> collections.Counter[str]:
    """How many Kafka messages hold spans of each trace (the whole topic, read from the start)."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False)
    await consumer.start()
    parts: collections.Counter[str] = collections.Counter()
    try:
        idle = 0
        while idle < 4:
            batch = await consumer.getmany(timeout_ms=500)
            idle = 0 if batch else idle + 1
            for records in batch.values():
                for r in records:
                    req = ExportTraceServiceRequest.FromString(r.value)
                    parts.update({s.trace_id.hex() for rs in req.resource_spans for ss in rs.scope_spans
                                  for s in ss.spans})
    finally:
        await consumer.stop()
    return parts


async def setup(kafka: Broker, topic: str, otelcol: Callable[..., OtelCollector]) -> OtelCollector:
    await create_topic(kafka.bootstrap, topic, partitions=PARTITIONS)
    return otelcol(kafka.bootstrap, topic)


async def wait_for_first(agent: AgentProc) -> None:
    await eventually(lambda: agent.partitions() > 0, timeout_s=120, what=f"agent {agent.name} owning partitions")


def judged(agents: list[AgentProc]) -> list[dict]:
    return [r for a in agents for r in a.records()]


async def all_judged(agents: list[AgentProc], sent: list[str], timeout_s: float = 240) -> list[dict]:
    await eventually(lambda: set(sent) <= {r["trace_id"] for r in judged(agents)}, timeout_s=timeout_s,
                     what="every sent trace judged")
    await asyncio.sleep(2.0)  # deliberate: a trace judged twice would show up now
    return judged(agents)


def check_once(records: list[dict], sent: list[str]) -> None:
    """Every sent trace judged exactly once (by whichever agent)."""
    counts = collections.Counter(r["trace_id"] for r in records)
    twice = {t: [r.get("agent") for r in records if r["trace_id"] == t] for t, n in counts.items() if n > 1}
    assert twice == {}
    assert sorted(counts) == sorted(sent)


def check_whole(records: list[dict]) -> None:
    """Nothing judged on part of its data: each judged trace has its 3 documents and its answer."""
    partial = [r["trace_id"] for r in records if len(r["documents"]) != 3 or not r["answer"]]
    assert partial == []


async def check_split(kafka: Broker, topic: str, sent: list[str]) -> None:
    parts = await parts_per_trace(kafka.bootstrap, topic)
    assert set(parts) == set(sent)
    split = [t for t, n in parts.items() if n > 1]
    assert len(split) >= 5, f"only {len(split)} of {len(sent)} traces were written in parts"


def faithfulness_steady(records: list[dict], since: float) -> None:
    before = [r["scores"][sc.METRIC_FAITHFULNESS] for r in records if r["time"] < since]
    after = [r["scores"][sc.METRIC_FAITHFULNESS] for r in records if r["time"] >= since]
    assert len(before) >= 5 and len(after) >= 5
    assert abs(statistics.fmean(after) - statistics.fmean(before)) < 0.05


async def test_second_agent_joins_mid_stream(kafka: Broker, topic: str, group: str, tmp_path: Path,
                                             otelcol: Callable[..., OtelCollector],
                                             fleet: Callable[[str], AgentProc]) -> None:
    collector = await setup(kafka, topic, otelcol)
    a = fleet("a")
    await wait_for_first(a)
    app = App(collector.traces_endpoint, tmp_path)
    await eventually(lambda: len(app.sent()) >= 40, timeout_s=120, what="traffic flowing")
    joined_at = time.time()
    b = fleet("b")
    await eventually(lambda: b.partitions() > 0, timeout_s=120, what="b joins")
    sent = await app.finish()
    records = await all_judged([a, b], sent)
    assert len(sent) == REQUESTS
    check_once(records, sent)
    assert a.records() and b.records()
    check_whole(records)
    faithfulness_steady(records, joined_at)
    await check_split(kafka, topic, sent)
    assert a.terminate() == 0 and b.terminate() == 0


async def test_rolling_restart_of_two_agents(kafka: Broker, topic: str, group: str, tmp_path: Path,
                                             otelcol: Callable[..., OtelCollector],
                                             fleet: Callable[[str], AgentProc]) -> None:
    collector = await setup(kafka, topic, otelcol)
    a, b = fleet("a"), fleet("b")
    await wait_for_first(a)
    await wait_for_first(b)
    app = App(collector.traces_endpoint, tmp_path)
    await eventually(lambda: len(app.sent()) >= 30, timeout_s=120, what="traffic flowing")
    restart_at = time.time()
    assert await asyncio.to_thread(a.terminate) == 0  # a Deployment replaces agent a ...
    a2 = fleet("a2")
    await wait_for_first(a2)
    assert await asyncio.to_thread(b.terminate) == 0  # ... then agent b
    b2 = fleet("b2")
    await wait_for_first(b2)
    sent = await app.finish()
    agents = [a, b, a2, b2]
    records = await all_judged(agents, sent)
    check_once(records, sent)  # 200 of 200, none twice
    check_whole(records)
    faithfulness_steady(records, restart_at)
    await check_split(kafka, topic, sent)
    assert a2.terminate() == 0 and b2.terminate() == 0


async def test_kill_9_of_one_agent(kafka: Broker, topic: str, group: str, tmp_path: Path,
                                   otelcol: Callable[..., OtelCollector],
                                   fleet: Callable[[str], AgentProc]) -> None:
    collector = await setup(kafka, topic, otelcol)
    a, b = fleet("a"), fleet("b")
    await wait_for_first(a)
    await wait_for_first(b)
    app = App(collector.traces_endpoint, tmp_path)
    await eventually(lambda: len(a.records()) >= 15, timeout_s=120, what="agent a judging")
    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait(10)
    sent = await app.finish()
    records = await all_judged([a, b], sent, timeout_s=300)
    counts = collections.Counter(r["trace_id"] for r in records)
    assert set(counts) == set(sent)  # nothing lost
    check_whole(records)  # and nothing judged on part of its data
    twice = sum(n - 1 for n in counts.values())
    redelivered = b.metric(f"{sc.M_KAFKA_HANDOVER}_total", kind=sc.HANDOVER_REDELIVERED)
    assert redelivered is not None and twice <= redelivered  # every trace judged twice was counted
    await check_split(kafka, topic, sent)
    assert b.terminate() == 0
