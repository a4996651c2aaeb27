"""OpenTelemetry span exporter that writes OTLP to Kafka, the way the Collector's kafkaexporter does.

Each trace in an export batch becomes one message: the serialized OTLP
``ExportTraceServiceRequest`` (``otlp_proto``) keyed by the hex trace id, so the default
partitioner keeps a trace on one partition (the Collector calls this
``partition_traces_by_id``). A trace too large for one message is split into several with the
same key; the agent reassembles traces across messages.

It never blocks or raises into the application: ``export`` encodes and enqueues into a bounded
buffer and returns at once; a daemon thread with its own asyncio loop runs an
``AIOKafkaProducer``. While the broker is unreachable messages wait in the buffer and are
retried; when the buffer is full new spans are dropped, counted in ``dropped_spans`` and logged
once. Requires the ``kafka`` extra (``pip install 'ragmon[kafka]'``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ..backoff import Backoff
from ..closing import close_quietly

log = logging.getLogger("ragmon.sdk.kafka")

COMPRESSIONS = (None, "gzip", "lz4", "zstd", "snappy")
_RETRY_BACKOFF_S = (0.2, 5.0)  # Backoff base and cap (equal jitter)
_SECURITY_KEYS = frozenset({
    "security_protocol", "sasl_mechanism", "sasl_plain_username", "sasl_plain_password",
    "ssl_context", "ssl_cafile", "ssl_certfile", "ssl_keyfile", "client_id", "acks",
    "linger_ms", "request_timeout_ms", "max_batch_size", "enable_idempotence",
})


@dataclass(slots=True)
class _Message:
    key: bytes
    value: bytes
    spans: int


class KafkaSpanExporter(SpanExporter):
    """``SpanExporter`` writing one ``otlp_proto`` message per trace to ``topic``.

    ``security`` accepts aiokafka's own keyword arguments (``security_protocol``,
    ``sasl_mechanism``, ``sasl_plain_username``, ``sasl_plain_password``, ``ssl_context``), plus
    ``ssl_cafile``/``ssl_certfile``/``ssl_keyfile`` from which a TLS context is built.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str = "otlp_spans",
        compression: str | None = "gzip",
        max_buffer_spans: int = 10_000,
        max_message_bytes: int = 1_000_000,
        **security: Any,
    ) -> None:
        try:
            import aiokafka  # noqa: F401  (fail here, in the app's init, not in the thread)
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise ImportError("KafkaSpanExporter needs aiokafka: pip install 'ragmon[kafka]'") from exc
        if compression is not None:
            compression = compression.strip().lower() or None
            if compression == "none":
                compression = None
        if compression not in COMPRESSIONS:
            raise ValueError(f"compression must be one of gzip, lz4, zstd, snappy or None; got {compression!r}")
        if max_buffer_spans < 1:
            raise ValueError(f"max_buffer_spans must be >= 1, got {max_buffer_spans}")
        unknown = set(security) - _SECURITY_KEYS
        if unknown:
            raise TypeError(f"unknown KafkaSpanExporter arguments: {', '.join(sorted(unknown))}")
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.compression = compression
        self.max_buffer_spans = max_buffer_spans
        self.max_message_bytes = max_message_bytes
        self._producer_opts = _producer_options(bootstrap_servers, compression, max_message_bytes, security)

        #: spans written to Kafka (acknowledged by the broker)
        self.sent_spans = 0
        #: messages written to Kafka
        self.sent_messages = 0
        #: spans lost: buffer full, a span larger than max_message_bytes, or left over at shutdown
        self.dropped_spans = 0

        self._cond = threading.Condition()
        self._queue: collections.deque[_Message] = collections.deque()
        self._buffered = 0  # spans queued or in flight (bounded by max_buffer_spans)
        self._closed = False
        self._logged: set[str] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._thread_main, name="ragmon-kafka-exporter", daemon=True)
        self._thread.start()
        self._ready.wait(5.0)

    # --- SpanExporter -----------------------------------------------------------------------
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._closed:
            return SpanExportResult.FAILURE
        try:
            messages = self._encode(spans)
        except Exception as exc:  # never raise into the app
            self._count_drop(len(spans), "encode", "ragmon: could not encode spans for Kafka: %r", exc)
            return SpanExportResult.FAILURE
        accepted = True
        with self._cond:
            for message in messages:
                if self._buffered + message.spans > self.max_buffer_spans:
                    accepted = False
                    self._count_drop(
                        message.spans, "full",
                        "ragmon: Kafka export buffer full (%d spans; broker %s slow or down); "
                        "dropping spans and counting them in dropped_spans",
                        self.max_buffer_spans, self.bootstrap_servers)
                    continue
                self._queue.append(message)
                self._buffered += message.spans
        self._notify()
        return SpanExportResult.SUCCESS if accepted else SpanExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Wait (bounded) until everything buffered is acknowledged by the broker."""
        deadline = time.monotonic() + timeout_millis / 1000
        with self._cond:
            while self._buffered > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.1))
        return True

    def shutdown(self, timeout_millis: int = 10_000) -> None:
        if self._closed:
            return
        self.force_flush(timeout_millis)
        self._closed = True
        self._notify()
        self._thread.join(timeout=max(1.0, timeout_millis / 1000))
        with self._cond:
            if self._buffered:
                self._count_drop(self._buffered, "shutdown",
                                 "ragmon: %d spans still unsent to Kafka at shutdown were dropped",
                                 self._buffered)
                self._queue.clear()
                self._buffered = 0

    @property
    def buffered_spans(self) -> int:
        """Spans waiting for or in flight to the broker."""
        return self._buffered

    # --- encoding -----------------------------------------------------------------------------
    def _encode(self, spans: Sequence[ReadableSpan]) -> list[_Message]:
        by_trace: dict[int, list[ReadableSpan]] = {}
        for span in spans:
            ctx = span.context
            if ctx is None:
                continue
            by_trace.setdefault(ctx.trace_id, []).append(span)
        out: list[_Message] = []
        for trace_id, group in by_trace.items():
            key = format(trace_id, "032x").encode()
            out.extend(self._split(key, group))
        return out

    def _split(self, key: bytes, group: list[ReadableSpan]) -> list[_Message]:
        """One message per trace, halved until each fits ``max_message_bytes``."""
        value = encode_spans(group).SerializeToString()
        if len(value) <= self.max_message_bytes:
            return [_Message(key, value, len(group))]
        if len(group) == 1:
            self._count_drop(1, "oversize", "ragmon: a span of %d bytes exceeds max_message_bytes=%d; dropped",
                             len(value), self.max_message_bytes)
            return []
        mid = len(group) // 2
        return self._split(key, group[:mid]) + self._split(key, group[mid:])

    def _count_drop(self, spans: int, kind: str, msg: str, *args: Any) -> None:
        self.dropped_spans += spans
        if kind not in self._logged:
            self._logged.add(kind)
            log.warning(msg, *args)

    # --- background producer thread ----------------------------------------------------------------
    def _notify(self) -> None:
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # loop already closed
                loop.call_soon_threadsafe(wake.set)

    def _thread_main(self) -> None:
        # A Runner, not a bare loop: on the way out it cancels and awaits the tasks aiokafka leaves
        # behind (connection attempts, the sender), so no socket or pending task outlives the thread.
        with asyncio.Runner() as runner:
            self._loop = runner.get_loop()
            try:
                runner.run(self._produce_forever())
            except Exception as exc:  # pragma: no cover - last resort, the app must not notice
                log.warning("ragmon: Kafka exporter thread stopped: %r", exc)
            finally:
                self._ready.set()

    async def _produce_forever(self) -> None:
        from aiokafka import AIOKafkaProducer

        self._wake = asyncio.Event()
        self._ready.set()
        producer: AIOKafkaProducer | None = None
        backoff = Backoff(*_RETRY_BACKOFF_S)
        attempt = 0  # failed connects / sends in a row
        outage = False
        try:
            while not (self._closed and not self._queue):
                if producer is None:
                    candidate = AIOKafkaProducer(**self._producer_opts)
                    try:
                        await candidate.start()
                    except Exception as exc:
                        await _quiet_stop(candidate)
                        if not outage:
                            outage = True
                            log.warning("ragmon: Kafka broker %s unreachable, buffering up to %d spans: %r",
                                        self.bootstrap_servers, self.max_buffer_spans, exc)
                        if self._closed:
                            return
                        await self._sleep(backoff.delay(attempt))
                        attempt += 1
                        continue
                    producer = candidate
                    attempt = 0
                    if outage:
                        outage = False
                        log.info("ragmon: Kafka broker %s reachable again", self.bootstrap_servers)
                message = self._pop()
                if message is None:
                    if self._closed:
                        return
                    self._wake.clear()
                    if not self._queue:
                        await self._sleep(1.0)
                    continue
                try:
                    fut = await producer.send(self.topic, message.value, key=message.key)
                except Exception as exc:  # metadata timeout while the broker is down, ...
                    self._requeue(message)
                    if self._closed:
                        return
                    if not outage:
                        outage = True
                        log.warning("ragmon: Kafka send to %s failed, retrying: %r", self.bootstrap_servers, exc)
                    await asyncio.sleep(backoff.delay(attempt))
                    attempt += 1
                    continue
                attempt = 0
                fut.add_done_callback(lambda f, m=message: self._delivered(f, m))
        finally:
            if producer is not None:
                await _quiet_stop(producer)

    async def _sleep(self, seconds: float) -> None:
        assert self._wake is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=seconds)

    def _pop(self) -> _Message | None:
        with self._cond:
            return self._queue.popleft() if self._queue else None

    def _requeue(self, message: _Message) -> None:
        with self._cond:
            self._queue.appendleft(message)

    def _delivered(self, fut: asyncio.Future[Any], message: _Message) -> None:
        error = None if fut.cancelled() else fut.exception()
        if fut.cancelled() or error is not None:
            # aiokafka gave up on this batch (broker down longer than its timeout): try again
            # later; the buffer bound still holds because the spans never left it.
            if not self._closed and getattr(error, "retriable", False):
                self._requeue(message)
                return
            with self._cond:
                self._buffered = max(0, self._buffered - message.spans)
                self._count_drop(message.spans, "undelivered",
                                 "ragmon: Kafka refused or could not take spans (%r); dropped", error)
                self._cond.notify_all()
            return
        with self._cond:
            self._buffered = max(0, self._buffered - message.spans)
            self.sent_spans += message.spans
            self.sent_messages += 1
            self._cond.notify_all()


def _producer_options(bootstrap_servers: str, compression: str | None, max_message_bytes: int,
                      security: dict[str, Any]) -> dict[str, Any]:
    opts: dict[str, Any] = dict(security)
    cafile = opts.pop("ssl_cafile", None)
    certfile = opts.pop("ssl_certfile", None)
    keyfile = opts.pop("ssl_keyfile", None)
    if (cafile or certfile) and "security_protocol" not in opts:
        opts["security_protocol"] = "SSL"
    if "security_protocol" in opts:
        opts["security_protocol"] = str(opts["security_protocol"]).upper()
    if "sasl_mechanism" in opts:
        opts["sasl_mechanism"] = str(opts["sasl_mechanism"]).upper()
    if "SSL" in opts.get("security_protocol", "") and "ssl_context" not in opts:
        from aiokafka.helpers import create_ssl_context

        # no CA file: the system's trust store
        opts["ssl_context"] = create_ssl_context(cafile=cafile, certfile=certfile, keyfile=keyfile)
    opts.setdefault("client_id", "ragmon-sdk")
    opts.setdefault("linger_ms", 20)  # batch messages of many traces per request
    opts.setdefault("acks", 1)
    opts.setdefault("max_batch_size", 256 * 1024)
    # an encoded trace up to max_message_bytes plus batch overhead must fit one request
    opts["max_request_size"] = max(max_message_bytes + 64 * 1024, 1_048_576)
    return {"bootstrap_servers": bootstrap_servers, "compression_type": compression, **opts}


async def _quiet_stop(producer: Any) -> None:
    await close_quietly(producer.stop, 5.0, "Kafka producer", connections=producer.client.close)
