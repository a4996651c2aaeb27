"""OTLP/gRPC trace receiver (``TraceService/Export``), a ``grpc.aio`` server implementing ``SpanSource``.

It serves opentelemetry-proto's generated ``opentelemetry.proto.collector.trace.v1.TraceService``
(the service name and method come from the generated descriptor), with one difference from
``trace_service_pb2_grpc.add_TraceServiceServicer_to_server``: the request reaches the handler
as raw bytes, so it is decoded by the same function as an OTLP/HTTP protobuf body
(``otlp.decode_export_request``: same limits, same validation) and a malformed message is
counted and answered ``INVALID_ARGUMENT`` instead of failing inside grpc unseen.

Answers, as the OTLP/gRPC specification says:

* ``OK`` with an ``ExportTraceServiceResponse``; ``partial_success.rejected_spans`` and
  ``error_message`` when some spans were malformed;
* ``INVALID_ARGUMENT`` for a malformed message (not retryable: exporters drop the batch);
  ``RESOURCE_EXHAUSTED`` (from grpc itself) for a message over ``receiver_max_body_bytes``;
* ``UNAVAILABLE`` with a ``google.rpc.RetryInfo`` (1 s) while the agent applies back-pressure
  (judge backlog full, or the backlog cannot take this export's traces: the agent's ``admit``)
  or while shutting down: exporters back off and send again rather than lose the spans;
* ``UNAUTHENTICATED`` without the configured bearer token (``authorization`` metadata).

gzip-compressed messages (``grpc-encoding: gzip``, the SDK exporters' ``compression=gzip``) are
inflated by grpc; the size limit applies to the inflated message. At most
``_MAX_CONCURRENT_RPCS`` exports are handled at once (beyond that grpc answers the retryable
``RESOURCE_EXHAUSTED``), which bounds the memory of messages in progress.

TLS and the bearer token are the OTLP/HTTP receiver's settings (``--receiver-tls-*``,
``--receiver-bearer-token``); both receivers listen on ``--receiver-host``, so the rule that a
non-loopback bind needs TLS or a token (docs/security.md) covers this one too.

Accounting is the HTTP receiver's: ``ragmon_receiver_requests_total{source="grpc",outcome}``,
``ragmon_spans_received_total{source="grpc"}``, ``ragmon_dropped_total{reason}``; each kind of
bad input is logged once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import duration_pb2
from google.rpc import error_details_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from ... import semconv as sc
from ..._log import LogOnce
from ..._security import BearerToken
from ...errors import ConfigError, DecodeError
from ..decode.otlp import CONTENT_TYPE_PROTOBUF, SpanBatch, decode_export_request
from ..source import LatencyOnly, SourceMetrics, SpanSink, latency_only_of
from .admission import ExportAdmission
from .http_receiver import RETRY_AFTER_S

__all__ = ["GrpcReceiverSettings", "OtlpGrpcReceiver"]

log = logging.getLogger(__name__)

_SERVICE = trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"]
SERVICE_NAME = _SERVICE.full_name  # opentelemetry.proto.collector.trace.v1.TraceService
EXPORT_METHOD = _SERVICE.methods_by_name["Export"].name
_THREAD_DECODE_BYTES = 256 * 1024  # smaller messages decode faster than a thread hop
_MAX_CONCURRENT_RPCS = 8  # exports in progress at once (each holds up to receiver_max_body_bytes)
_SHUTDOWN_TIMEOUT_S = 10.0
_RETRY_INFO_KEY = "google.rpc.retryinfo-bin"  # where OTLP exporters read the throttle delay


@dataclass(frozen=True, slots=True)
class GrpcReceiverSettings:
    receiver_host: str
    receiver_grpc_port: int | None
    receiver_max_body_bytes: int
    shutdown_grace_s: float
    receiver_tls_cert_file: str | None = None
    receiver_tls_key_file: str | None = None
    receiver_tls_client_ca_file: str | None = None
    receiver_bearer_token: str | None = None


class _Refusal(Exception):
    """Answer the export with this status (raised inside the handler, turned into an abort)."""

    def __init__(self, code: grpc.StatusCode, message: str, *, retry: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry = retry


class OtlpGrpcReceiver:
    name = "grpc"

    def __init__(self, config: GrpcReceiverSettings, metrics: SourceMetrics) -> None:
        self._config = config
        self._host = config.receiver_host
        self._requested_port = config.receiver_grpc_port if config.receiver_grpc_port is not None else 0
        self._max_body = config.receiver_max_body_bytes
        self._token = BearerToken(config.receiver_bearer_token) if config.receiver_bearer_token else None
        self._shutdown_timeout = min(config.shutdown_grace_s, _SHUTDOWN_TIMEOUT_S)
        self._metrics = metrics
        self._log_once = LogOnce(log)
        self._sink: SpanSink | None = None
        self._latency_only: LatencyOnly | None = None  # the sink's (source.latency_only_of)
        self._server: Any = None  # grpc.aio.Server
        self._port: int | None = None
        self._accepting = False
        self._decode_slot = asyncio.Semaphore(1)  # large messages are decoded one at a time
        self._admission = ExportAdmission(self.name, "OTLP/gRPC receiver", "UNAVAILABLE with RetryInfo", metrics,
                                          self._log_once)

    @property
    def port(self) -> int | None:
        """The bound port (the configured one, or the one the OS chose for port 0); None before start."""
        return self._port

    def ready(self) -> bool:
        return self._accepting

    def release(self, token: Hashable) -> None:
        """gRPC deliveries are acknowledged by the response; nothing to release."""

    async def start(self, sink: SpanSink) -> None:
        if self._server is not None:
            return
        self._sink = sink
        self._latency_only = latency_only_of(sink)
        credentials = self._credentials()
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", self._max_body),
                ("grpc.max_send_message_length", 1 << 20),
                ("grpc.so_reuseport", 0),  # a second agent on the same port must fail, not share it
            ],
            maximum_concurrent_rpcs=_MAX_CONCURRENT_RPCS,
        )
        handler = grpc.unary_unary_rpc_method_handler(self._export)  # raw bytes in and out
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME,
                                                                              {EXPORT_METHOD: handler}),))
        address = f"{_host_for_grpc(self._host)}:{self._requested_port}"
        error: RuntimeError | None = None
        try:
            if credentials is not None:
                port = server.add_secure_port(address, credentials)
            else:
                port = server.add_insecure_port(address)
        except RuntimeError as exc:  # grpc raises for a port it cannot bind (newer versions)
            port, error = 0, exc
        if not port:
            await server.stop(None)
            raise ConfigError(
                "--receiver-host/--receiver-grpc-port (RAGMON_RECEIVER_HOST/RAGMON_RECEIVER_GRPC_PORT)",
                f"cannot listen on {self._host}:{self._requested_port} (OTLP/gRPC): "
                f"{error or 'address in use or not local'}",
            ) from error
        await server.start()
        self._server = server
        self._port = int(port)
        self._accepting = True
        log.info("OTLP/gRPC receiver listening on %s:%d%s%s", self._host, self._port,
                 " (TLS)" if credentials is not None else "",
                 " (bearer token required)" if self._token is not None else "")

    def _credentials(self) -> grpc.ServerCredentials | None:
        c = self._config
        if not c.receiver_tls_cert_file or not c.receiver_tls_key_file:
            return None
        try:
            with open(c.receiver_tls_key_file, "rb") as f:
                key = f.read()
            with open(c.receiver_tls_cert_file, "rb") as f:
                cert = f.read()
            ca = None
            if c.receiver_tls_client_ca_file:
                with open(c.receiver_tls_client_ca_file, "rb") as f:
                    ca = f.read()
        except OSError as exc:
            raise ConfigError("--receiver-tls-cert-file / --receiver-tls-key-file / --receiver-tls-client-ca-file",
                              f"cannot load TLS files: {exc}") from exc
        return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=ca is not None)

    async def stop(self) -> None:
        """Stop accepting; exports in progress get a bounded grace period. Idempotent."""
        self._accepting = False
        server, self._server = self._server, None
        if server is None:
            return
        await server.stop(self._shutdown_timeout)

    # --- request handling -----------------------------------------------------------------------
    async def _export(self, request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        try:
            return await self._handle(request, context)
        except _Refusal as refusal:
            trailing: tuple[tuple[str, str | bytes], ...] = ()
            if refusal.retry:
                info = error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=RETRY_AFTER_S))
                trailing = ((_RETRY_INFO_KEY, info.SerializeToString()),)
            await context.abort(refusal.code, refusal.message, trailing_metadata=trailing)
            raise AssertionError("unreachable: abort raises") from None

    async def _handle(self, request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        if self._token is not None and not self._token.accepts(_authorization(context)):
            self._count(sc.OUTCOME_UNAUTHORIZED)
            counter = getattr(self._metrics, "auth_failures", None)
            if counter is not None:
                counter.labels(sc.ENDPOINT_RECEIVER, sc.AUTH_FAILED_TOKEN).inc()
            self._log_once.warning("auth", "OTLP/gRPC receiver: refused an export (missing or wrong bearer token)")
            raise _Refusal(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        sink = self._sink
        busy = self._admission.before_reading(sink, self._accepting)
        if busy is not None:
            raise _Refusal(grpc.StatusCode.UNAVAILABLE, busy.message, retry=True)
        assert sink is not None  # before_reading refuses without one
        try:
            if len(request) > _THREAD_DECODE_BYTES:
                async with self._decode_slot:
                    batch = await asyncio.to_thread(self._decode, request)
            else:
                batch = self._decode(request)
        except DecodeError as exc:
            self._count(sc.OUTCOME_REJECTED)
            self._metrics.dropped.labels(exc.reason).inc()
            self._log_once.warning(f"decode:{exc.reason}", "OTLP/gRPC receiver: rejected export (%s): %s",
                                   exc.reason, exc)
            code = (grpc.StatusCode.RESOURCE_EXHAUSTED if exc.reason == sc.DROP_BODY_TOO_LARGE
                    else grpc.StatusCode.INVALID_ARGUMENT)
            raise _Refusal(code, str(exc)) from None
        except Exception:  # noqa: BLE001  # a bug of ours, not the client's fault: answer, count, log once
            self._count(sc.OUTCOME_REJECTED)
            self._log_once.warning("internal", "OTLP/gRPC receiver: internal error while decoding", exc_info=True)
            raise _Refusal(grpc.StatusCode.INTERNAL, "internal error while decoding the request") from None
        del request

        busy = await self._admission.submit(sink, batch)
        if busy is not None:
            raise _Refusal(grpc.StatusCode.UNAVAILABLE, busy.message, retry=True)
        return _export_response(batch)

    def _decode(self, message: bytes) -> SpanBatch:
        # grpc already inflated a gzip message; the bytes are an ExportTraceServiceRequest
        return decode_export_request(message, content_type=CONTENT_TYPE_PROTOBUF, content_encoding=None,
                                     max_bytes=self._max_body, latency_only=self._latency_only)

    def _count(self, outcome: str) -> None:
        self._admission.count(outcome)


def _authorization(context: grpc.aio.ServicerContext[bytes, bytes]) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key.lower() == "authorization":
            return value if isinstance(value, str) else None
    return None


def _host_for_grpc(host: str) -> str:
    """grpc wants IPv6 literals in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _export_response(batch: SpanBatch) -> bytes:
    response = trace_service_pb2.ExportTraceServiceResponse()
    if batch.rejected_spans:
        response.partial_success.rejected_spans = batch.rejected_spans
        response.partial_success.error_message = "; ".join(batch.errors)
    return response.SerializeToString()
