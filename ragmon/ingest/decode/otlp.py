"""The OTLP front: a request body or Kafka message -> the spans in it. Pure functions, no I/O.

Media type, compression and size bounds are checked here; the spans are read by the reader of the
format (``decoded.py`` lists them): ``otlp_proto.read_protobuf`` for protobuf — the OTLP/HTTP body
(``ExportTraceServiceRequest``) and the Collector kafkaexporter's ``otlp_proto`` payload
(``TracesData``) share the same layout (field 1 = repeated ``ResourceSpans``) — and
``otlp_json.read_json`` for OTLP/JSON.
"""

from __future__ import annotations

import zlib
from typing import overload

from ... import semconv as sc
from ...errors import DecodeError
from ..extract import LatencyOnly
from .decoded import MAX_ERROR_MESSAGES, DecodedBatch, SpanBatch
from .otlp_json import read_json
from .otlp_proto import read_protobuf

__all__ = [
    "CONTENT_TYPE_JSON",
    "CONTENT_TYPE_PROTOBUF",
    "MAX_ERROR_MESSAGES",
    "DecodedBatch",
    "SpanBatch",
    "decode_export_request",
    "decode_traces_payload",
    "media_type",
]

CONTENT_TYPE_PROTOBUF = "application/x-protobuf"
CONTENT_TYPE_JSON = "application/json"


def media_type(content_type: str | None) -> str:
    """``'application/json; charset=utf-8'`` -> ``'application/json'``."""
    return (content_type or "").split(";", 1)[0].strip().lower()


@overload
def decode_export_request(body: bytes, *, content_type: str, content_encoding: str | None = None,
                          max_bytes: int = 16 << 20, latency_only: None = None) -> DecodedBatch: ...
@overload
def decode_export_request(body: bytes, *, content_type: str, content_encoding: str | None = None,
                          max_bytes: int = 16 << 20, latency_only: LatencyOnly | None) -> SpanBatch: ...
def decode_export_request(
    body: bytes,
    *,
    content_type: str,
    content_encoding: str | None = None,
    max_bytes: int = 16 << 20,
    latency_only: LatencyOnly | None = None,
) -> SpanBatch:
    """Decode an OTLP/HTTP ``POST /v1/traces`` body. With ``latency_only`` protobuf spans of
    traces outside the judging sample are read lightly (``otlp_proto.py``; JSON is always read in full).

    Raises ``DecodeError`` with ``reason`` one of ``DROP_UNSUPPORTED_MEDIA`` (content type or
    encoding), ``DROP_BODY_TOO_LARGE`` (before or after decompression) or ``DROP_MALFORMED_BODY``.
    """
    mtype = media_type(content_type)
    if mtype not in (CONTENT_TYPE_PROTOBUF, CONTENT_TYPE_JSON):
        raise DecodeError(
            f"unsupported content type {mtype or '(none)'!r}; "
            f"use {CONTENT_TYPE_PROTOBUF} or {CONTENT_TYPE_JSON}",
            reason=sc.DROP_UNSUPPORTED_MEDIA,
        )
    if len(body) > max_bytes:
        raise DecodeError(f"body of {len(body)} bytes exceeds {max_bytes}", reason=sc.DROP_BODY_TOO_LARGE)
    raw = _decompress(body, content_encoding, max_bytes)
    if mtype == CONTENT_TYPE_JSON:
        return read_json(raw)
    return read_protobuf(raw, latency_only)


@overload
def decode_traces_payload(payload: bytes, encoding: str, latency_only: None = None) -> DecodedBatch: ...
@overload
def decode_traces_payload(payload: bytes, encoding: str, latency_only: LatencyOnly | None) -> SpanBatch: ...
def decode_traces_payload(payload: bytes, encoding: str, latency_only: LatencyOnly | None = None) -> SpanBatch:
    """Decode one Kafka message as the OTel Collector's kafkaexporter writes it.

    ``encoding`` is ``"otlp_proto"`` or ``"otlp_json"``; ``latency_only`` as for
    ``decode_export_request``. Raises ``DecodeError``.
    """
    if encoding == "otlp_proto":
        return read_protobuf(payload, latency_only)
    if encoding == "otlp_json":
        return read_json(payload)
    raise DecodeError(f"unsupported encoding {encoding!r}", reason=sc.DROP_UNSUPPORTED_MEDIA)


# --- body handling ------------------------------------------------------------------------------
def _decompress(body: bytes, content_encoding: str | None, max_bytes: int) -> bytes:
    encoding = (content_encoding or "identity").strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding == "gzip":
        wbits = 16 + zlib.MAX_WBITS
    elif encoding == "deflate":
        wbits = zlib.MAX_WBITS
    else:
        raise DecodeError(
            f"unsupported content encoding {encoding!r}; use gzip or none", reason=sc.DROP_UNSUPPORTED_MEDIA
        )
    return _bounded_inflate(body, wbits, max_bytes, encoding)


def _bounded_inflate(data: bytes, wbits: int, max_bytes: int, name: str) -> bytes:
    """Inflate at most ``max_bytes`` of output (a small gzip can expand 1000x: zip bombs).

    Handles concatenated gzip members (allowed by RFC 1952)."""
    out = bytearray()
    remaining = data
    try:
        while True:
            inflater = zlib.decompressobj(wbits)
            chunk = inflater.decompress(remaining, max_bytes + 1 - len(out))
            out += chunk
            if len(out) > max_bytes:
                raise DecodeError(
                    f"{name} body inflates beyond {max_bytes} bytes", reason=sc.DROP_BODY_TOO_LARGE
                )
            if not inflater.eof:
                if inflater.unconsumed_tail:  # output limit reached exactly; more is pending
                    raise DecodeError(
                        f"{name} body inflates beyond {max_bytes} bytes", reason=sc.DROP_BODY_TOO_LARGE
                    )
                raise DecodeError(f"truncated {name} body", reason=sc.DROP_MALFORMED_BODY)
            remaining = inflater.unused_data
            if not remaining.strip(b"\x00"):
                return bytes(out)
    except zlib.error as exc:
        raise DecodeError(f"invalid {name} body: {exc}", reason=sc.DROP_MALFORMED_BODY) from exc
