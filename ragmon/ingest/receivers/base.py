"""What the OTLP/HTTP and OTLP/gRPC receivers share, written once: the ``SpanSource`` surface
(port, ready, release, the sink taken at start), decoding off the event loop, and the path of one
export — the bearer token, refusal while closed or busy, reading, decoding, admission and
submission (``admission.py``), each failure counted and logged once — ending in an outcome that
each receiver answers in its own protocol:

* a ``SpanBatch``: taken (OTLP/HTTP 200, gRPC OK, with ``partial_success`` when spans were malformed);
* a ``Busy``: not taken, retry later (503 ``Retry-After`` / ``UNAVAILABLE`` with ``RetryInfo``);
* a ``DecodeError``: a malformed export, not retryable (its ``reason`` picks the status);
* a ``Refused``: no or wrong bearer token, a body that did not arrive in time (OTLP/HTTP: 408), or a
  bug of ours while reading or decoding.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable, Hashable
from typing import ClassVar

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ... import semconv as sc
from ..._log import LogOnce
from ..._security import BearerToken
from ...errors import DecodeError
from ..decode.otlp import SpanBatch, decode_export_request
from ..source import LatencyOnly, SourceMetrics, SpanSink, latency_only_of
from .admission import Busy, ExportAdmission
from .settings import GrpcReceiverSettings, HttpReceiverSettings

RETRY_AFTER_S = 1  # seconds; exporters add their own exponential backoff on top
_THREAD_DECODE_BYTES = 256 * 1024  # smaller exports decode faster than a thread hop
_SHUTDOWN_TIMEOUT_S = 10.0  # at most this (and at most shutdown_grace_s) for exports in progress at stop


class Refused(enum.Enum):
    """An export refused before it was decoded, not for its data (``DecodeError``) nor for the agent's
    load (``Busy``)."""

    TOKEN = "token"  # no or wrong bearer token
    READ_TIMEOUT = "read_timeout"  # the body did not arrive in time (counted by the receiver that reads it)
    INTERNAL = "internal"  # a bug of ours while reading or decoding


class OtlpReceiver:
    """The part of a ``SpanSource`` both OTLP receivers are. A subclass names itself (``name``: the
    ``source`` label), words its log lines (``LABEL``, ``RETRY_ANSWER``, ``EXPORT``, ``TOKEN_REFUSED``),
    listens in ``start`` after ``_attach`` and calls ``_listening`` once bound, and answers what
    ``_receive`` returns."""

    name: str  # the `source` label (SpanSource.name)
    LABEL: ClassVar[str]  # how the log names the receiver: "OTLP receiver"
    RETRY_ANSWER: ClassVar[str]  # how the log names a retry-later answer: "503 Retry-After"
    EXPORT: ClassVar[str]  # how the log names one export: "request"
    TOKEN_REFUSED: ClassVar[str]  # what the log says of an export without the bearer token

    def __init__(self, config: HttpReceiverSettings | GrpcReceiverSettings, metrics: SourceMetrics,
                 log_once: LogOnce) -> None:
        self._host = config.receiver_host
        self._max_body = config.receiver_max_body_bytes
        self._token = BearerToken(config.receiver_bearer_token) if config.receiver_bearer_token else None
        self._shutdown_timeout = min(config.shutdown_grace_s, _SHUTDOWN_TIMEOUT_S)
        self._metrics = metrics
        self._log_once = log_once
        self._sink: SpanSink | None = None
        self._latency_only: LatencyOnly | None = None  # the sink's (source.latency_only_of)
        self._port: int | None = None
        self._accepting = False
        self._decode_slot = asyncio.Semaphore(1)  # large exports are decoded one at a time
        self._admission = ExportAdmission(self.name, self.LABEL, self.RETRY_ANSWER, metrics, log_once)

    @property
    def port(self) -> int | None:
        """The bound port (the configured one, or the one the OS chose for port 0); None before start."""
        return self._port

    def ready(self) -> bool:
        return self._accepting

    def release(self, token: Hashable) -> None:
        """Deliveries are acknowledged by the response; nothing to release."""

    def _attach(self, sink: SpanSink) -> None:
        self._sink = sink
        self._latency_only = latency_only_of(sink)

    def _listening(self, port: int) -> None:
        self._port = port
        self._accepting = True

    def _count(self, outcome: str) -> None:
        self._admission.count(outcome)

    def _auth_failed(self, reason: str, refusal: str) -> None:
        """A client refused (``reason``: token or TLS): counted, and ``refusal`` logged once per reason."""
        counter = getattr(self._metrics, "auth_failures", None)  # AgentMetrics has it; other sinks may not
        if counter is not None:
            counter.labels(sc.ENDPOINT_RECEIVER, reason).inc()
        self._log_once.warning(f"auth:{reason}", "%s: %s", self.LABEL, refusal)

    async def _receive(self, authorization: str | None, load: Callable[[], Awaitable[SpanBatch | Busy | Refused]]
                       ) -> SpanBatch | Busy | DecodeError | Refused:
        """One export, from its ``authorization`` value to its outcome, every outcome counted: ``load``
        reads and decodes it (with ``_decode``), or counts and returns why it could not read it."""
        if self._token is not None and not self._token.accepts(authorization):
            self._count(sc.OUTCOME_UNAUTHORIZED)
            self._auth_failed(sc.AUTH_FAILED_TOKEN, self.TOKEN_REFUSED)
            return Refused.TOKEN
        sink = self._sink
        busy = self._admission.before_reading(sink, self._accepting)
        if busy is not None:
            return busy
        assert sink is not None  # before_reading refuses without one
        try:
            loaded = await load()
        except DecodeError as exc:
            self._count(sc.OUTCOME_REJECTED)
            self._metrics.dropped.labels(exc.reason).inc()
            self._log_once.warning(f"decode:{exc.reason}", "%s: rejected %s (%s): %s", self.LABEL, self.EXPORT,
                                   exc.reason, exc)
            return exc
        except Exception:  # noqa: BLE001  # a bug of ours, not the client's fault: answer, count, log once
            self._count(sc.OUTCOME_REJECTED)
            self._log_once.warning("internal", "%s: internal error while decoding", self.LABEL, exc_info=True)
            return Refused.INTERNAL
        if isinstance(loaded, Busy | Refused):
            return loaded
        busy = await self._admission.submit(sink, loaded)
        return loaded if busy is None else busy

    async def _decode(self, body: bytes, content_type: str, content_encoding: str | None) -> SpanBatch:
        """Decode an export body; a large one in a worker thread, one at a time (its decoded objects are
        several times its size: decoding them all at once would multiply the peak memory)."""
        if len(body) > _THREAD_DECODE_BYTES:
            async with self._decode_slot:
                return await asyncio.to_thread(self._decode_now, body, content_type, content_encoding)
        return self._decode_now(body, content_type, content_encoding)

    def _decode_now(self, body: bytes, content_type: str, content_encoding: str | None) -> SpanBatch:
        return decode_export_request(body, content_type=content_type, content_encoding=content_encoding,
                                     max_bytes=self._max_body, latency_only=self._latency_only)


def export_response(batch: SpanBatch) -> ExportTraceServiceResponse:
    """The OTLP answer to a taken export: ``partial_success`` says which spans were malformed."""
    response = ExportTraceServiceResponse()
    if batch.rejected_spans:
        response.partial_success.rejected_spans = batch.rejected_spans
        response.partial_success.error_message = "; ".join(batch.errors)
    return response
