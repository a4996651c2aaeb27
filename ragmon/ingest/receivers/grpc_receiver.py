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

The path of one export (token, admission, decoding, submission, accounting) is the HTTP receiver's,
written once in ``base.py``; this module listens and answers in gRPC.

TLS and the bearer token are the OTLP/HTTP receiver's settings (``--receiver-tls-*``,
``--receiver-bearer-token``); both receivers listen on ``--receiver-host``, so the rule that a
non-loopback bind needs TLS or a token (docs/security.md) covers this one too.

Accounting is the HTTP receiver's: ``ragmon_receiver_requests_total{source="grpc",outcome}``,
``ragmon_spans_received_total{source="grpc"}``, ``ragmon_dropped_total{reason}``; each kind of
bad input is logged once.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, NoReturn

import grpc
from google.protobuf import duration_pb2
from google.rpc import error_details_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from ... import semconv as sc
from ..._log import LogOnce
from ...errors import ConfigError, DecodeError
from ..decode.otlp import CONTENT_TYPE_PROTOBUF
from ..source import SourceMetrics, SpanSink
from .admission import Busy
from .base import RETRY_AFTER_S, OtlpReceiver, Refused, export_response
from .settings import GrpcReceiverSettings

__all__ = ["OtlpGrpcReceiver"]

log = logging.getLogger(__name__)

_SERVICE = trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"]
SERVICE_NAME = _SERVICE.full_name  # opentelemetry.proto.collector.trace.v1.TraceService
EXPORT_METHOD = _SERVICE.methods_by_name["Export"].name
_MAX_CONCURRENT_RPCS = 8  # exports in progress at once (each holds up to receiver_max_body_bytes)
_RETRY_INFO_KEY = "google.rpc.retryinfo-bin"  # where OTLP exporters read the throttle delay


class OtlpGrpcReceiver(OtlpReceiver):
    name = "grpc"
    LABEL = "OTLP/gRPC receiver"
    RETRY_ANSWER = "UNAVAILABLE with RetryInfo"
    EXPORT = "export"
    TOKEN_REFUSED = "refused an export (missing or wrong bearer token)"

    def __init__(self, config: GrpcReceiverSettings, metrics: SourceMetrics) -> None:
        super().__init__(config, metrics, LogOnce(log))
        self._config = config
        self._requested_port = config.receiver_grpc_port if config.receiver_grpc_port is not None else 0
        self._server: Any = None  # grpc.aio.Server

    async def start(self, sink: SpanSink) -> None:
        if self._server is not None:
            return
        self._attach(sink)
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
        self._listening(int(port))
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
        # grpc already inflated a gzip message; the bytes are an ExportTraceServiceRequest
        outcome = await self._receive(_authorization(context),
                                      functools.partial(self._decode, request, CONTENT_TYPE_PROTOBUF, None))
        if isinstance(outcome, Busy):
            await _abort(context, grpc.StatusCode.UNAVAILABLE, outcome.message, retry=True)
        elif isinstance(outcome, DecodeError):
            await _abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED if outcome.reason == sc.DROP_BODY_TOO_LARGE
                         else grpc.StatusCode.INVALID_ARGUMENT, str(outcome))
        elif outcome is Refused.TOKEN:
            await _abort(context, grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        elif isinstance(outcome, Refused):  # INTERNAL (grpc reads the message itself: no READ_TIMEOUT)
            await _abort(context, grpc.StatusCode.INTERNAL, "internal error while decoding the request")
        return export_response(outcome).SerializeToString()


async def _abort(context: grpc.aio.ServicerContext[bytes, bytes], code: grpc.StatusCode, message: str,
                 retry: bool = False) -> NoReturn:
    """Answer the export with ``code`` (``retry``: with a ``RetryInfo`` of ``RETRY_AFTER_S``)."""
    trailing: tuple[tuple[str, str | bytes], ...] = ()
    if retry:
        info = error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=RETRY_AFTER_S))
        trailing = ((_RETRY_INFO_KEY, info.SerializeToString()),)
    await context.abort(code, message, trailing_metadata=trailing)
    raise AssertionError("unreachable: abort raises")


def _authorization(context: grpc.aio.ServicerContext[bytes, bytes]) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key.lower() == "authorization":
            return value if isinstance(value, str) else None
    return None


def _host_for_grpc(host: str) -> str:
    """grpc wants IPv6 literals in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
