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
submission cannot interleave. The path of one export (token, admission, decoding, submission,
accounting) is the gRPC receiver's, written once in ``base.py``; this module reads and answers in HTTP.
"""

from __future__ import annotations

import asyncio
import logging
import ssl

from aiohttp import hdrs, web
from aiohttp.http_exceptions import HttpProcessingError
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import status_pb2

from ... import semconv as sc
from ..._log import LogOnce
from ..._security import server_ssl_context
from ...errors import ConfigError, DecodeError
from ..decode.otlp import CONTENT_TYPE_JSON, CONTENT_TYPE_PROTOBUF, SpanBatch, media_type
from ..source import SourceMetrics, SpanSink
from .admission import Busy
from .base import RETRY_AFTER_S, OtlpReceiver, Refused, export_response
from .settings import HttpReceiverSettings

__all__ = ["TRACES_PATH", "OtlpHttpReceiver"]

log = logging.getLogger(__name__)

TRACES_PATH = "/v1/traces"
_READ_CHUNK = 64 * 1024
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


class OtlpHttpReceiver(OtlpReceiver):
    name = "http"
    LABEL = "OTLP receiver"
    RETRY_ANSWER = "503 Retry-After"
    EXPORT = "request"
    TOKEN_REFUSED = f"refused a client ({sc.AUTH_FAILED_TOKEN} authentication failed)"

    def __init__(self, config: HttpReceiverSettings, metrics: SourceMetrics) -> None:
        super().__init__(config, metrics, LogOnce(log))
        self._requested_port = config.receiver_port
        self._read_timeout = config.receiver_read_timeout_s
        self._config = config
        self._scheme = "https" if config.receiver_tls_cert_file else "http"
        self._runner: web.AppRunner | None = None
        self._in_flight = 0
        self._budget = _BodyBudget(_BODY_BUDGET_FACTOR * self._max_body)
        self._idle = asyncio.Event()
        self._idle.set()

    async def start(self, sink: SpanSink) -> None:
        if self._runner is not None:
            return
        self._attach(sink)
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
        self._listening(_bound_port(runner, self._requested_port))
        log.info("OTLP/HTTP receiver listening on %s://%s:%d%s%s", self._scheme, self._host, self._port,
                 TRACES_PATH, " (bearer token required)" if self._token is not None else "")

    def _ssl_context(self) -> ssl.SSLContext | None:
        c = self._config
        if not c.receiver_tls_cert_file or not c.receiver_tls_key_file:
            return None
        return server_ssl_context(
            c.receiver_tls_cert_file, c.receiver_tls_key_file, c.receiver_tls_client_ca_file,
            lambda: self._auth_failed(sc.AUTH_FAILED_TLS,
                                      f"refused a client ({sc.AUTH_FAILED_TLS} authentication failed)"),
            setting="--receiver-tls-cert-file / --receiver-tls-key-file / --receiver-tls-client-ca-file")

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
        outcome = await self._receive(request.headers.get(hdrs.AUTHORIZATION), lambda: self._load(request))
        if isinstance(outcome, Busy):
            return _retry_later(outcome, response_type)
        if isinstance(outcome, DecodeError):
            http_status, rpc_code = _HTTP_STATUS.get(outcome.reason, (400, _RPC_INVALID_ARGUMENT))
            return _status_response(http_status, rpc_code, str(outcome), response_type)
        if outcome is Refused.TOKEN:
            response = _status_response(401, _RPC_UNAUTHENTICATED, "missing or wrong bearer token", response_type,
                                        headers={hdrs.WWW_AUTHENTICATE: 'Bearer realm="ragmon"'})
            response.force_close()  # do not read (or keep a connection for) an unauthenticated body
            return response
        if outcome is Refused.READ_TIMEOUT:
            response = _status_response(408, _RPC_DEADLINE_EXCEEDED,
                                        f"request body not received within {self._read_timeout:g} s", response_type)
            response.force_close()
            return response
        if outcome is Refused.INTERNAL:
            return _status_response(500, _RPC_INTERNAL, "internal error while decoding the request", response_type)
        return web.Response(status=200, body=_encode(export_response(outcome), response_type),
                            content_type=response_type)

    async def _load(self, request: web.Request) -> SpanBatch | Busy | Refused:
        """Read the body (bounded in size, time and, with the other requests, in memory) and decode it."""
        try:
            with self._budget.reservation() as reservation:
                try:
                    async with asyncio.timeout(self._read_timeout):
                        body = await self._read_body(request, reservation)
                except TimeoutError:
                    self._count(sc.OUTCOME_REJECTED)
                    self._metrics.dropped.labels(sc.DROP_READ_TIMEOUT).inc()
                    self._log_once.warning("read_timeout", "OTLP receiver: request body not received within %.1f s; "
                                           "answering 408 and closing the connection", self._read_timeout)
                    return Refused.READ_TIMEOUT
                return await self._decode(body, request.headers.get(hdrs.CONTENT_TYPE, ""),
                                          request.headers.get(hdrs.CONTENT_ENCODING))
        except _BudgetExceeded:
            self._count(sc.OUTCOME_THROTTLED)
            self._log_once.warning("body_budget", "OTLP receiver: %d bytes of request bodies in progress; "
                                   "answering 503 Retry-After", self._budget.used)
            return Busy("too many large requests in progress; retry later")

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


def _retry_later(busy: Busy, content_type: str) -> web.Response:
    """503 with Retry-After: the export was not taken, send it again later."""
    return _status_response(503, _RPC_UNAVAILABLE, busy.message, content_type,
                            headers={hdrs.RETRY_AFTER: str(RETRY_AFTER_S)})


def _status_response(http_status: int, rpc_code: int, message: str, content_type: str,
                     headers: dict[str, str] | None = None) -> web.Response:
    status = status_pb2.Status(code=rpc_code, message=message)
    return web.Response(status=http_status, body=_encode(status, content_type), content_type=content_type,
                        headers=headers)
