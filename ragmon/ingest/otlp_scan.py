"""The latency-only decode read from the message bytes: ``otlp_light.convert_request_light``'s
result without walking the protobuf objects (the compiled path's reader, see ``_native.py``).

Walking the parsed request costs a Python object per field looked at (upb makes a key string and a
value wrapper for every attribute, even one that is skipped). Compiled with mypyc, this module
reads the same fields from the bytes the request was parsed from: tags and lengths as machine ints,
a key's bytes looked up in the key plans (``_KeyPlans.get_raw``), values made only for the latency
keys. The parse has already validated the message (wire format, UTF-8), so the scan needs no error
handling of its own. What it does not expect answers None for the whole request, and the object
walk decides as before: a singular message field given twice (protobuf merges those: a span's
status, a resource, a scope), a group. A value that is not a scalar (array, kvlist, bytes) or is
given twice is read from the protobuf object, as the walk reads it; so are the spans of a trace
inside the judging bound, and every span whose light read fails (``otlp.py`` decides).

Pure Python this is slower than the walk, so ``otlp.py`` takes it only when the compiled modules
run; tests/ingest/test_otlp_scan.py checks that both give the same batches, on both paths.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Final

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from .. import semconv as sc
from ..types import AttrValue, SpanRecord
from .otlp import (
    _FLAG_PARENT_IS_REMOTE,
    _any_value,
    file_full_span,
)
from .otlp_light import (
    _CONTENT,
    _NO_CONTENT,
    _NO_DOCS,
    _RESOURCES,
    _SKIP,
    _ZERO_SPAN,
    _ZERO_TRACE,
    LatencyOnly,
    LightBatch,
    LightSpan,
    _KeyPlans,
    file_content,
    file_value,
)

__all__ = ["attribute_value", "scan_request_light"]

_DOUBLE: Final = struct.Struct("<d")
_RETRIEVER_EVENT: Final = sc.DB_QUERY_RESULT_EVENT.encode()
_ATTRIBUTE_TAG: Final = 9 << 3 | 2  # Span.attributes (a KeyValue)
_KEY_TAG: Final = 1 << 3 | 2  # KeyValue.key
_VALUE_TAG: Final = 2 << 3 | 2  # KeyValue.value (an AnyValue)


class _Unexpected(Exception):
    """A message the scan leaves to the object walk."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it."""
    byte = data[pos]
    if byte < 0x80:
        return byte, pos + 1
    value = byte & 0x7F
    shift = 7
    pos += 1
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fixed32(data: bytes, pos: int) -> int:
    """The little-endian unsigned 32-bit int at ``pos`` (byte by byte: compiled, no struct call)."""
    return data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16 | data[pos + 3] << 24


def _fixed64(data: bytes, pos: int) -> int:
    """The little-endian unsigned 64-bit int at ``pos``."""
    return _fixed32(data, pos) | _fixed32(data, pos + 4) << 32


def _skip(data: bytes, pos: int, wire: int) -> int:
    """The position after a field's value (its tag read)."""
    if wire == 0:
        return _varint(data, pos)[1]
    if wire == 2:
        length, pos = _varint(data, pos)
        return pos + length
    if wire == 1:
        return pos + 8
    if wire == 5:
        return pos + 4
    raise _Unexpected("group")  # (not in OTLP; upb skips it as an unknown field)


def _structure(data: bytes) -> tuple[list[tuple[int, int]], dict[tuple[int, int], str],
                                     list[tuple[int, int, int, int, int]]]:
    """Each resource's bytes (start, end), each scope's name, and each span's (resource_spans,
    scope_spans and spans index, start, end) in the request."""
    resources: list[tuple[int, int]] = []
    scopes: dict[tuple[int, int], str] = {}
    spans: list[tuple[int, int, int, int, int]] = []
    pos, end = 0, len(data)
    i = 0
    while pos < end:
        tag, pos = _varint(data, pos)
        if tag != 1 << 3 | 2:  # ExportTraceServiceRequest.resource_spans
            pos = _skip(data, pos, tag & 7)
            continue
        length, pos = _varint(data, pos)
        rs_end = pos + length
        resource = (0, 0)
        resource_seen = False
        j = 0
        while pos < rs_end:
            tag, pos = _varint(data, pos)
            if tag == 1 << 3 | 2:  # ResourceSpans.resource
                if resource_seen:
                    raise _Unexpected("resource given twice")  # protobuf merges them
                resource_seen = True
                length, pos = _varint(data, pos)
                resource = (pos, pos + length)
                pos += length
            elif tag == 2 << 3 | 2:  # ResourceSpans.scope_spans
                length, pos = _varint(data, pos)
                pos = _scope_spans(data, pos, pos + length, i, j, scopes, spans)
                j += 1
            else:
                pos = _skip(data, pos, tag & 7)
        resources.append(resource)
        i += 1
    return resources, scopes, spans


def _scope_spans(data: bytes, pos: int, end: int, i: int, j: int, scopes: dict[tuple[int, int], str],
                 spans: list[tuple[int, int, int, int, int]]) -> int:
    name = ""
    scope_seen = False
    k = 0
    while pos < end:
        tag, pos = _varint(data, pos)
        if tag == 2 << 3 | 2:  # ScopeSpans.spans
            length, pos = _varint(data, pos)
            spans.append((i, j, k, pos, pos + length))
            pos += length
            k += 1
        elif tag == 1 << 3 | 2:  # ScopeSpans.scope
            if scope_seen:
                raise _Unexpected("scope given twice")
            scope_seen = True
            length, pos = _varint(data, pos)
            name = _scope_name(data, pos, pos + length)
            pos += length
        else:
            pos = _skip(data, pos, tag & 7)
    scopes[(i, j)] = name
    return pos


def _scope_name(data: bytes, pos: int, end: int) -> str:
    name = ""
    while pos < end:
        tag, pos = _varint(data, pos)
        if tag == 1 << 3 | 2:  # InstrumentationScope.name (the last one counts)
            length, pos = _varint(data, pos)
            name = data[pos:pos + length].decode("utf-8")
            pos += length
        else:
            pos = _skip(data, pos, tag & 7)
    return name


def scan_request_light(raw: bytes, request: ExportTraceServiceRequest, latency_only: LatencyOnly) -> LightBatch | None:
    """``convert_request_light(request, latency_only, len(raw))``, read from ``raw`` (the bytes
    ``request`` was parsed from); None when the object walk must decide (see the module doc)."""
    try:
        return _scan(raw, request, latency_only)
    except (_Unexpected, IndexError, UnicodeDecodeError, struct.error):
        return None


def _scan(raw: bytes, request: ExportTraceServiceRequest, latency_only: LatencyOnly) -> LightBatch:
    resources, scopes, located = _structure(raw)
    spans: list[SpanRecord | LightSpan] = []
    errors: list[str] = []
    rejected = 0
    plans = latency_only.plans
    share = len(raw) // max(1, len(located))
    last_trace: bytes | None = None
    trace_hex = ""
    fraction = -1.0  # (not computed: see LightSpan)
    light = False
    resource_index = -1
    resource: Mapping[str, AttrValue] = {}
    service_name: str | None = None
    for i, j, k, start, end in located:
        if i != resource_index:
            resource_index = i
            at, until = resources[i]
            resource, service_name = _RESOURCES.get_scanned(raw[at:until], request, i)
        scope_name = scopes[(i, j)]
        # the span's own fields (its attributes are read below, for a light span only)
        trace_id = span_id = parent = b""
        name_at = name_end = start_ns = end_ns = flags = dropped = code = 0
        status_seen = has_attributes = retriever_event = False
        pos = start
        while pos < end:
            tag, pos = _varint(raw, pos)
            field, wire = tag >> 3, tag & 7
            if wire == 2:
                length, pos = _varint(raw, pos)
                at, pos = pos, pos + length
                if field == 9:
                    has_attributes = True
                elif field == 1:
                    trace_id = raw[at:pos]
                elif field == 2:
                    span_id = raw[at:pos]
                elif field == 4:
                    parent = raw[at:pos]
                elif field == 5:
                    name_at, name_end = at, pos
                elif field == 11:
                    retriever_event = retriever_event or _event_name(raw, at, pos) == _RETRIEVER_EVENT
                elif field == 15:
                    if status_seen:
                        raise _Unexpected("status given twice")  # protobuf merges them
                    status_seen = True
                    code = _status_code(raw, at, pos)
            elif wire == 1:
                if field == 7:
                    start_ns = _fixed64(raw, pos)
                elif field == 8:
                    end_ns = _fixed64(raw, pos)
                pos += 8
            elif wire == 0:
                value, pos = _varint(raw, pos)
                if field == 10:
                    dropped = value & 0xFFFFFFFF
            elif wire == 5:
                if field == 16:
                    flags = _fixed32(raw, pos)
                pos += 4
            else:
                raise _Unexpected("group")
        if trace_id != last_trace:  # spans of one trace mostly come together: decide once
            last_trace = trace_id
            trace_hex = trace_id.hex()
            fraction, light = latency_only.of_trace(trace_id)
        if light and (len(trace_id) == 16 and trace_id != _ZERO_TRACE and len(span_id) == 8
                      and span_id != _ZERO_SPAN and (not parent or len(parent) == 8)):
            try:
                record: LightSpan | None = _light_span(
                    raw, start if has_attributes else end, end, (request, i, j, k), plans,
                    raw[name_at:name_end].decode("utf-8"), start_ns, end_ns, code, dropped, scope_name,
                    trace_hex, span_id, parent, flags, fraction, resource, service_name, retriever_event, share)
            except UnicodeDecodeError:
                raise
            except (ValueError, TypeError, RecursionError):  # the full decoder decides
                record = None
            if record is not None:
                spans.append(record)
                continue
        proto = request.resource_spans[i].scope_spans[j].spans[k]
        rejected += file_full_span(proto, resource, scope_name, spans.append, errors)
    return LightBatch(spans=spans, rejected_spans=rejected, errors=errors)


def _event_name(data: bytes, pos: int, end: int) -> bytes:
    name = b""
    while pos < end:
        tag, pos = _varint(data, pos)
        if tag == 2 << 3 | 2:  # Span.Event.name (the last one counts)
            length, pos = _varint(data, pos)
            name = data[pos:pos + length]
            pos += length
        else:
            pos = _skip(data, pos, tag & 7)
    return name


def _status_code(data: bytes, pos: int, end: int) -> int:
    code = 0
    while pos < end:
        tag, pos = _varint(data, pos)
        if tag == 3 << 3:  # Status.code, an int32 enum (the last one counts)
            value, pos = _varint(data, pos)
            value &= 0xFFFFFFFF
            code = value - (1 << 32) if value >= 1 << 31 else value
        else:
            pos = _skip(data, pos, tag & 7)
    return code


def _next_attribute(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """Where the next span attribute (a KeyValue) at or after ``pos`` is: its bytes' start and end;
    (-1, end) when none comes before ``end``."""
    while pos < end:
        tag, pos = _varint(data, pos)
        if tag != _ATTRIBUTE_TAG:
            pos = _skip(data, pos, tag & 7)
            continue
        length, pos = _varint(data, pos)
        return pos, pos + length
    return -1, end


def _light_span(raw: bytes, pos: int, end: int, where: tuple[ExportTraceServiceRequest, int, int, int],
                plans: _KeyPlans, name: str, start_ns: int, end_ns: int, code: int, dropped: int,
                scope_name: str, trace_hex: str, span_id: bytes, parent: bytes, flags: int, fraction: float,
                resource: Mapping[str, AttrValue], service_name: str | None, retriever_event: bool,
                size: int) -> LightSpan:
    """``otlp_light._light_span`` over the span's bytes (ids already checked)."""
    attrs: dict[str, AttrValue] = {}
    content: dict[str, int] | None = None
    docs: dict[str, dict[int, dict[str, AttrValue]]] | None = None
    doc_content: dict[str, dict[int, dict[str, AttrValue]]] | None = None
    memo = plans._raw
    first = pos
    position = -1
    while True:
        pos, pair_end = _next_attribute(raw, pos, end)
        if pos < 0:
            break
        position += 1
        key_raw = b""
        value_at = value_end = -1
        twice = False
        while pos < pair_end:
            tag, pos = _varint(raw, pos)
            if tag == _KEY_TAG:
                length, pos = _varint(raw, pos)
                key_raw = raw[pos:pos + length]
                pos += length
            elif tag == _VALUE_TAG:
                length, pos = _varint(raw, pos)
                twice = value_at >= 0  # protobuf merges the two: read as the walk reads it
                value_at, value_end = pos, pos + length
                pos += length
            else:
                pos = _skip(raw, pos, tag & 7)
        found = memo.get(key_raw)
        key, (kind, doc) = found if found is not None else plans.get_raw(key_raw)
        if kind == _SKIP:
            continue
        if kind == _CONTENT:
            content, doc_content = file_content(content, doc_content, key, position, doc)
            continue
        if value_at < 0:
            continue  # no value
        if twice:
            read, converted = False, None
        else:
            read, converted = _scalar(raw, value_at, value_end)
        if not read:  # an array, a kvlist, bytes: as the walk reads them
            request, i, j, k = where
            converted = _any_value(request.resource_spans[i].scope_spans[j].spans[k].attributes[position].value, 0)
        if converted is None:
            continue
        docs = file_value(attrs, docs, kind, key, doc, converted)
    return LightSpan(
        None, scope_name, trace_hex, span_id.hex(),
        # an all-zero parent id is "no parent" in some exporters (as in otlp._convert_span)
        parent.hex() if parent and parent != _ZERO_SPAN else None,
        bool(parent) and bool(flags & _FLAG_PARENT_IS_REMOTE),
        fraction, attrs, resource, service_name, content or _NO_CONTENT, retriever_event,
        docs or _NO_DOCS, doc_content or _NO_DOCS, size,
        fields=(name, start_ns, end_ns, code, dropped), locate=where, span_bytes=(raw, first, end),
    )


def attribute_value(raw: bytes, pos: int, end: int, position: int) -> AttrValue:
    """The scalar value of the span's attribute number ``position`` (the span's bytes are
    ``raw[pos:end]``), as ``_any_value`` reads it; None where the protobuf object must tell (no
    such attribute, an empty, non-scalar or merged value)."""
    index = -1
    while True:
        at, pair_end = _next_attribute(raw, pos, end)
        if at < 0:
            return None
        index += 1
        pos = at if index == position else pair_end
        if index < position:
            continue
        value_at = value_end = -1
        while pos < pair_end:
            tag, pos = _varint(raw, pos)
            if tag == _VALUE_TAG:
                if value_at >= 0:
                    return None  # given twice: protobuf merges them
                length, pos = _varint(raw, pos)
                value_at, value_end = pos, pos + length
                pos += length
            else:
                pos = _skip(raw, pos, tag & 7)
        if value_at < 0:
            return None
        read, value = _scalar(raw, value_at, value_end)
        return value if read else None
    return None


def _scalar(data: bytes, pos: int, end: int) -> tuple[bool, AttrValue]:
    """An AnyValue's value when it is a scalar (``_any_value``'s), else (False, None): the last
    member given counts, as protobuf's oneof keeps it."""
    which = 0
    at = until = number = 0
    while pos < end:
        tag, pos = _varint(data, pos)
        field, wire = tag >> 3, tag & 7
        if wire == 2:
            length, pos = _varint(data, pos)
            if 1 <= field <= 7 and field != 2 and field != 3 and field != 4:  # string, array, kvlist, bytes
                which, at, until = field, pos, pos + length
            pos += length
        elif wire == 0:
            value, pos = _varint(data, pos)
            if field == 2 or field == 3:  # bool, int
                which, number = field, value
        elif wire == 1:
            if field == 4:  # double
                which, at = 4, pos
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise _Unexpected("group")
    if which == 1:
        return True, data[at:until].decode("utf-8")
    if which == 4:
        return True, _DOUBLE.unpack_from(data, at)[0]
    if which == 3:
        number &= 0xFFFFFFFFFFFFFFFF
        return True, number - (1 << 64) if number >= 1 << 63 else number
    if which == 2:
        return True, number != 0
    if which == 0:
        return True, None
    return False, None
