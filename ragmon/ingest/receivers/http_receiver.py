"""OTLP/HTTP trace receiver (``POST /v1/traces``), an aiohttp server implementing ``SpanSource``.

Responses follow the OTLP/HTTP specification so any OpenTelemetry SDK or Collector exporter
behaves correctly against it:

* 200 with an ``ExportTraceServiceResponse`` in the request's encoding; when some spans were
  malformed, ``partial_success.rejected_spans`` and ``error_message`` say so;
* 400 (malformed body), 413 (too large), 415 (unsupported content type or encoding) with a
  ``google.rpc.Status`` body — not retryable, so exporters drop the batch;
* 405 for other methods; 401 without the configured bearer token; 408 when the body does not
  arrive within ``receiver_read_timeout_s`` (the connection is closed);
* 503 with ``Retry-After`` (retryable, so exporters back off and send again rather than lose the
  spans) while the agent applies back-pressure: before reading, when the judge backlog is full;
  after decoding, when the backlog cannot take the traces this export would send to the judge
  (the agent's ``admit``), so an export is never answered 200 and then skipped as
  ``backlog_full``; and while request bodies in progress already hold 4x
  ``receiver_max_body_bytes`` (bytes are reserved as they arrive, not from the declared length,
  so silent clients that only announce a large body hold nothing).

Malformed HTTP that aiohttp's parser refuses before any handler runs (a negative or duplicate
Content-Length, Content-Length with chunked encoding, ...) is counted as
``ragmon_dropped_total{reason="malformed_http_request"}`` and logged once, without a traceback.

Optional TLS (server certificate, optionally client certificates: mutual TLS) and bearer-token
authentication; refusals are counted in ``ragmon_auth_failures_total{endpoint="receiver"}``
(docs/security.md).

Gzip bodies are inflated by the decoder with an output bound (aiohttp's own decompression is
off), so ``receiver_max_body_bytes`` limits what is decoded, not just what is sent.

Every request is counted in ``ragmon_receiver_requests_total{source="http",outcome}``, spans
in ``ragmon_spans_received_total`` and bad input in ``ragmon_dropped_total{reason}``; each kind
of bad input is logged once. Large bodies are decoded in a worker thread, one at a time (the
decoded Python objects of a 16 MiB body are several times its size: decoding them all at once
would multiply the peak memory); spans are handed to the sink on the loop in slices of
``admission.SUBMIT_SLICE`` with a yield between them, so one 250,000-span export never stalls the loop
(liveness probes, other exports). Exports are submitted one at a time, so admission and
submission cannot interleave.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Hashable

from aiohttp import hdrs, web
from aiohttp.http_exceptions import HttpProcessingError
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ... import semconv as sc
from ..._log import LogOnce
from ..._security import BearerToken, server_ssl_context
from ...errors import ConfigError, DecodeError
from ..decode.otlp import CONTENT_TYPE_JSON, CONTENT_TYPE_PROTOBUF, SpanBatch, decode_export_request, media_type
from ..source import LatencyOnly, SourceMetrics, SpanSink, latency_only_of
from .admission import Busy, ExportAdmission
from .settings import HttpReceiverSettings

__all__ = ["TRACES_PATH", "OtlpHttpReceiver"]

log = logging.getLogger(__name__)

TRACES_PATH = "/v1/traces"
RETRY_AFTER_S = 1  # seconds; exporters add their own exponential backoff on top
_THREAD_DECODE_BYTES = 256 * 1024  # smaller bodies decode faster than a thread hop
_READ_CHUNK = 64 * 1024
_SHUTDOWN_TIMEOUT_S = 10.0
# Bodies being read or decoded at once may hold at most this many times the per-request limit;
# beyond it new requests get a retryable 503 instead of growing memory without bound.
_BODY_BUDGET_FACTOR = 4

# google.rpc.Code values used in Status bodies
_RPC_INVALID_ARGUMENT = 3
_RPC_DEADLINE_EXCEEDED = 4
_RPC_UNAUTHENTICATED = 16
_RPC_RESOURCE_EXHAUSTED = 8
_RPC_UNAVAILABLE = 14
_RPC_UNIMPLEMENTED = 12
_RPC_INTERNAL = 13

_HTTP_STATUS = {
    sc.DROP_MALFORMED_BODY: (400, _RPC_INVALID_ARGUMENT),
    sc.DROP_BODY_TOO_LARGE: (413, _RPC_RESOURCE_EXHAUSTED),
    sc.DROP_UNSUPPORTED_MEDIA: (415, _RPC_INVALID_ARGUMENT),
}


class OtlpHttpReceiver:
    name = "http"

    def __init__(self, config: HttpReceiverSettings, metrics: SourceMetrics) -> None:
        self._host = config.receiver_host
        self._requested_port = config.receiver_port
        self._max_body = config.receiver_max_body_bytes
        self._read_timeout = config.receiver_read_timeout_s
        self._config = config
        self._token = BearerToken(config.receiver_bearer_token) if config.receiver_bearer_token else None
        self._scheme = "https" if config.receiver_tls_cert_file else "http"
        self._shutdown_timeout = min(config.shutdown_grace_s, _SHUTDOWN_TIMEOUT_S)
        self._metrics = metrics
        self._log_once = LogOnce(log)
        self._sink: SpanSink | None = None
        self._latency_only: LatencyOnly | None = None  # the sink's (source.latency_only_of)
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._accepting = False
        self._in_flight = 0
        self._budget = _BodyBudget(_BODY_BUDGET_FACTOR * self._max_body)
        self._decode_slot = asyncio.Semaphore(1)  # large bodies are decoded one at a time
        self._admission = ExportAdmission(self.name, "OTLP receiver", "503 Retry-After", metrics, self._log_once)
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def port(self) -> int | None:
        """The bound port (the configured one, or the one the OS chose for port 0); None before start."""
        return self._port

    def ready(self) -> bool:
        return self._accepting

    def release(self, token: Hashable) -> None:
        """HTTP deliveries are acknowledged by the response; nothing to release."""

    async def start(self, sink: SpanSink) -> None:
        if self._runner is not None:
            return
        self._sink = sink
        self._latency_only = latency_only_of(sink)
        ssl_context = self._ssl_context()
        # client_max_size guards aiohttp's own readers; we read the body ourselves, bounded.
        app = web.Application(client_max_size=self._max_body + 1)
        app.router.add_route("*", TRACES_PATH, self._handle)
        app.router.add_route("*", "/{path:.*}", self._not_found)  # counted and explained, not silent
        # auto_decompress=False: gzip is inflated by the decoder with an output bound (zip bombs)
        # and the size limit applies to what we actually decode. logger: requests aiohttp's parser
        # refuses never reach a handler; this is where they are counted (and logged once).
        runner = web.AppRunner(app, access_log=None, handle_signals=False,
                               shutdown_timeout=self._shutdown_timeout, auto_decompress=False,
                               logger=_ProtocolErrorLog(self))
        await runner.setup()
        site = web.TCPSite(runner, self._host, self._requested_port, reuse_address=True,
                           ssl_context=ssl_context)
        try:
            await site.start()
        except OSError as exc:  # port in use, address not local, no permission: a setting is wrong
            await runner.cleanup()
            raise ConfigError(
                "--receiver-host/--receiver-port (RAGMON_RECEIVER_HOST/RAGMON_RECEIVER_PORT)",
                f"cannot listen on {self._host}:{self._requested_port}: {exc.strerror or exc}",
            ) from exc
        self._runner = runner
        self._port = _bound_port(runner, self._requested_port)
        self._accepting = True
        log.info("OTLP/HTTP receiver listening on %s://%s:%d%s%s", self._scheme, self._host, self._port,
                 TRACES_PATH, " (bearer token required)" if self._token is not None else "")

    def _ssl_context(self) -> ssl.SSLContext | None:
        c = self._config
        if not c.receiver_tls_cert_file or not c.receiver_tls_key_file:
            return None
        return server_ssl_context(
            c.receiver_tls_cert_file, c.receiver_tls_key_file, c.receiver_tls_client_ca_file,
            lambda: self._auth_failed(sc.AUTH_FAILED_TLS),
            setting="--receiver-tls-cert-file / --receiver-tls-key-file / --receiver-tls-client-ca-file")

    def _auth_failed(self, reason: str) -> None:
        counter = getattr(self._metrics, "auth_failures", None)  # AgentMetrics has it; other sinks may not
        if counter is not None:
            counter.labels(sc.ENDPOINT_RECEIVER, reason).inc()
        self._log_once.warning(f"auth:{reason}", "OTLP receiver: refused a client (%s authentication failed)",
                               reason)

    async def stop(self) -> None:
        """Stop accepting connections, let in-flight requests finish (bounded). Idempotent.

        aiohttp's own graceful shutdown stops reading from open connections, which starves a
        request whose body is still arriving; so the listener is closed first, requests in
        progress are awaited here, and only then are the connections closed. A new request
        on a kept-alive connection meanwhile gets a retryable 503."""
        self._accepting = False
        runner, self._runner = self._runner, None
        if runner is None:
            return
        for site in list(runner.sites):
            await site.stop()
        try:
            await asyncio.wait_for(self._idle.wait(), self._shutdown_timeout)
        except TimeoutError:
            log.warning("OTLP receiver: %d request(s) still in progress after %.1f s; closing them",
                        self._in_flight, self._shutdown_timeout)
        await runner.cleanup()

    # --- request handling -----------------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self._in_flight += 1
        self._idle.clear()
        try:
            return await self._handle_request(request)
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.set()

    async def _not_found(self, request: web.Request) -> web.StreamResponse:
        """A wrong path (typically ``OTEL_EXPORTER_OTLP_ENDPOINT=.../v1/traces``, to which the
        exporter appends ``/v1/traces`` again): 404, counted as rejected, explained once in the log."""
        self._count(sc.OUTCOME_REJECTED)
        self._log_once.warning(
            "path", "OTLP receiver: %s %s answered 404: spans are received on %s only. Point "
            "OTEL_EXPORTER_OTLP_ENDPOINT at the base URL (http://HOST:PORT) or "
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT at the full URL (http://HOST:PORT%s)",
            request.method, request.path[:200], TRACES_PATH, TRACES_PATH)
        return _status_response(404, _RPC_UNIMPLEMENTED, f"no such path {request.path[:200]!r}; "
                                f"OTLP/HTTP traces are received on {TRACES_PATH}",
                                _response_type(request.headers.get(hdrs.CONTENT_TYPE)))

    async def _handle_request(self, request: web.Request) -> web.StreamResponse:
        if request.method != hdrs.METH_POST:
            self._count(sc.OUTCOME_REJECTED)
            self._log_once.warning("method", "OTLP receiver: %s %s is not allowed (POST only)",
                                   request.method, TRACES_PATH)
            return _status_response(405, _RPC_UNIMPLEMENTED, f"method {request.method} not allowed; use POST",
                                    CONTENT_TYPE_JSON, headers={hdrs.ALLOW: hdrs.METH_POST})
        response_type = _response_type(request.headers.get(hdrs.CONTENT_TYPE))
        if self._token is not None and not self._token.accepts(request.headers.get(hdrs.AUTHORIZATION)):
            self._count(sc.OUTCOME_UNAUTHORIZED)
            self._auth_failed(sc.AUTH_FAILED_TOKEN)
            response = _status_response(401, _RPC_UNAUTHENTICATED, "missing or wrong bearer token", response_type,
                                        headers={hdrs.WWW_AUTHENTICATE: 'Bearer realm="ragmon"'})
            response.force_close()  # do not read (or keep a connection for) an unauthenticated body
            return response
        sink = self._sink
        busy = self._admission.before_reading(sink, self._accepting)
        if busy is not None:
            return _retry_later(busy, response_type)
        assert sink is not None  # before_reading refuses without one
        try:
            with self._budget.reservation() as reservation:
                try:
                    async with asyncio.timeout(self._read_timeout):
                        body = await self._read_body(request, reservation)
                except TimeoutError:
                    return self._read_timed_out(response_type)
                if len(body) > _THREAD_DECODE_BYTES:
                    async with self._decode_slot:
                        batch = await asyncio.to_thread(self._decode, request, body)
                else:
                    batch = self._decode(request, body)
                del body
        except DecodeError as exc:
            return self._reject(exc, response_type)
        except _BudgetExceeded:
            self._count(sc.OUTCOME_THROTTLED)
            self._log_once.warning("body_budget", "OTLP receiver: %d bytes of request bodies in progress; "
                                   "answering 503 Retry-After", self._budget.used)
            return _retry_later(Busy("too many large requests in progress; retry later"), response_type)
        except Exception:  # noqa: BLE001  # a bug of ours, not the client's fault: answer, count, log once
            self._count(sc.OUTCOME_REJECTED)
            self._log_once.warning("internal", "OTLP receiver: internal error while decoding", exc_info=True)
            return _status_response(500, _RPC_INTERNAL, "internal error while decoding the request",
                                    response_type)

        busy = await self._admission.submit(sink, batch)
        if busy is not None:
            return _retry_later(busy, response_type)
        return _export_response(batch, response_type)

    def _read_timed_out(self, response_type: str) -> web.Response:
        self._count(sc.OUTCOME_REJECTED)
        self._metrics.dropped.labels(sc.DROP_READ_TIMEOUT).inc()
        self._log_once.warning("read_timeout", "OTLP receiver: request body not received within %.1f s; "
                               "answering 408 and closing the connection", self._read_timeout)
        response = _status_response(408, _RPC_DEADLINE_EXCEEDED,
                                    f"request body not received within {self._read_timeout:g} s", response_type)
        response.force_close()
        return response

    def protocol_error(self, exc: BaseException) -> None:
        """aiohttp refused a request before any handler ran (called by ``_ProtocolErrorLog``)."""
        self._count(sc.OUTCOME_REJECTED)
        self._metrics.dropped.labels(sc.DROP_MALFORMED_REQUEST).inc()
        self._log_once.warning("protocol", "OTLP receiver: refused malformed HTTP (400): %s",
                               str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__)

    async def _read_body(self, request: web.Request, reservation: _Reservation) -> bytes:
        declared = request.content_length
        if declared is not None and declared > self._max_body:
            raise DecodeError(f"body of {declared} bytes exceeds {self._max_body}", reason=sc.DROP_BODY_TOO_LARGE)
        media = media_type(request.headers.get(hdrs.CONTENT_TYPE))
        if media not in (CONTENT_TYPE_PROTOBUF, CONTENT_TYPE_JSON):
            # Fail before reading: no point buffering a body we will not decode.
            raise DecodeError(
                f"unsupported content type {media or '(none)'!r}; use {CONTENT_TYPE_PROTOBUF} or {CONTENT_TYPE_JSON}",
                reason=sc.DROP_UNSUPPORTED_MEDIA)
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in request.content.iter_chunked(_READ_CHUNK):
                size += len(chunk)
                if size > self._max_body:
                    raise DecodeError(f"body exceeds {self._max_body} bytes", reason=sc.DROP_BODY_TOO_LARGE)
                # reserve what arrives, not what is announced: a client that declares 16 MiB and
                # goes silent must not keep everyone else out
                reservation.take(len(chunk))
                chunks.append(chunk)
        except (ConnectionError, HttpProcessingError, asyncio.IncompleteReadError) as exc:
            # the client went away or broke the framing mid-body: nothing decodable arrived
            raise DecodeError(f"request body incomplete after {size} bytes: {exc}") from exc
        return b"".join(chunks)

    def _decode(self, request: web.Request, body: bytes) -> SpanBatch:
        return decode_export_request(
            body,
            content_type=request.headers.get(hdrs.CONTENT_TYPE, ""),
            content_encoding=request.headers.get(hdrs.CONTENT_ENCODING),
            max_bytes=self._max_body,
            latency_only=self._latency_only,
        )

    def _reject(self, exc: DecodeError, response_type: str) -> web.Response:
        self._count(sc.OUTCOME_REJECTED)
        self._metrics.dropped.labels(exc.reason).inc()
        self._log_once.warning(f"decode:{exc.reason}", "OTLP receiver: rejected request (%s): %s", exc.reason, exc)
        http_status, rpc_code = _HTTP_STATUS.get(exc.reason, (400, _RPC_INVALID_ARGUMENT))
        return _status_response(http_status, rpc_code, str(exc), response_type)

    def _count(self, outcome: str) -> None:
        self._admission.count(outcome)


# --- helpers ------------------------------------------------------------------------------------
class _BudgetExceeded(Exception):
    pass


class _BodyBudget:
    """Bytes of request bodies held by requests in progress (single event loop: no lock)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def reservation(self) -> _Reservation:
        return _Reservation(self)


class _Reservation:
    def __init__(self, budget: _BodyBudget) -> None:
        self._budget = budget
        self._taken = 0

    def take(self, size: int) -> None:
        """Reserve ``size`` more bytes or raise ``_BudgetExceeded``. A request alone may
        always use the per-request maximum, so the budget never starves everything."""
        budget = self._budget
        if budget.used + size > budget.limit and budget.used - self._taken > 0:
            raise _BudgetExceeded
        budget.used += size
        self._taken += size

    def __enter__(self) -> _Reservation:
        return self

    def __exit__(self, *exc: object) -> None:
        self._budget.used -= self._taken
        self._taken = 0


def _bound_port(runner: web.AppRunner, requested: int) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    return requested


class _ProtocolErrorLog:
    """The ``logger`` aiohttp's request handler reports protocol errors to. A request its parser
    refuses (bad Content-Length, smuggling-shaped framing, a TLS or non-HTTP client) gets a 400
    from aiohttp and never reaches a handler: count it here and log it once, without the
    traceback aiohttp would print for every one."""

    def __init__(self, receiver: OtlpHttpReceiver) -> None:
        self._receiver = receiver

    def exception(self, msg: str, *args: object, exc_info: object = None, **kw: object) -> None:
        self._report(msg, args, exc_info, logging.WARNING)

    def debug(self, msg: str, *args: object, exc_info: object = None, **kw: object) -> None:
        self._report(msg, args, exc_info, logging.DEBUG)

    def _report(self, msg: str, args: tuple[object, ...], exc_info: object, level: int) -> None:
        if isinstance(exc_info, HttpProcessingError):
            self._receiver.protocol_error(exc_info)
            return
        if isinstance(exc_info, BaseException) and level >= logging.WARNING:
            self._receiver._log_once.warning(f"aiohttp:{type(exc_info).__name__}", "OTLP receiver: " + msg,
                                             *args, exc_info=True)
            return
        log.log(level, msg, *args)


def _response_type(content_type: str | None) -> str:
    """Answer in the request's encoding; JSON when the request's type is unusable."""
    return CONTENT_TYPE_PROTOBUF if media_type(content_type) == CONTENT_TYPE_PROTOBUF else CONTENT_TYPE_JSON


def _encode(message: Message, content_type: str) -> bytes:
    if content_type == CONTENT_TYPE_PROTOBUF:
        return message.SerializeToString()
    return json_format.MessageToJson(message, indent=None).encode("utf-8")


def _export_response(batch: SpanBatch, content_type: str) -> web.Response:
    response = ExportTraceServiceResponse()
    if batch.rejected_spans:
        response.partial_success.rejected_spans = batch.rejected_spans
        response.partial_success.error_message = "; ".join(batch.errors)
    return web.Response(status=200, body=_encode(response, content_type), content_type=content_type)


def _retry_later(busy: Busy, content_type: str) -> web.Response:
    """503 with Retry-After: the export was not taken, send it again later."""
    return _status_response(503, _RPC_UNAVAILABLE, busy.message, content_type,
                            headers={hdrs.RETRY_AFTER: str(RETRY_AFTER_S)})


def _status_response(http_status: int, rpc_code: int, message: str, content_type: str,
                     headers: dict[str, str] | None = None) -> web.Response:
    status = status_pb2.Status(code=rpc_code, message=message)
    return web.Response(status=http_status, body=_encode(status, content_type), content_type=content_type,
                        headers=headers)
