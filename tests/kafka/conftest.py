"""A real Apache Kafka broker for the Kafka tests, plus small real collaborators.

The session broker is started by ``scripts/kafka_broker.py`` (KRaft, one node, loopback,
jars resolved with Maven into ``$RAGMON_KAFKA_HOME``), or taken from
``RAGMON_TEST_KAFKA_BOOTSTRAP`` when that is set. Tests that stop the broker get a private
one (``private_broker``) so an outage never disturbs the other tests. ``otelcol`` is the real
OpenTelemetry Collector that ``make services`` builds (``scripts/otelcol.py``): a test that needs
it fails when it cannot be built, it is never skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from ragmon.types import SpanRecord
from tests.helpers.eventually import eventually as eventually  # re-exported for the Kafka tests

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
from kafka_broker import KafkaBroker  # noqa: E402
from otelcol import CollectorError, OtelCollector, ensure_binary, validate  # noqa: E402

BOOT_TIMEOUT_S = 120.0


@dataclass
class Broker:
    """A running broker; ``stop``/``start`` keep ports and data (an outage, not a new cluster)."""

    bootstrap: str
    process: KafkaBroker | None = None

    def stop(self) -> None:
        if self.process is None:
            pytest.skip("cannot stop an external broker (RAGMON_TEST_KAFKA_BOOTSTRAP)")
        self.process.stop()

    def start(self) -> None:
        if self.process is None:
            pytest.skip("cannot start an external broker (RAGMON_TEST_KAFKA_BOOTSTRAP)")
        self.process.start(timeout_s=BOOT_TIMEOUT_S)

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    external = os.environ.get("RAGMON_TEST_KAFKA_BOOTSTRAP")
    if external:
        yield Broker(external)
        return
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka-session"))
    broker.start(timeout_s=BOOT_TIMEOUT_S)
    try:
        yield Broker(broker.bootstrap, broker)
    finally:
        broker.stop()


@pytest.fixture
def private_broker(tmp_path: Path) -> Iterator[Broker]:
    """A broker of this test's own, for tests that stop and restart it."""
    broker = KafkaBroker(tmp_path / "kafka")
    broker.start(timeout_s=BOOT_TIMEOUT_S)
    try:
        yield Broker(broker.bootstrap, broker)
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def otelcol_binary() -> Path:
    """The Collector binary; built here when missing (Go needed), a failure when it cannot be."""
    try:
        return ensure_binary()
    except (CollectorError, OSError) as exc:
        pytest.fail(f"the OpenTelemetry Collector is needed (run `make services`): {exc}", pytrace=False)


def validate_collector_config(config: Path) -> subprocess.CompletedProcess[str]:
    """``otelcol validate`` with the built Collector (a failure, not a skip, when it cannot be built)."""
    try:
        binary = ensure_binary()
    except (CollectorError, OSError) as exc:
        pytest.fail(f"the OpenTelemetry Collector is needed (run `make services`): {exc}", pytrace=False)
    return validate(config, binary)


@pytest.fixture
def otelcol(otelcol_binary: Path, tmp_path: Path) -> Iterator[Callable[..., OtelCollector]]:
    """Start Collectors writing to a broker's topic: ``otelcol(bootstrap, topic, encoding=...)``."""
    started: list[OtelCollector] = []

    def start(bootstrap: str, topic: str, encoding: str = "otlp_proto") -> OtelCollector:
        collector = OtelCollector(tmp_path / "otelcol", bootstrap, topic, encoding, binary=otelcol_binary)
        collector.start()
        started.append(collector)
        return collector

    try:
        yield start
    finally:
        for collector in started:
            collector.stop()


def _unique(request: pytest.FixtureRequest, prefix: str) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:40]
    return f"{prefix}-{base}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    return _unique(request, "t")


@pytest.fixture
def group(request: pytest.FixtureRequest) -> str:
    return _unique(request, "g")


async def create_topic(bootstrap: str, name: str, partitions: int = 4) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    except TopicAlreadyExistsError:
        pass
    finally:
        await admin.close()


async def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int | None]:
    """What the broker has stored for ``group`` (None = nothing committed)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        return {p: await consumer.committed(TopicPartition(topic, p)) for p in range(partitions)}
    finally:
        await consumer.stop()


async def read_all(bootstrap: str, topic: str, expected: int, timeout_s: float = 30.0) -> list:
    """Every record of ``topic`` from the beginning (no group), until ``expected`` are read."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False)
    await consumer.start()
    records: list = []
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while len(records) < expected and loop.time() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            for recs in batch.values():
                records.extend(recs)
        return records
    finally:
        await consumer.stop()


@dataclass
class CollectingSink:
    """A real ``SpanSink``: keeps what it gets; releases tokens at once (``auto_release``) or when
    the test (or ``flush_where``) says so; back-pressure is a switch the test flips."""

    latency_only = None  # every span decoded in full (SpanSink.latency_only)

    auto_release: bool = True
    pressure: bool = False
    spans: list[SpanRecord] = field(default_factory=list)
    tokens: list[Hashable] = field(default_factory=list)
    held: list[Hashable] = field(default_factory=list)
    flushes: int = 0
    release: Callable[[Hashable], None] | None = None

    def submit(self, spans: Sequence[SpanRecord], token: Hashable | None = None) -> None:
        self.spans.extend(spans)
        if token is None:
            return
        self.tokens.append(token)
        if self.auto_release and self.release is not None:
            self.release(token)
        else:
            self.held.append(token)

    def backpressure(self) -> bool:
        return self.pressure

    def admit(self, spans: Sequence[SpanRecord]) -> bool:
        return True

    def batch(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    async def flush_where(self, predicate: Callable[[Hashable], bool], timeout_s: float) -> None:
        self.flushes += 1
        self.release_where(predicate)

    async def hand_over_where(self, predicate: Callable[[Hashable], bool], timeout_s: float) -> set[str]:
        """This sink judges nothing partially: every held delivery is flushed, none handed on."""
        await self.flush_where(predicate, timeout_s)
        return set()

    def unaccounted(self, trace_ids: set[str]) -> set[str]:
        """It cannot tell which traces are whole: all of them (duplicates, never a loss)."""
        return set(trace_ids)

    def release_where(self, predicate: Callable[[Hashable], bool]) -> None:
        keep = []
        for token in self.held:
            if predicate(token) and self.release is not None:
                self.release(token)
            else:
                keep.append(token)
        self.held = keep

    @property
    def trace_ids(self) -> set[str]:
        return {s.trace_id for s in self.spans}
