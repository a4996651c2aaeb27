"""Kafka span source: consume OTLP messages from a consumer group, at least once.

Each message is decoded (``otlp_proto`` or ``otlp_json``, the bytes the OpenTelemetry
Collector's ``kafkaexporter`` writes) and handed to the agent with the delivery token
``(topic, partition, offset)``. The agent calls ``release(token)`` once every trace with spans
in that message is accounted for; only then may the offset be committed, so a crash replays
unfinished messages instead of losing them (the agent's trace-id dedup absorbs most replays).

Hand-off (``owner_note.py``): a partition's offset is committed only below the first
message of its earliest open trace, with the ids of the traces accounted for beyond it in the
commit's metadata. On revocation or stop the agent forgets the open traces of the partition
unjudged (``hand_over``: the sink's ``hand_over_where``); the next owner reads their messages
again, skips the listed traces and judges every other trace whole, once (``takeover.py``).

Flow control: while ``sink.backpressure()`` is True every assigned partition is paused
(``consumer.pause``) and the consumer keeps polling, so the group membership stays alive and
nothing is buffered without bound. Poison messages are counted, optionally dead-lettered (``dead_letters.py``) and
released at once: a partition never stalls on them. A broker outage is retried with backoff
and logged once.
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
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError
from aiokafka.helpers import create_ssl_context

from ... import semconv as sc
from ...backoff import Backoff
from ...closing import close_quietly
from ...errors import ConfigError, DecodeError
from ..decode.otlp import decode_traces_payload
from ..source import KafkaSourceMetrics, LatencyOnly, SpanSink, batch_of, latency_only_of
from ..tally import Tally
from .dead_letters import DeadLetters
from .offsets import OffsetTracker, PartitionKey
from .owner_note import read_note, write_note
from .settings import KafkaSourceSettings
from .takeover import Takeovers
from .waiting import WaitingFilter

log = logging.getLogger("ragmon.kafka")

Token = tuple[str, int, int]


_POLL_TIMEOUT_MS = 200
_MAX_RECORDS = 500
_LAG_INTERVAL_S = 1.0
_BACKOFF_MIN_S = 0.5
_BACKOFF_MAX_S = 10.0
_PROBE_TIMEOUT_S = 2.0
_COMMIT_TIMEOUT_S = 10.0


def kafka_client_options(config: KafkaSourceSettings) -> dict[str, Any]:
    """aiokafka connection/security keyword arguments from the agent settings.

    Raises ``ConfigError`` for combinations that cannot work (SASL without credentials)."""
    protocol = config.kafka_security_protocol.upper()
    opts: dict[str, Any] = {
        "bootstrap_servers": config.kafka_bootstrap_servers,
        "security_protocol": protocol,
    }
    if protocol in ("SSL", "SASL_SSL"):
        try:
            opts["ssl_context"] = create_ssl_context(
                cafile=config.kafka_ssl_cafile,
                certfile=config.kafka_ssl_certfile,
                keyfile=config.kafka_ssl_keyfile,
            )
        except (OSError, ValueError) as exc:
            raise ConfigError("--kafka-ssl-cafile / RAGMON_KAFKA_SSL_CAFILE",
                              f"cannot load TLS files: {exc}") from exc
    elif config.kafka_ssl_cafile or config.kafka_ssl_certfile:
        raise ConfigError("--kafka-security-protocol / RAGMON_KAFKA_SECURITY_PROTOCOL",
                          f"TLS files are set but the protocol is {protocol}; use SSL or SASL_SSL")
    if protocol.startswith("SASL_"):
        mechanism = (config.kafka_sasl_mechanism or "").upper()
        if not mechanism:
            raise ConfigError("--kafka-sasl-mechanism / RAGMON_KAFKA_SASL_MECHANISM",
                              f"required with {protocol}")
        if not (config.kafka_sasl_username and config.kafka_sasl_password):
            raise ConfigError("--kafka-sasl-username / RAGMON_KAFKA_SASL_USERNAME",
                              f"username and password are required with {protocol}")
        opts.update(sasl_mechanism=mechanism, sasl_plain_username=config.kafka_sasl_username,
                    sasl_plain_password=config.kafka_sasl_password)
    return opts


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
        self._outage = False
        self._paused_since: float | None = None
        self._last_commit = clock()
        self._last_lag = 0.0
        self._lag_labels: set[PartitionKey] = set()
        # What the rebalance listener last handed us; aiokafka's own view lags behind during a
        # rebalance, and records or lag of a revoked partition must not be touched meanwhile.
        self._assigned: set[TopicPartition] = set()
        self._loading: set[TopicPartition] = set()  # assigned, the previous owner's hand-over being read
        self._logged: set[str] = set()
        self._dead_letters = DeadLetters(config.kafka_dead_letter_topic, self._client_opts,
                                         lambda r: self._tracker.release((r.topic, r.partition), r.offset),
                                         self._log_once)
        self._commit_lock = asyncio.Lock()
        self._topic_counters: dict[str, Any] = {}
        self._spans_counter = metrics.spans_received.labels(self.name)
        self._ok_counter = metrics.requests_received.labels(self.name, "ok")
        self._tally = Tally()  # per-message counts, applied once per partition batch
        self._waiting = WaitingFilter(config.kafka_topics, config.kafka_group_id)
        self._admin: AIOKafkaAdminClient | None = None  # reads the previous owner's commit metadata
        # per assigned partition: what its previous owner handed over, and the metadata last committed
        self._takeovers = Takeovers(lambda kind, n: metrics.kafka_handover.labels(kind).inc(n))
        self._meta_sent: dict[PartitionKey, str] = {}

    # --- SpanSource -------------------------------------------------------------------------
    async def start(self, sink: SpanSink) -> None:
        """Begin consuming in the background; returns at once even when the broker is down."""
        if self._task is not None:
            return
        self._sink = sink
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
            handed: set[str] = set()
            try:
                handed = await hand_over(self._sink, lambda tok: True, self._config.shutdown_grace_s)
            except Exception as exc:  # noqa: BLE001  # stopping goes on; offsets stay where they are
                self._log_once("handover", "kafka: handing traces over on stop failed: %r", exc)
            await self._commit(consumer, final=True, handed=handed)
            log.info("kafka: stopping: %d open trace(s) left whole to the partitions' next owner", len(handed))
        await self._dead_letters.drain()
        if consumer is not None:
            await stop_consumer(consumer)
        await self._dead_letters.stop()
        if self._admin is not None:
            await close_quietly(self._admin.close, 10, "kafka admin client")
            self._admin = None
        self._account_pause()
        self._connected = False
        self._waiting.remove()
        for topic, partition in list(self._lag_labels):
            self._drop_lag(topic, partition)

    def release(self, token: Hashable) -> None:
        self._tracker.release_token(token)

    def ready(self) -> bool:
        return self._connected and not self._outage and not self._stopping

    # --- main loop ----------------------------------------------------------------------------
    async def _run(self) -> None:
        backoff = Backoff(_BACKOFF_MIN_S, _BACKOFF_MAX_S)
        attempt = 0  # failed iterations in a row
        while not self._stopping:
            try:
                if self._consumer is None:
                    await self._connect()
                    attempt = 0
                    self._recovered()
                await self._poll_once()
            except asyncio.CancelledError:
                raise
            except KafkaError as exc:
                self._on_outage(exc)
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
            if tp not in self._assigned:
                if tp in self._loading and records:  # assigned, its hand-over not read yet: later
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
            self._recovered()
        now = self._clock()
        if now - self._last_commit >= self._config.kafka_commit_interval_s:
            await self._commit(consumer)
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

    # --- offsets --------------------------------------------------------------------------------
    async def _commit(self, consumer: AIOKafkaConsumer, keys: set[PartitionKey] | None = None, *,
                      final: bool = False, handed: set[str] | None = None) -> None:
        """Commit the safe offsets, each with its hand-over metadata. ``final``: a hand-off
        (revocation, stop): every partition read is committed, ``handed`` are the traces given on
        unjudged; otherwise those that moved or whose metadata changed, the unaccounted traces
        asked of the sink."""
        self._last_commit = self._clock()
        async with self._commit_lock:
            if keys is None:
                keys = {(tp.topic, tp.partition) for tp in self._assigned}
            moved = self._tracker.to_commit(keys)
            offsets: dict[PartitionKey, int] = {}
            metadata: dict[PartitionKey, str] = {}
            for key in keys:
                safe, end, ids = self._tracker.traces_from_safe(key)
                if safe is None or end is None:
                    continue
                pending = (handed or set()) if final else unaccounted(self._sink, ids) if self._sink else ids
                inherited = self._takeovers.inherited(key)
                taken = ids - pending
                if inherited is not None and inherited.end > end:  # it had read further than we did
                    end = inherited.end
                    taken |= inherited.taken
                meta, unlisted = write_note(final, end, taken)
                if final and unlisted:
                    self._metrics.kafka_handover.labels(sc.HANDOVER_UNLISTED).inc(unlisted)
                    self._log_once("unlisted", "kafka: %d accounted traces of %s[%d] did not fit in the commit "
                                   "metadata; its next owner judges them again", unlisted, *key)
                if final or key in moved or (taken and meta != self._meta_sent.get(key)):
                    offsets[key], metadata[key] = safe, meta
            if not offsets:
                await self._probe(consumer)
                return
            try:
                # aiokafka retries a commit until the coordinator answers: bound it, so an
                # outage cannot wedge the poll loop or stop(); the next round commits again.
                await asyncio.wait_for(
                    consumer.commit({TopicPartition(t, p): (o, metadata[(t, p)]) for (t, p), o in offsets.items()}),
                    timeout=_COMMIT_TIMEOUT_S)
            except (KafkaError, TimeoutError) as exc:
                # Not fatal: the same (or a later) offset is committed next time; a rebalance
                # meanwhile means the new owner re-reads from the last committed offset.
                self._metrics.kafka_commits.labels("error").inc()
                self._on_outage(exc)
                return
            self._tracker.committed(offsets)
            self._meta_sent.update(metadata)
            self._metrics.kafka_commits.labels("ok").inc()
            self._recovered()

    async def _probe(self, consumer: AIOKafkaConsumer) -> None:
        """Nothing to commit: ask the group coordinator something cheap instead, so that an
        outage is noticed (readiness, one log line) even while no messages flow."""
        if not self._assigned:
            return
        tp = next(iter(self._assigned))
        try:
            await asyncio.wait_for(consumer.committed(tp), timeout=_PROBE_TIMEOUT_S)
        except (TimeoutError, KafkaError) as exc:
            self._on_outage(exc)
            return
        self._recovered()

    async def _on_revoked(self, revoked: set[TopicPartition]) -> None:
        self._metrics.kafka_rebalances.labels("revoked").inc()
        keys = {(tp.topic, tp.partition) for tp in revoked}
        self._assigned -= set(revoked)  # the poll loop stops handing out their records now
        for key in keys:
            self._drop_lag(*key)
        if not keys:
            return
        log.info("kafka: partitions revoked: %s", _fmt(keys))
        handed: set[str] = set()
        if self._sink is not None:
            try:
                handed = await hand_over(self._sink, lambda tok: isinstance(tok, tuple) and tok[:2] in keys,
                                         self._config.shutdown_grace_s)
            except Exception as exc:  # noqa: BLE001  # revocation must go on; offsets stay uncommitted
                self._log_once("flush", "kafka: handing over traces of revoked partitions failed: %r", exc)
        if self._consumer is not None:
            await self._commit(self._consumer, keys, final=True, handed=handed)
        log.info("kafka: handed over %s: %d open trace(s) left whole to the next owner", _fmt(keys), len(handed))
        self._tracker.forget(keys)
        self._takeovers.forget(keys)
        for key in keys:
            self._meta_sent.pop(key, None)

    async def _on_assigned(self, assigned: set[TopicPartition]) -> None:
        self._metrics.kafka_rebalances.labels("assigned").inc()
        if assigned:
            self._waiting.over()
            log.info("kafka: partitions assigned: %s", _fmt({(tp.topic, tp.partition) for tp in assigned}))
            # no record of these is handed out before the previous owner's hand-over is known
            self._loading = set(assigned)
            try:
                await self._read_owner_notes(assigned)
            finally:
                self._loading = set()
            self._takeovers.assigned((tp.topic, tp.partition) for tp in assigned)
        self._assigned = set(assigned)

    async def _read_owner_notes(self, assigned: set[TopicPartition]) -> None:
        """Read what the previous owners committed with their offsets (before any record of
        these partitions is handed out: the listener runs before the next fetch)."""
        try:
            if self._admin is None:
                admin = AIOKafkaAdminClient(client_id="ragmon-agent-handover", **self._client_opts)
                try:
                    await asyncio.wait_for(admin.start(), timeout=_COMMIT_TIMEOUT_S)
                except BaseException:
                    await close_quietly(admin.close, 10, "kafka admin client")
                    raise
                self._admin = admin
            committed = await asyncio.wait_for(
                self._admin.list_consumer_group_offsets(self._config.kafka_group_id, partitions=list(assigned)),
                timeout=_COMMIT_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001  # without it: traces in the re-read range may be judged twice
            self._log_once("handover-read", "kafka: could not read the previous owners' commit metadata (%r); "
                           "traces they accounted for may be judged again", exc)
            return
        for tp in assigned:
            self._takeovers.receive((tp.topic, tp.partition), read_note(getattr(committed.get(tp), "metadata", None)))

    # --- lag ------------------------------------------------------------------------------------
    async def _update_lag(self, consumer: AIOKafkaConsumer) -> None:
        for tp in list(self._assigned):
            highwater = consumer.highwater(tp)
            if highwater is None:
                continue
            try:
                position = await asyncio.wait_for(consumer.position(tp), timeout=1.0)
            except (TimeoutError, KafkaError, AssertionError):
                continue
            if tp not in self._assigned:
                continue  # revoked while we waited: its label set is already gone
            self._metrics.kafka_lag.labels(tp.topic, str(tp.partition)).set(max(0, highwater - position))
            self._lag_labels.add((tp.topic, tp.partition))

    def _drop_lag(self, topic: str, partition: int) -> None:
        self._lag_labels.discard((topic, partition))
        with contextlib.suppress(KeyError):
            self._metrics.kafka_lag.remove(topic, str(partition))

    # --- logging --------------------------------------------------------------------------------
    def _on_outage(self, exc: BaseException) -> None:
        if not self._outage:
            self._outage = True
            log.warning("kafka: broker %s unavailable or failing, retrying with backoff: %r",
                        self._config.kafka_bootstrap_servers, exc)

    def _recovered(self) -> None:
        if self._outage:
            self._outage = False
            log.info("kafka: broker %s reachable again", self._config.kafka_bootstrap_servers)

    def _log_once(self, key: str, msg: str, *args: Any, exc_info: bool = False) -> None:
        if key in self._logged:
            log.debug(msg, *args)
            return
        self._logged.add(key)
        log.warning(msg, *args, exc_info=exc_info)

    # --- introspection (tests, /readyz) ---------------------------------------------------------
    @property
    def pending_messages(self) -> int:
        """Messages handed to the agent and not yet released."""
        return self._tracker.pending()

    def safe_offsets(self) -> dict[PartitionKey, int | None]:
        return {key: self._tracker.safe_offset(key) for key in self._tracker.partitions()}


async def stop_consumer(consumer: AIOKafkaConsumer) -> None:
    """Stop ``consumer`` whatever it raises; when aiokafka's stop fails half-way (see ``ragmon.closing``)
    its connections are closed here, through the one private attribute it offers for them."""
    await close_quietly(consumer.stop, 30, "kafka consumer", connections=lambda: consumer._client.close())


async def hand_over(sink: SpanSink, predicate: Callable[[Hashable], bool], timeout_s: float) -> set[str]:
    """A Kafka partition goes to another agent: the sink's ``hand_over_where`` (open traces of it
    forgotten unjudged, returned), or ``flush_where`` for a sink without one (nothing handed on)."""
    hand = getattr(sink, "hand_over_where", None)
    if hand is None:
        await sink.flush_where(predicate, timeout_s)
        return set()
    return set(await hand(predicate, timeout_s))


def unaccounted(sink: SpanSink, trace_ids: set[str]) -> set[str]:
    """Which of ``trace_ids`` the sink has not accounted for yet (a sink that cannot tell: all)."""
    ask = getattr(sink, "unaccounted", None)
    if ask is None:
        return trace_ids
    try:
        return set(ask(trace_ids))
    except Exception:  # a broken probe lists nothing as taken: duplicates, never a loss
        log.debug("sink.unaccounted() failed", exc_info=True)
        return trace_ids


def _fmt(keys: set[PartitionKey]) -> str:
    return ", ".join(f"{t}[{p}]" for t, p in sorted(keys))
