"""Kafka span source: consume OTLP messages from a consumer group, at least once.

Each message is decoded (``otlp_proto`` or ``otlp_json``, the bytes the OpenTelemetry
Collector's ``kafkaexporter`` writes) and handed to the agent with the delivery token
``(topic, partition, offset)``. The agent calls ``release(token)`` once every trace with spans
in that message is accounted for; only then may the offset be committed, so a crash replays
unfinished messages instead of losing them (the agent's trace-id dedup absorbs most replays).

Hand-off (``handoff.py``): a partition's offset is committed only below the first message of
its earliest open trace, with the ids of the traces accounted for beyond it in the commit's
metadata (``owner_note.py``). On revocation or stop the agent forgets the open traces of the
partition unjudged (the sink's ``hand_over_where``); the next owner reads their messages again,
skips the listed traces and judges every other trace whole, once (``takeover.py``).

Flow control: while ``sink.backpressure()`` is True every assigned partition is paused
(``consumer.pause``) and the consumer keeps polling, so the group membership stays alive and
nothing is buffered without bound. Poison messages are counted, optionally dead-lettered
(``dead_letters.py``) and released at once: a partition never stalls on them. A broker outage is
retried with backoff and logged once (``connection.BrokerHealth``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Hashable
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.errors import KafkaError

from ... import semconv as sc
from ...backoff import Backoff
from ...errors import DecodeError
from ..decode.otlp import decode_traces_payload
from ..source import KafkaSourceMetrics, LatencyOnly, SpanSink, batch_of, latency_only_of
from ..tally import Tally
from .connection import BrokerHealth, kafka_client_options, stop_consumer
from .dead_letters import DeadLetters
from .handoff import PartitionHandoff
from .offsets import OffsetTracker, PartitionKey
from .settings import KafkaSourceSettings
from .waiting import WaitingFilter

__all__ = ["KafkaSource"]

log = logging.getLogger("ragmon.kafka")

Token = tuple[str, int, int]


_POLL_TIMEOUT_MS = 200
_MAX_RECORDS = 500
_LAG_INTERVAL_S = 1.0
_BACKOFF_MIN_S = 0.5
_BACKOFF_MAX_S = 10.0


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]  # aiokafka ships no type stubs
    def __init__(self, source: KafkaSource) -> None:
        self._source = source

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._source._on_revoked(revoked)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        await self._source._on_assigned(assigned)


class KafkaSource:
    """``SpanSource`` reading OTLP spans from Kafka topics in a consumer group."""

    name = "kafka"
    port = None  # a consumer listens on no port

    def __init__(self, config: KafkaSourceSettings, metrics: KafkaSourceMetrics,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._config = config
        self._metrics = metrics
        self._clock = clock
        self._client_opts = kafka_client_options(config)  # fail fast on bad security settings
        self._tracker = OffsetTracker()
        self._sink: SpanSink | None = None
        self._latency_only: LatencyOnly | None = None  # the sink's (source.latency_only_of)
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._connected = False
        self._health = BrokerHealth(config.kafka_bootstrap_servers)
        self._log_once = self._health.log_once
        self._paused_since: float | None = None
        self._last_lag = 0.0
        self._lag_labels: set[PartitionKey] = set()
        self._handoff = PartitionHandoff(config, self._client_opts, metrics, self._tracker, self._health, clock)
        self._takeovers = self._handoff.takeovers  # (read per record)
        self._dead_letters = DeadLetters(config.kafka_dead_letter_topic, self._client_opts,
                                         lambda r: self._tracker.release((r.topic, r.partition), r.offset),
                                         self._log_once)
        self._topic_counters: dict[str, Any] = {}
        self._spans_counter = metrics.spans_received.labels(self.name)
        self._ok_counter = metrics.requests_received.labels(self.name, "ok")
        self._tally = Tally()  # per-message counts, applied once per partition batch
        self._waiting = WaitingFilter(config.kafka_topics, config.kafka_group_id)

    # --- SpanSource -------------------------------------------------------------------------
    async def start(self, sink: SpanSink) -> None:
        """Begin consuming in the background; returns at once even when the broker is down."""
        if self._task is not None:
            return
        self._sink = self._handoff.sink = sink
        self._latency_only = latency_only_of(sink)
        self._stopping = False
        self._waiting.install()
        self._task = asyncio.create_task(self._run(), name="ragmon-kafka-source")

    async def stop(self) -> None:
        """Stop fetching, let the agent account for what was handed out (bounded), commit, leave."""
        if self._task is None or self._stopping:
            return
        self._stopping = True
        task, self._task = self._task, None
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        consumer, self._consumer = self._consumer, None
        if consumer is not None and self._sink is not None and self._connected:
            await self._handoff.give_up_all(consumer)
        await self._dead_letters.drain()
        if consumer is not None:
            await stop_consumer(consumer)
        await self._dead_letters.stop()
        await self._handoff.close()
        self._account_pause()
        self._connected = False
        self._waiting.remove()
        for topic, partition in list(self._lag_labels):
            self._drop_lag(topic, partition)

    def release(self, token: Hashable) -> None:
        self._tracker.release_token(token)

    def ready(self) -> bool:
        return self._connected and not self._health.outage and not self._stopping

    # --- main loop ----------------------------------------------------------------------------
    async def _run(self) -> None:
        backoff = Backoff(_BACKOFF_MIN_S, _BACKOFF_MAX_S)
        attempt = 0  # failed iterations in a row
        while not self._stopping:
            try:
                if self._consumer is None:
                    await self._connect()
                    attempt = 0
                    self._health.recovered()
                await self._poll_once()
            except asyncio.CancelledError:
                raise
            except KafkaError as exc:
                self._health.on_outage(exc)
                await asyncio.sleep(backoff.delay(attempt))
                attempt += 1
            except Exception as exc:  # noqa: BLE001  # one bad iteration never kills the source
                self._log_once("loop", "kafka: unexpected error in the consumer loop (retrying): %r", exc,
                               exc_info=True)
                await asyncio.sleep(backoff.delay(attempt))
                attempt += 1

    async def _connect(self) -> None:
        consumer = AIOKafkaConsumer(
            group_id=self._config.kafka_group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",  # a new group reads what is already there: nothing lost
            max_poll_records=_MAX_RECORDS,
            client_id="ragmon-agent",
            **self._client_opts,
        )
        consumer.subscribe(topics=list(self._config.kafka_topics), listener=_Rebalance(self))
        try:
            await consumer.start()
            await self._dead_letters.start()
        except BaseException:
            await stop_consumer(consumer)
            raise
        self._consumer = consumer
        self._connected = True
        log.info("kafka: consuming %s as group %r from %s", ",".join(self._config.kafka_topics),
                 self._config.kafka_group_id, self._config.kafka_bootstrap_servers)

    async def _poll_once(self) -> None:
        consumer = self._consumer
        assert consumer is not None and self._sink is not None
        self._apply_backpressure(consumer)
        batches = await consumer.getmany(timeout_ms=_POLL_TIMEOUT_MS, max_records=_MAX_RECORDS)
        for tp, records in batches.items():
            if tp not in self._handoff.assigned:
                if tp in self._handoff.loading and records:  # assigned, its owner note not read yet: later
                    consumer.seek(tp, records[0].offset)
                continue  # revoked while we were busy: its next owner reads these again
            # one partition's records as one batch: metric updates applied once at its end
            try:
                with batch_of(self._sink):
                    for record in records:
                        if self._sink.backpressure():
                            # Stop mid-batch and re-read the rest after resuming, rather than pushing
                            # a whole fetch (up to max_poll_records) past a full judge backlog.
                            consumer.seek(tp, record.offset)
                            break
                        self._handle(record)
            finally:
                self._tally.flush()
            await asyncio.sleep(0)  # let releases and the judge run between partitions
        if batches:
            self._health.recovered()
        now = self._clock()
        if now - self._handoff.last_commit >= self._config.kafka_commit_interval_s:
            await self._handoff.commit(consumer)
        if now - self._last_lag >= _LAG_INTERVAL_S or batches:
            self._last_lag = now
            await self._update_lag(consumer)

    def _apply_backpressure(self, consumer: AIOKafkaConsumer) -> None:
        assert self._sink is not None
        if self._sink.backpressure():
            assigned = consumer.assignment()
            if assigned:
                consumer.pause(*assigned)
            if self._paused_since is None:
                self._paused_since = self._clock()
                log.info("kafka: judge backlog full, pausing %d partition(s)", len(assigned))
            else:
                self._account_pause()
        elif self._paused_since is not None:
            self._account_pause()
            self._paused_since = None
            consumer.resume(*consumer.paused())
            log.info("kafka: judge backlog drained, resuming")

    def _account_pause(self) -> None:
        if self._paused_since is None:
            return
        now = self._clock()
        self._metrics.kafka_paused.inc(max(0.0, now - self._paused_since))
        self._paused_since = now

    def _handle(self, record: ConsumerRecord[Any, Any]) -> None:
        assert self._sink is not None
        key: PartitionKey = (record.topic, record.partition)
        token: Token = (record.topic, record.partition, record.offset)
        self._tracker.track(key, record.offset)
        counter = self._topic_counters.get(record.topic)
        if counter is None:  # label lookups cost more than the increment: keep the children
            counter = self._topic_counters[record.topic] = self._metrics.kafka_messages.labels(record.topic)
        self._tally.inc(counter)
        value: bytes = record.value or b""
        if len(value) > self._config.kafka_max_message_bytes:
            self._poison(record, sc.DROP_OVERSIZE_MESSAGE,
                         f"message of {len(value)} bytes exceeds kafka_max_message_bytes "
                         f"({self._config.kafka_max_message_bytes})")
            return
        encoding = self._config.kafka_encoding
        if encoding == "otlp_json" and value.lstrip()[:1] == b"[":
            # Some collectors (rotel's Kafka exporter) write a bare JSON array of ResourceSpans
            # instead of a TracesData object; accept both.
            value = b'{"resourceSpans":' + value + b"}"
        try:
            batch = decode_traces_payload(value, encoding, self._latency_only)
        except DecodeError as exc:
            self._poison(record, sc.DROP_POISON_MESSAGE, f"{exc.reason}: {exc}")
            return
        self._tally.inc(self._ok_counter)
        if batch.rejected_spans:
            self._metrics.dropped.labels(sc.DROP_MALFORMED_SPAN).inc(batch.rejected_spans)
            self._log_once("malformed_span", "kafka: skipped malformed spans in %s[%d]@%d: %s",
                           record.topic, record.partition, record.offset, "; ".join(batch.errors[:3]))
        spans = batch.spans
        if spans:
            trace_ids = {span.trace_id for span in spans}
            self._tracker.note_traces(key, record.offset, tuple(trace_ids))
            if self._takeovers.active:  # only just after a hand-off
                spans = self._takeovers.filter(key, record.offset, spans, trace_ids,
                                               lambda: self._highwater(record.topic, record.partition))
        if spans:
            self._tally.inc(self._spans_counter, len(spans))
            self._sink.submit(spans, token)
        else:
            self._tracker.release(key, record.offset)

    def _highwater(self, topic: str, partition: int) -> int | None:
        return self._consumer.highwater(TopicPartition(topic, partition)) if self._consumer is not None else None

    def _poison(self, record: ConsumerRecord[Any, Any], reason: str, error: str) -> None:
        self._metrics.requests_received.labels(self.name, "rejected").inc()
        self._metrics.dropped.labels(reason).inc()
        self._metrics.kafka_dead_letters.labels(reason).inc()
        self._log_once(f"poison:{reason}", "kafka: skipping poison message %s[%d]@%d (%s)%s",
                       record.topic, record.partition, record.offset, error,
                       f"; writing it to {self._dead_letters.topic}" if self._dead_letters.writing else "")
        self._dead_letters.refuse(record, reason, error)

    # --- rebalances ----------------------------------------------------------------------------
    async def _on_revoked(self, revoked: set[TopicPartition]) -> None:
        self._metrics.kafka_rebalances.labels("revoked").inc()
        keys = {(tp.topic, tp.partition) for tp in revoked}
        self._handoff.assigned -= set(revoked)  # the poll loop stops handing out their records now
        for key in keys:
            self._drop_lag(*key)
        if keys:
            await self._handoff.give_up(self._consumer, keys)

    async def _on_assigned(self, assigned: set[TopicPartition]) -> None:
        self._metrics.kafka_rebalances.labels("assigned").inc()
        if assigned:
            self._waiting.over()
        # no record of these is handed out before the previous owners' notes are read
        await self._handoff.take_over(assigned)

    # --- lag ------------------------------------------------------------------------------------
    async def _update_lag(self, consumer: AIOKafkaConsumer) -> None:
        for tp in list(self._handoff.assigned):
            highwater = consumer.highwater(tp)
            if highwater is None:
                continue
            try:
                position = await asyncio.wait_for(consumer.position(tp), timeout=1.0)
            except (TimeoutError, KafkaError, AssertionError):
                continue
            if tp not in self._handoff.assigned:
                continue  # revoked while we waited: its label set is already gone
            self._metrics.kafka_lag.labels(tp.topic, str(tp.partition)).set(max(0, highwater - position))
            self._lag_labels.add((tp.topic, tp.partition))

    def _drop_lag(self, topic: str, partition: int) -> None:
        self._lag_labels.discard((topic, partition))
        with contextlib.suppress(KeyError):
            self._metrics.kafka_lag.remove(topic, str(partition))

    # --- introspection (tests, /readyz) ---------------------------------------------------------
    @property
    def pending_messages(self) -> int:
        """Messages handed to the agent and not yet released."""
        return self._tracker.pending()

    def safe_offsets(self) -> dict[PartitionKey, int | None]:
        return {key: self._tracker.safe_offset(key) for key in self._tracker.partitions()}
