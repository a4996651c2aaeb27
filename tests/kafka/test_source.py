"""KafkaSource and KafkaSpanExporter against a real Apache Kafka broker, with a real SpanSink
that collects what it is given (no agent involved)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client import CollectorRegistry

from ragmon import semconv as sc
from ragmon.config import load_agent_config
from ragmon.errors import ConfigError
from ragmon.export.metrics import AgentMetrics
from ragmon.ingest.kafka.connection import kafka_client_options
from ragmon.ingest.kafka.dead_letters import DLQ_ERROR_HEADER, DLQ_OFFSET_HEADER
from ragmon.ingest.kafka.settings import KafkaSourceSettings
from ragmon.ingest.kafka.source import KafkaSource
from ragmon.sdk.kafka_exporter import KafkaSpanExporter

from .conftest import Broker, CollectingSink, committed_offsets, create_topic, eventually, read_all
from .kafka_traffic import KafkaTraffic, SpansTo, rag_request

pytestmark = pytest.mark.kafka

SPANS_PER_TRACE = 3  # rag root + retrieve + generate


def source_config(bootstrap: str, topic: str, group: str, **kw: Any):
    settings = {"source": "kafka", "kafka_bootstrap_servers": bootstrap, "kafka_topics": (topic,),
                "kafka_group_id": group, "kafka_commit_interval_s": 0.2, "shutdown_grace_s": 5.0, **kw}
    return load_agent_config(settings, environ={}).section(KafkaSourceSettings)


@contextlib.asynccontextmanager
async def running_source(bootstrap: str, topic: str, group: str, sink: CollectingSink,
                         **kw: Any) -> AsyncIterator[tuple[KafkaSource, AgentMetrics]]:
    metrics = AgentMetrics(CollectorRegistry())
    source = KafkaSource(source_config(bootstrap, topic, group, **kw), metrics)
    sink.release = source.release
    await source.start(sink)
    try:
        yield source, metrics
    finally:
        await source.stop()


def value(metrics: AgentMetrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


async def send_traces(traffic: KafkaTraffic, n: int, start: int = 0) -> list[str]:
    ids = [await asyncio.to_thread(traffic.send, rag_request(start + i)) for i in range(n)]
    assert await asyncio.to_thread(traffic.flush)
    return ids


@pytest.mark.parametrize("compression", ["gzip", "lz4", "zstd"])
async def test_exporter_to_source_round_trip(kafka: Broker, topic: str, group: str, compression: str) -> None:
    await create_topic(kafka.bootstrap, topic, partitions=4)
    traffic = KafkaTraffic(kafka.bootstrap, topic, compression=compression)
    try:
        sent = await send_traces(traffic, 12)
    finally:
        traffic.close()
    assert traffic.exporter.sent_spans == 12 * SPANS_PER_TRACE
    assert traffic.exporter.dropped_spans == 0

    # On the wire: otlp_proto, keyed by the hex trace id, one trace per message.
    records = await read_all(kafka.bootstrap, topic, traffic.exporter.sent_messages)
    assert len(records) == traffic.exporter.sent_messages
    partition_of: dict[bytes, set[int]] = {}
    for record in records:
        request = ExportTraceServiceRequest.FromString(record.value)
        trace_ids = {span.trace_id.hex() for rs in request.resource_spans for ss in rs.scope_spans
                     for span in ss.spans}
        assert trace_ids == {record.key.decode()}
        partition_of.setdefault(record.key, set()).add(record.partition)
    assert all(len(parts) == 1 for parts in partition_of.values())  # a trace stays on one partition
    assert {k.decode() for k in partition_of} == set(sent)

    sink = CollectingSink()
    async with running_source(kafka.bootstrap, topic, group, sink) as (source, metrics):
        await eventually(lambda: len(sink.spans) >= 12 * SPANS_PER_TRACE, what="all spans")
        await eventually(lambda: value(metrics, f"{sc.M_KAFKA_COMMITS}_total", outcome="ok") >= 1,
                         what="an offset commit")
        assert source.ready()
    assert sink.trace_ids == set(sent)
    assert len(sink.spans) == 12 * SPANS_PER_TRACE
    assert {s.resource.get("service.name") for s in sink.spans} == {"kafka-svc"}
    assert value(metrics, f"{sc.M_SPANS_RECEIVED}_total", source="kafka") == 12 * SPANS_PER_TRACE
    assert value(metrics, f"{sc.M_KAFKA_MESSAGES}_total", topic=topic) == len(records)
    assert value(metrics, f"{sc.M_KAFKA_REBALANCES}_total", kind="assigned") >= 1
    # Everything was released, so the group's committed offsets reach the end of each partition.
    ends: dict[int, int] = {}
    for record in records:
        ends[record.partition] = max(ends.get(record.partition, 0), record.offset + 1)
    committed = await committed_offsets(kafka.bootstrap, group, topic, 4)
    assert {p: o for p, o in committed.items() if p in ends} == ends


async def test_offsets_are_committed_only_below_unreleased_messages(
        kafka: Broker, topic: str, group: str) -> None:
    await create_topic(kafka.bootstrap, topic, partitions=1)
    traffic = KafkaTraffic(kafka.bootstrap, topic, batch=False)  # one message per span
    try:
        await send_traces(traffic, 2)
    finally:
        traffic.close()
    total = 2 * SPANS_PER_TRACE
    sink = CollectingSink(auto_release=False)
    async with running_source(kafka.bootstrap, topic, group, sink) as (source, metrics):
        await eventually(lambda: len(sink.tokens) == total, what="all messages handed out")
        assert [tok[2] for tok in sink.tokens] == list(range(total))
        # deliberate window, not a race: nothing may be committed during several commit intervals
        await asyncio.sleep(0.6)
        assert (await committed_offsets(kafka.bootstrap, group, topic, 1))[0] is None
        sink.release_where(lambda tok: tok[2] in (0, 1, 3))
        await eventually(lambda: value(metrics, f"{sc.M_KAFKA_COMMITS}_total", outcome="ok") >= 1,
                         what="a commit")
        assert (await committed_offsets(kafka.bootstrap, group, topic, 1))[0] == 2  # 2 still pending
        assert source.pending_messages == total - 3
    # stop() asked the sink to flush everything it held, then committed the end.
    assert sink.flushes >= 1 and not sink.held
    assert (await committed_offsets(kafka.bootstrap, group, topic, 1))[0] == total

    # A new consumer in the same group resumes after the committed offset: nothing is re-read.
    sink2 = CollectingSink()
    traffic = KafkaTraffic(kafka.bootstrap, topic, batch=False)
    try:
        await send_traces(traffic, 1)
    finally:
        traffic.close()
    last = total + SPANS_PER_TRACE - 1
    async with running_source(kafka.bootstrap, topic, group, sink2):
        # a partition is delivered in order: anything re-read would come before the last new message
        await eventually(lambda: any(tok[2] == last for tok in sink2.tokens), what="the last new message")
    assert [tok[2] for tok in sink2.tokens] == list(range(total, total + SPANS_PER_TRACE))


async def test_poison_messages_are_dead_lettered_and_skipped(kafka: Broker, topic: str, group: str) -> None:
    await create_topic(kafka.bootstrap, topic, partitions=1)
    dlq = topic + "-dlq"
    await create_topic(kafka.bootstrap, dlq, partitions=1)
    traffic = KafkaTraffic(kafka.bootstrap, topic, batch=True)
    producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap)
    await producer.start()
    try:
        good = await send_traces(traffic, 1)
        await producer.send_and_wait(topic, b"\x00\x01not protobuf\xff")
        await producer.send_and_wait(topic, b'{"resourceSpans": [')  # truncated JSON, wrong encoding too
        await producer.send_and_wait(topic, b"\x0a" + b"x" * 70_000)  # over kafka_max_message_bytes
        good += await send_traces(traffic, 1, start=1)
    finally:
        traffic.close()
        await producer.stop()

    sink = CollectingSink()
    async with running_source(kafka.bootstrap, topic, group, sink, kafka_dead_letter_topic=dlq,
                              kafka_max_message_bytes=64_000) as (source, metrics):
        await eventually(lambda: sink.trace_ids == set(good), what="the good traces after the poison")
        await eventually(lambda: source.pending_messages == 0, what="dead letters written and released")
    assert value(metrics, f"{sc.M_KAFKA_DEAD_LETTERS}_total", reason=sc.DROP_POISON_MESSAGE) == 2
    assert value(metrics, f"{sc.M_KAFKA_DEAD_LETTERS}_total", reason=sc.DROP_OVERSIZE_MESSAGE) == 1
    assert value(metrics, f"{sc.M_DROPPED}_total", reason=sc.DROP_POISON_MESSAGE) == 2
    assert value(metrics, f"{sc.M_DROPPED}_total", reason=sc.DROP_OVERSIZE_MESSAGE) == 1
    assert value(metrics, f"{sc.M_REQUESTS_RECEIVED}_total", source="kafka", outcome="rejected") == 3

    letters = sorted(await read_all(kafka.bootstrap, dlq, 3),
                     key=lambda r: int(dict(r.headers)[DLQ_OFFSET_HEADER]))
    assert len(letters) == 3
    headers = [dict(r.headers) for r in letters]
    assert sorted(int(h[DLQ_OFFSET_HEADER]) for h in headers) == [1, 2, 3]
    assert all(h["ragmon.original.topic"] == topic.encode() for h in headers)
    assert b"kafka_max_message_bytes" in headers[2][DLQ_ERROR_HEADER]
    assert letters[0].value == b"\x00\x01not protobuf\xff"
    # The partition moved past the poison: everything is committed.
    assert (await committed_offsets(kafka.bootstrap, group, topic, 1))[0] == 5


async def test_backpressure_pauses_the_partitions(kafka: Broker, topic: str, group: str) -> None:
    await create_topic(kafka.bootstrap, topic, partitions=2)
    sink = CollectingSink(pressure=True)
    async with running_source(kafka.bootstrap, topic, group, sink) as (_source, metrics):
        await eventually(lambda: value(metrics, f"{sc.M_KAFKA_REBALANCES}_total", kind="assigned") >= 1
                         and value(metrics, f"{sc.M_KAFKA_PAUSED}_total") > 0, what="paused")
        traffic = KafkaTraffic(kafka.bootstrap, topic)
        try:
            sent = await send_traces(traffic, 5)
        finally:
            traffic.close()
        # deliberate window, not a race: nothing may be fetched into memory while paused (5 polls)
        await asyncio.sleep(1.0)
        assert sink.spans == []
        def paused_s() -> float:
            return value(metrics, f"{sc.M_KAFKA_PAUSED}_total")

        await eventually(lambda: paused_s() >= 1.0, what="a second of pause accounted")  # accrues per poll
        paused = paused_s()
        assert sink.spans == []
        sink.pressure = False
        await eventually(lambda: sink.trace_ids == set(sent), what="delivery after resuming")
        resumed = paused_s()
        assert resumed < paused + 1.0
        # deliberate window, not a race: once resumed, paused time must not grow at all
        await asyncio.sleep(0.5)
        assert paused_s() == resumed
        await eventually(lambda: _lag_names(metrics) == {"0", "1"}, what="lag gauges")
    assert _lag_names(metrics) == set()  # label sets of partitions no longer assigned are removed


async def test_partitions_move_to_the_remaining_consumer(kafka: Broker, topic: str, group: str) -> None:
    await create_topic(kafka.bootstrap, topic, partitions=4)
    traffic = KafkaTraffic(kafka.bootstrap, topic)
    sink_a, sink_b = CollectingSink(auto_release=False), CollectingSink()
    metrics_a, metrics_b = AgentMetrics(CollectorRegistry()), AgentMetrics(CollectorRegistry())
    source_a = KafkaSource(source_config(kafka.bootstrap, topic, group), metrics_a)
    source_b = KafkaSource(source_config(kafka.bootstrap, topic, group), metrics_b)
    sink_a.release, sink_b.release = source_a.release, source_b.release
    try:
        await source_a.start(sink_a)
        first = await send_traces(traffic, 8)
        await eventually(lambda: sink_a.trace_ids == set(first), what="A consumes alone")
        # the gauges appear partition by partition (one position lookup each): wait for all four
        await eventually(lambda: _lag_names(metrics_a) == {"0", "1", "2", "3"}, what="A's lag on every partition")

        await source_b.start(sink_b)
        # B's join revokes some of A's partitions; A is asked to flush their traces first.
        await eventually(lambda: value(metrics_b, f"{sc.M_KAFKA_REBALANCES}_total", kind="assigned") >= 1
                         and bool(source_b.safe_offsets() or _lag_names(metrics_b)), what="B assigned",
                         timeout_s=60)
        assert value(metrics_a, f"{sc.M_KAFKA_REBALANCES}_total", kind="revoked") >= 1
        assert sink_a.flushes >= 1
        second = await send_traces(traffic, 8, start=8)
        await eventually(lambda: set(second) <= sink_a.trace_ids | sink_b.trace_ids, what="both consume")
        parts_b = await _lag_partitions(metrics_b)
        assert 0 < len(parts_b) < 4
        assert (await _lag_partitions(metrics_a)).isdisjoint(parts_b)

        await source_a.stop()  # graceful: flushes what it holds, commits, leaves the group
        assert not sink_a.held
        third = await send_traces(traffic, 8, start=16)
        await eventually(lambda: set(third) <= sink_b.trace_ids, what="B consumes everything", timeout_s=60)
        await eventually(lambda: _lag_names(metrics_b) == {"0", "1", "2", "3"}, what="B owns all partitions")
    finally:
        traffic.close()
        await source_a.stop()
        await source_b.stop()
    assert set(first + second + third) <= sink_a.trace_ids | sink_b.trace_ids
    assert not set(third) & sink_a.trace_ids
    assert _lag_names(metrics_a) == set()


def _lag_names(metrics: AgentMetrics) -> set[str]:
    return {s.labels["partition"] for f in metrics.registry.collect() for s in f.samples
            if s.name == sc.M_KAFKA_LAG}


async def _lag_partitions(metrics: AgentMetrics) -> set[str]:
    await eventually(lambda: bool(_lag_names(metrics)), what="lag gauges")
    return _lag_names(metrics)


def test_exporter_never_blocks_and_counts_drops_when_the_broker_is_down() -> None:
    from tests.helpers.net import free_port

    dead = f"127.0.0.1:{free_port()}"  # nobody listens
    exporter = KafkaSpanExporter(dead, topic="nowhere", max_buffer_spans=30)
    traffic = SpansTo(exporter, batch=False)
    for i in range(20):  # 60 spans into a 30-span buffer
        traffic.send(rag_request(i))
    assert exporter.buffered_spans == 30
    assert exporter.dropped_spans == 30
    assert exporter.sent_spans == 0
    assert not exporter.force_flush(timeout_millis=200)
    exporter.shutdown(timeout_millis=300)  # what is still buffered is dropped, and counted
    traffic.provider.shutdown()
    assert exporter.dropped_spans == 60
    assert exporter.buffered_spans == 0


async def test_exporter_splits_a_trace_too_large_for_one_message(kafka: Broker, topic: str) -> None:
    await create_topic(kafka.bootstrap, topic, partitions=2)
    traffic = KafkaTraffic(kafka.bootstrap, topic, max_message_bytes=4_000)
    big = rag_request(0)
    big.question = "lorem ipsum " * 170  # ~2 KB on each of the three spans: ~7 KB per trace
    huge = rag_request(1)
    huge.contexts = ["x" * 10_000]  # one span larger than a message may be
    try:
        trace_id = await asyncio.to_thread(traffic.send, big)
        await asyncio.to_thread(traffic.send, huge)
        assert await asyncio.to_thread(traffic.flush)
    finally:
        traffic.close()
    assert traffic.exporter.dropped_spans == 1  # the oversize retriever span of the second trace
    records = await read_all(kafka.bootstrap, topic, traffic.exporter.sent_messages)
    mine = [r for r in records if r.key.decode() == trace_id]
    assert len(mine) >= 2 and all(len(r.value) <= 4_000 for r in records)
    spans = sum(len(ss.spans) for r in mine for rs in ExportTraceServiceRequest.FromString(r.value).resource_spans
                for ss in rs.scope_spans)
    assert spans == SPANS_PER_TRACE
    assert len({r.partition for r in mine}) == 1


def _kafka_section(settings: dict[str, Any], environ: dict[str, str]) -> KafkaSourceSettings:
    return load_agent_config(settings, environ=environ).section(KafkaSourceSettings)


def test_security_settings_map_to_aiokafka_options(tmp_path) -> None:
    base = {"kafka_bootstrap_servers": "127.0.0.1:9093"}
    plain = kafka_client_options(_kafka_section(base, environ={}))
    assert plain == {"bootstrap_servers": "127.0.0.1:9093", "security_protocol": "PLAINTEXT"}
    sasl = kafka_client_options(_kafka_section(
        {**base, "kafka_security_protocol": "sasl_plaintext", "kafka_sasl_mechanism": "SCRAM-SHA-512",
         "kafka_sasl_username": "agent", "kafka_sasl_password": "s3cret"}, environ={}))
    assert sasl["security_protocol"] == "SASL_PLAINTEXT"
    assert sasl["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (sasl["sasl_plain_username"], sasl["sasl_plain_password"]) == ("agent", "s3cret")
    with pytest.raises(ConfigError, match="RAGMON_KAFKA_SASL_MECHANISM"):
        kafka_client_options(_kafka_section({**base, "kafka_security_protocol": "SASL_SSL"}, environ={}))
    with pytest.raises(ConfigError, match="username and password"):
        kafka_client_options(_kafka_section(
            {**base, "kafka_security_protocol": "SASL_PLAINTEXT", "kafka_sasl_mechanism": "PLAIN"}, environ={}))
    with pytest.raises(ConfigError, match="TLS"):
        kafka_client_options(_kafka_section(
            {**base, "kafka_security_protocol": "SSL", "kafka_ssl_cafile": str(tmp_path / "missing.pem")},
            environ={}))
    with pytest.raises(ConfigError, match="SSL or SASL_SSL"):
        kafka_client_options(_kafka_section({**base, "kafka_ssl_cafile": "/etc/ssl/ca.pem"}, environ={}))


async def _send_secured(bootstrap: str, topic: str, **exporter_kw: Any) -> list[str]:
    """Two traces through the SDK's Kafka exporter with the given security settings."""
    traffic = KafkaTraffic(bootstrap, topic, **exporter_kw)
    try:
        return await send_traces(traffic, 2)
    finally:
        traffic.close()


async def _assert_source_refused(bootstrap: str, topic: str, group: str, **settings: Any) -> None:
    """A source with these (wrong) settings is refused (it logs a warning saying so), is not ready
    and consumes nothing."""
    denied = CollectingSink()
    with _warnings_logged("ragmon") as warnings:
        async with running_source(bootstrap, topic, group, denied, **settings) as (source, _):
            await eventually(lambda: warnings, what="the source's warning that the broker refused it")
            assert not source.ready()
    assert denied.spans == []


@contextlib.contextmanager
def _warnings_logged(logger_name: str) -> Iterator[list[str]]:
    """Messages of WARNING and above logged under ``logger_name`` while the block runs."""
    messages: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    handler = Collect(logging.WARNING)
    logger = logging.getLogger(logger_name)
    logger.addHandler(handler)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)


async def test_sasl_plain_against_a_real_broker(tmp_path) -> None:
    """SASL/PLAIN end to end: the agent's settings authenticate; a wrong password is refused."""
    from tests.helpers.net import free_port

    from .conftest import BOOT_TIMEOUT_S, KafkaBroker

    sasl_port = free_port()
    broker = KafkaBroker(tmp_path / "kafka-sasl")
    broker.extra = {
        "listeners": f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port},"
                     f"CONTROLLER://127.0.0.1:{broker.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_agent="agent-secret";',
    }
    broker.start(timeout_s=BOOT_TIMEOUT_S)
    try:
        topic, group = "sasl-spans", "sasl-group"
        await create_topic(broker.bootstrap, topic, partitions=1)
        sent = await _send_secured(f"127.0.0.1:{sasl_port}", topic, security_protocol="SASL_PLAINTEXT",
                                   sasl_mechanism="PLAIN", sasl_plain_username="agent",
                                   sasl_plain_password="agent-secret")
        sasl = {"kafka_security_protocol": "SASL_PLAINTEXT", "kafka_sasl_mechanism": "PLAIN",
                "kafka_sasl_username": "agent"}
        sink = CollectingSink()
        async with running_source(f"127.0.0.1:{sasl_port}", topic, group, sink,
                                  kafka_sasl_password="agent-secret", **sasl) as (source, _):
            await eventually(lambda: sink.trace_ids == set(sent), what="spans over SASL")
            assert source.ready()
        await _assert_source_refused(f"127.0.0.1:{sasl_port}", topic, group + "-x", kafka_sasl_password="wrong",
                                     **sasl)
    finally:
        broker.stop()


def _self_signed_keystore(directory: Path) -> tuple[Path, Path]:
    """A broker key pair for 127.0.0.1 (PKCS12, made by the JDK's keytool) and its certificate as
    PEM, the CA file clients trust."""
    keystore, ca_pem = directory / "broker.p12", directory / "ca.pem"
    common = ["-keystore", str(keystore), "-storetype", "PKCS12", "-storepass", "changeit"]
    subprocess.run(["keytool", "-genkeypair", "-alias", "broker", "-keyalg", "RSA", "-keysize", "2048",
                    "-dname", "CN=127.0.0.1", "-ext", "SAN=IP:127.0.0.1", "-validity", "2",
                    "-keypass", "changeit", *common], check=True, capture_output=True)
    subprocess.run(["keytool", "-exportcert", "-alias", "broker", "-rfc", "-file", str(ca_pem), *common],
                   check=True, capture_output=True)
    return keystore, ca_pem


async def test_scram_sha_512_over_tls_against_a_real_broker(tmp_path) -> None:
    """SASL_SSL with SCRAM-SHA-512 (what managed Kafka services use): the SDK exporter and the
    agent's source authenticate and verify the broker's certificate from their CA file; a wrong
    password, or a client that does not trust the certificate, is refused and consumes nothing."""
    from tests.helpers.net import free_port

    from .conftest import BOOT_TIMEOUT_S, KafkaBroker

    keystore, ca_pem = _self_signed_keystore(tmp_path)
    tls_port = free_port()
    broker = KafkaBroker(tmp_path / "kafka-scram-tls")
    broker.format_args = ["--add-scram", "SCRAM-SHA-512=[name=agent,password=agent-secret]"]
    broker.extra = {
        "listeners": f"PLAINTEXT://127.0.0.1:{broker.port},SASL_SSL://127.0.0.1:{tls_port},"
                     f"CONTROLLER://127.0.0.1:{broker.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{broker.port},SASL_SSL://127.0.0.1:{tls_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(keystore),
        "ssl.keystore.password": "changeit",
        "ssl.key.password": "changeit",
    }
    broker.start(timeout_s=BOOT_TIMEOUT_S)
    try:
        topic, group = "scram-tls-spans", "scram-tls-group"
        await create_topic(broker.bootstrap, topic, partitions=1)
        bootstrap = f"127.0.0.1:{tls_port}"
        sent = await _send_secured(bootstrap, topic, security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                                   sasl_plain_username="agent", sasl_plain_password="agent-secret",
                                   ssl_cafile=str(ca_pem))
        settings = {"kafka_security_protocol": "SASL_SSL", "kafka_sasl_mechanism": "SCRAM-SHA-512",
                    "kafka_sasl_username": "agent"}
        sink = CollectingSink()
        async with running_source(bootstrap, topic, group, sink, kafka_sasl_password="agent-secret",
                                  kafka_ssl_cafile=str(ca_pem), **settings) as (source, _):
            await eventually(lambda: sink.trace_ids == set(sent), what="spans over SASL_SSL + SCRAM")
            assert source.ready()
        await _assert_source_refused(bootstrap, topic, group + "-denied", kafka_sasl_password="wrong",
                                     kafka_ssl_cafile=str(ca_pem), **settings)  # bad credentials
        # no CA file: the system CAs do not trust the broker's certificate
        await _assert_source_refused(bootstrap, topic, group + "-untrusted", kafka_sasl_password="agent-secret",
                                     **settings)
    finally:
        broker.stop()


def test_the_brokers_cluster_id_never_reads_as_an_option(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-storage parses ``-t -abc…`` as a missing id: 1 start in 64 failed before ids starting
    with "-" were drawn again (as Kafka's own Uuid.randomUuid does)."""
    import uuid

    import kafka_broker

    draws = iter([uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(bytes=b"\x00" * 16)])
    monkeypatch.setattr(kafka_broker.uuid, "uuid4", lambda: next(draws))
    assert kafka_broker.cluster_id() == "AAAAAAAAAAAAAAAAAAAAAA"  # the second draw; the first began with "-"
