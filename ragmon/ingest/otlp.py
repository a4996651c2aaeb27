"""OTLP trace decoding: bytes -> ``SpanRecord``s. Pure functions, no I/O.

Two wire encodings, one message type. The OTLP/HTTP body (``ExportTraceServiceRequest``) and
the Collector kafkaexporter's ``otlp_proto`` payload (``TracesData``) share the same layout
(field 1 = repeated ``ResourceSpans``), so both are parsed as ``ExportTraceServiceRequest``.

OTLP/JSON differs from protobuf's canonical JSON mapping in one way that matters here:
``traceId``/``spanId``/``parentSpanId`` are *hex* strings, not base64. We rewrite them to
base64 before ``json_format.ParseDict``. Ids that are already base64 (some hand-written
clients do that) are told apart by length: 16 bytes are 32 hex chars but 24 base64 chars.
Enum values may be ints or names and int64 may be strings; ``json_format`` accepts all of
those. Unknown fields are ignored, as the OTLP spec requires of receivers. Well-formed
documents take a direct fast path (``otlp_json.py``, ~10x faster than ParseDict); anything
unusual goes through ParseDict, so odd input gets protobuf's exact semantics.

Protobuf objects never leave this module.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, overload

from google.protobuf import json_format
from google.protobuf.message import DecodeError as ProtobufDecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span, SpanFlags

from .. import semconv as sc
from ..errors import DecodeError
from ..types import AttrValue, SpanEvent, SpanRecord
from .otlp_json import fast_decode

if TYPE_CHECKING:
    from .otlp_light import LatencyOnly, LightSpan

__all__ = [
    "CONTENT_TYPE_JSON",
    "CONTENT_TYPE_PROTOBUF",
    "MAX_ERROR_MESSAGES",
    "DecodedBatch",
    "SpanBatch",
    "decode_export_request",
    "decode_traces_payload",
    "file_full_span",
    "media_type",
]

CONTENT_TYPE_PROTOBUF = "application/x-protobuf"
CONTENT_TYPE_JSON = "application/json"
MAX_ERROR_MESSAGES = 10  # per batch: enough to diagnose, bounded for the response body
MAX_ANY_VALUE_DEPTH = 32  # deeper arrays/kvlists are cut off (protobuf allows 100)

_FLAG_PARENT_IS_REMOTE = SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
_STATUS_NAMES = {0: "UNSET", 1: "OK", 2: "ERROR"}
# SPAN_KIND_UNSPECIFIED is treated as INTERNAL, as the OTel SDKs do.
_KIND_NAMES = {0: "INTERNAL", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


@dataclass(frozen=True)
class DecodedBatch:
    spans: list[SpanRecord]
    rejected_spans: int = 0  # malformed spans skipped (bad id length, ...)
    errors: list[str] = field(default_factory=list)  # short messages, at most MAX_ERROR_MESSAGES


class SpanBatch(Protocol):
    """A decoded batch that may hold ``LightSpan``s (with ``latency_only``, see otlp_light.py)."""

    @property
    def spans(self) -> Sequence[SpanRecord | LightSpan]: ...
    @property
    def rejected_spans(self) -> int: ...
    @property
    def errors(self) -> list[str]: ...


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
    traces outside the judging sample are read lightly (``otlp_light.py``; JSON is always read in full).

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
        return _decode_json(raw)
    return _decode_protobuf(raw, latency_only)


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
        return _decode_protobuf(payload, latency_only)
    if encoding == "otlp_json":
        return _decode_json(payload)
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


def _decode_protobuf(raw: bytes, latency_only: LatencyOnly | None = None) -> SpanBatch:
    try:
        request = ExportTraceServiceRequest.FromString(raw)
    except (ProtobufDecodeError, RuntimeError, ValueError) as exc:
        raise DecodeError(f"body is not a valid OTLP protobuf message: {exc}") from exc
    if latency_only is not None:
        return _convert_light(raw, request, latency_only)
    return _convert_request(request)


def _convert_light(raw: bytes, request: ExportTraceServiceRequest, latency_only: LatencyOnly) -> SpanBatch:
    """The latency-only decode: from the bytes when compiled (``otlp_scan``), else (or when the
    scan leaves it to the walk) from the parsed objects (``otlp_light``)."""
    global _scan_light, _walk_light
    if _walk_light is None:  # both import this module: resolved at first use
        from ._native import state
        from .otlp_light import convert_request_light
        from .otlp_scan import scan_request_light

        _scan_light = scan_request_light if state() == "compiled" else None  # (pure Python: the walk is faster)
        _walk_light = convert_request_light
    if _scan_light is not None:
        batch = _scan_light(raw, request, latency_only)
        if batch is not None:
            return batch
    return _walk_light(request, latency_only, len(raw))


_scan_light: Callable[[bytes, ExportTraceServiceRequest, LatencyOnly], SpanBatch | None] | None = None
_walk_light: Callable[[ExportTraceServiceRequest, LatencyOnly, int], SpanBatch] | None = None


def _decode_json(raw: bytes) -> DecodedBatch:
    try:
        # Strict UTF-8 (json.loads on bytes would let encoded surrogates through, 'surrogatepass').
        text = raw.decode("utf-8-sig")
        document = json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise DecodeError(f"body is not valid JSON: {_short(exc)}") from exc
    if _SURROGATE_ESCAPE.search(text):
        # "\ud800" escapes are valid JSON but not valid Unicode text: such a string cannot be
        # encoded as UTF-8 later (a label value once broke every /metrics scrape). Lone
        # surrogates become U+FFFD, as Go's encoding/json (the Collector) does; pairs were
        # already combined by the parser.
        document = _replace_lone_surrogates(document)
    if not isinstance(document, dict):
        raise DecodeError("OTLP/JSON body must be a JSON object with 'resourceSpans'")
    fast = fast_decode(document, _id_problem, MAX_ERROR_MESSAGES)
    if fast is not None:
        spans, rejected, errors = fast
        return DecodedBatch(spans=spans, rejected_spans=rejected, errors=errors)
    return _decode_json_reference(document)


def _decode_json_reference(document: dict[str, Any]) -> DecodedBatch:
    """OTLP/JSON through ``json_format.ParseDict``: exact protobuf semantics for any input."""
    try:
        _hex_ids_to_base64(document)
        request = json_format.ParseDict(document, ExportTraceServiceRequest(), ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError, AttributeError, RecursionError) as exc:
        raise DecodeError(f"body is not valid OTLP/JSON: {_short(exc)}") from exc
    return _convert_request(request)


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _replace_lone_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_replace_lone_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_replace_lone_surrogates(k): _replace_lone_surrogates(v) for k, v in value.items()}
    return value


# --- OTLP/JSON id fix-up -------------------------------------------------------------------------
_ID_FIELDS = {"traceId": 16, "trace_id": 16, "spanId": 8, "span_id": 8, "parentSpanId": 8, "parent_span_id": 8}


def _hex_ids_to_base64(document: dict[str, Any]) -> None:
    """Rewrite hex ids in spans (and their links) in place to what ``ParseDict`` expects."""
    for resource_spans in _dicts(document.get("resourceSpans", document.get("resource_spans"))):
        for scope_spans in _dicts(resource_spans.get("scopeSpans", resource_spans.get("scope_spans"))):
            for span in _dicts(scope_spans.get("spans")):
                _fix_ids(span)
                for link in _dicts(span.get("links")):
                    _fix_ids(link)


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, list):
        yield from (item for item in value if isinstance(item, dict))


def _fix_ids(obj: dict[str, Any]) -> None:
    for key, size in _ID_FIELDS.items():
        value = obj.get(key)
        if isinstance(value, str) and value:
            obj[key] = _id_to_base64(value, size)


def _id_to_base64(value: str, size: int) -> str:
    if len(value) == 2 * size:
        try:
            return base64.b64encode(bytes.fromhex(value)).decode("ascii")
        except ValueError:
            pass
    # Not hex of the right size: leave it to ParseDict as base64 (or let it fail there);
    # a wrong-sized id is rejected per span later, not for the whole request.
    try:
        base64.b64decode(value, validate=True)
        return value
    except (binascii.Error, ValueError):
        # Unparsable: keep the request but make this span fail the id check (one byte is
        # never a valid id; an empty string would turn a child into a root).
        return "AA=="


# --- protobuf -> SpanRecord ----------------------------------------------------------------------
def _convert_request(request: ExportTraceServiceRequest) -> DecodedBatch:
    spans: list[SpanRecord] = []
    errors: list[str] = []
    rejected = 0
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_name, span in _iter_spans(resource_spans):
            rejected += file_full_span(span, resource, scope_name, spans.append, errors)
    return DecodedBatch(spans=spans, rejected_spans=rejected, errors=errors)


def file_full_span(span: Span, resource: Mapping[str, AttrValue], scope_name: str,
                   append: Callable[[SpanRecord], None], errors: list[str]) -> int:
    """Decode ``span`` in full and ``append`` it, or keep why it is rejected in ``errors`` (the first
    ``MAX_ERROR_MESSAGES`` of a batch): one bad span never fails its batch. 1 when rejected, else 0."""
    record = _span_or_problem(span, resource, scope_name)
    if isinstance(record, SpanRecord):
        append(record)
        return 0
    if len(errors) < MAX_ERROR_MESSAGES:
        errors.append(record)
    return 1


def _span_or_problem(span: Span, resource: Mapping[str, AttrValue], scope_name: str) -> SpanRecord | str:
    """The span decoded in full, or why it is rejected."""
    problem = _validate_ids(span)
    if problem is not None:
        return problem
    try:
        return _convert_span(span, resource, scope_name)
    except (ValueError, TypeError, RecursionError) as exc:  # defensive
        return f"span {span.name[:64]!r}: {_short(exc)}"


def _iter_spans(resource_spans: ResourceSpans) -> Iterator[tuple[str, Span]]:
    for scope_spans in resource_spans.scope_spans:
        scope_name = scope_spans.scope.name
        for span in scope_spans.spans:
            yield scope_name, span


def _validate_ids(span: Span) -> str | None:
    return _id_problem(span.name, span.trace_id, span.span_id, span.parent_span_id)


def _id_problem(name: str, trace_id: bytes, span_id: bytes, parent: bytes) -> str | None:
    label = f"span {name[:64]!r}"
    if len(trace_id) != 16 or not any(trace_id):
        return f"{label}: trace_id must be 16 non-zero bytes, got {len(trace_id)} bytes"
    if len(span_id) != 8 or not any(span_id):
        return f"{label}: span_id must be 8 non-zero bytes, got {len(span_id)} bytes"
    if parent and len(parent) != 8:
        return f"{label}: parent_span_id must be empty or 8 bytes, got {len(parent)} bytes"
    return None


def _convert_span(span: Span, resource: Mapping[str, AttrValue], scope_name: str) -> SpanRecord:
    parent = span.parent_span_id
    return SpanRecord(
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        # An all-zero parent id is "no parent" in some exporters.
        parent_span_id=parent.hex() if parent and any(parent) else None,
        name=span.name,
        start_time_ns=span.start_time_unix_nano,
        end_time_ns=span.end_time_unix_nano,
        attributes=_attributes(span.attributes),
        resource=resource,
        events=tuple(
            SpanEvent(name=event.name, time_ns=event.time_unix_nano, attributes=_attributes(event.attributes))
            for event in span.events
        ),
        status_code=_STATUS_NAMES.get(span.status.code, "UNSET"),
        status_message=span.status.message,
        kind=_KIND_NAMES.get(span.kind, "INTERNAL"),
        scope_name=scope_name,
        dropped_attributes_count=span.dropped_attributes_count,
        parent_is_remote=bool(parent) and bool(span.flags & _FLAG_PARENT_IS_REMOTE),
    )


def _attributes(pairs: Iterable[KeyValue]) -> dict[str, AttrValue]:
    out: dict[str, AttrValue] = {}
    for pair in pairs:
        value = _any_value(pair.value, 0)
        if value is not None:
            out[pair.key] = value  # duplicate keys: last wins, like the SDKs
    return out


def _any_value(value: AnyValue, depth: int) -> AttrValue:
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "string_value":
        return value.string_value
    if which == "bool_value":
        return value.bool_value
    if which == "int_value":
        return value.int_value
    if which == "double_value":
        return value.double_value
    if which == "bytes_value":
        return bytes(value.bytes_value)
    if depth >= MAX_ANY_VALUE_DEPTH:
        return None
    if which == "array_value":
        return [_any_value(item, depth + 1) for item in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _any_value(kv.value, depth + 1) for kv in value.kvlist_value.values}
    return None


def _short(exc: BaseException, limit: int = 200) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"
