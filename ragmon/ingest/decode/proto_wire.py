"""The protobuf wire format, read from bytes: what the protobuf reader (``otlp_proto.py``) needs
of an ``ExportTraceServiceRequest`` without walking the parsed objects (compiled: ``_native.py``).

Walking the parsed request costs a Python object per field looked at (upb makes a key string and a
value wrapper for every attribute, even one that is skipped). These functions read the same fields
from the bytes the request was parsed from: tags and lengths as machine ints, values made only
where asked. The parse has already validated the message (wire format, UTF-8), so there is no
error handling here: what the reader does not expect (a singular message field given twice, which
protobuf merges; a group) raises ``Unexpected`` and the reader decodes the message from the
objects instead.
"""

from __future__ import annotations

import struct
from typing import Final

from ...types import AttrValue

__all__ = [
    "ATTRIBUTE_TAG", "KEY_TAG", "VALUE_TAG", "Unexpected", "attribute_value", "event_name", "fixed32", "fixed64",
    "next_attribute", "request_structure", "scalar", "skip", "status_code", "varint",
]

_DOUBLE: Final = struct.Struct("<d")
ATTRIBUTE_TAG: Final = 9 << 3 | 2  # Span.attributes (a KeyValue)
KEY_TAG: Final = 1 << 3 | 2  # KeyValue.key
VALUE_TAG: Final = 2 << 3 | 2  # KeyValue.value (an AnyValue)


class Unexpected(Exception):
    """A message the reader leaves to the parsed objects."""


def varint(data: bytes, pos: int) -> tuple[int, int]:
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


def fixed32(data: bytes, pos: int) -> int:
    """The little-endian unsigned 32-bit int at ``pos`` (byte by byte: compiled, no struct call)."""
    return data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16 | data[pos + 3] << 24


def fixed64(data: bytes, pos: int) -> int:
    """The little-endian unsigned 64-bit int at ``pos``."""
    return fixed32(data, pos) | fixed32(data, pos + 4) << 32


def skip(data: bytes, pos: int, wire: int) -> int:
    """The position after a field's value (its tag read)."""
    if wire == 0:
        return varint(data, pos)[1]
    if wire == 2:
        length, pos = varint(data, pos)
        return pos + length
    if wire == 1:
        return pos + 8
    if wire == 5:
        return pos + 4
    raise Unexpected("group")  # (not in OTLP; upb skips it as an unknown field)


#: each span of a request: its resource_spans, scope_spans and spans index, its bytes' start and end
SpanPlace = tuple[int, int, int, int, int]


def request_structure(data: bytes) -> tuple[list[tuple[int, int]], dict[tuple[int, int], str], list[SpanPlace]]:
    """Each resource's bytes (start, end), each scope's name, and each span's place in the request."""
    resources: list[tuple[int, int]] = []
    scopes: dict[tuple[int, int], str] = {}
    spans: list[SpanPlace] = []
    pos, end = 0, len(data)
    i = 0
    while pos < end:
        tag, pos = varint(data, pos)
        if tag != 1 << 3 | 2:  # ExportTraceServiceRequest.resource_spans
            pos = skip(data, pos, tag & 7)
            continue
        length, pos = varint(data, pos)
        rs_end = pos + length
        resource = (0, 0)
        resource_seen = False
        j = 0
        while pos < rs_end:
            tag, pos = varint(data, pos)
            if tag == 1 << 3 | 2:  # ResourceSpans.resource
                if resource_seen:
                    raise Unexpected("resource given twice")  # protobuf merges them
                resource_seen = True
                length, pos = varint(data, pos)
                resource = (pos, pos + length)
                pos += length
            elif tag == 2 << 3 | 2:  # ResourceSpans.scope_spans
                length, pos = varint(data, pos)
                pos = _scope_spans(data, pos, pos + length, i, j, scopes, spans)
                j += 1
            else:
                pos = skip(data, pos, tag & 7)
        resources.append(resource)
        i += 1
    return resources, scopes, spans


def _scope_spans(data: bytes, pos: int, end: int, i: int, j: int, scopes: dict[tuple[int, int], str],
                 spans: list[SpanPlace]) -> int:
    name = ""
    scope_seen = False
    k = 0
    while pos < end:
        tag, pos = varint(data, pos)
        if tag == 2 << 3 | 2:  # ScopeSpans.spans
            length, pos = varint(data, pos)
            spans.append((i, j, k, pos, pos + length))
            pos += length
            k += 1
        elif tag == 1 << 3 | 2:  # ScopeSpans.scope
            if scope_seen:
                raise Unexpected("scope given twice")
            scope_seen = True
            length, pos = varint(data, pos)
            name = _scope_name(data, pos, pos + length)
            pos += length
        else:
            pos = skip(data, pos, tag & 7)
    scopes[(i, j)] = name
    return pos


def _scope_name(data: bytes, pos: int, end: int) -> str:
    name = ""
    while pos < end:
        tag, pos = varint(data, pos)
        if tag == 1 << 3 | 2:  # InstrumentationScope.name (the last one counts)
            length, pos = varint(data, pos)
            name = data[pos:pos + length].decode("utf-8")
            pos += length
        else:
            pos = skip(data, pos, tag & 7)
    return name


def event_name(data: bytes, pos: int, end: int) -> bytes:
    """A ``Span.Event``'s name (its bytes)."""
    name = b""
    while pos < end:
        tag, pos = varint(data, pos)
        if tag == 2 << 3 | 2:  # Span.Event.name (the last one counts)
            length, pos = varint(data, pos)
            name = data[pos:pos + length]
            pos += length
        else:
            pos = skip(data, pos, tag & 7)
    return name


def status_code(data: bytes, pos: int, end: int) -> int:
    """A ``Status``'s code."""
    code = 0
    while pos < end:
        tag, pos = varint(data, pos)
        if tag == 3 << 3:  # Status.code, an int32 enum (the last one counts)
            value, pos = varint(data, pos)
            value &= 0xFFFFFFFF
            code = value - (1 << 32) if value >= 1 << 31 else value
        else:
            pos = skip(data, pos, tag & 7)
    return code


def next_attribute(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """Where the next span attribute (a KeyValue) at or after ``pos`` is: its bytes' start and end;
    (-1, end) when none comes before ``end``."""
    while pos < end:
        tag, pos = varint(data, pos)
        if tag != ATTRIBUTE_TAG:
            pos = skip(data, pos, tag & 7)
            continue
        length, pos = varint(data, pos)
        return pos, pos + length
    return -1, end


def attribute_value(raw: bytes, pos: int, end: int, position: int) -> AttrValue:
    """The scalar value of the span's attribute number ``position`` (the span's attributes are in
    ``raw[pos:end]``), as ``proto_values.any_value`` reads it; None where the protobuf object must
    tell (no such attribute, an empty, non-scalar or merged value)."""
    index = -1
    while True:
        at, pair_end = next_attribute(raw, pos, end)
        if at < 0:
            return None
        index += 1
        pos = at if index == position else pair_end
        if index < position:
            continue
        value_at = value_end = -1
        while pos < pair_end:
            tag, pos = varint(raw, pos)
            if tag == VALUE_TAG:
                if value_at >= 0:
                    return None  # given twice: protobuf merges them
                length, pos = varint(raw, pos)
                value_at, value_end = pos, pos + length
                pos += length
            else:
                pos = skip(raw, pos, tag & 7)
        if value_at < 0:
            return None
        read, value = scalar(raw, value_at, value_end)
        return value if read else None
    return None


def scalar(data: bytes, pos: int, end: int) -> tuple[bool, AttrValue]:
    """An AnyValue's value when it is a scalar (``any_value``'s), else (False, None): the last
    member given counts, as protobuf's oneof keeps it."""
    which = 0
    at = until = number = 0
    while pos < end:
        tag, pos = varint(data, pos)
        field, wire = tag >> 3, tag & 7
        if wire == 2:
            length, pos = varint(data, pos)
            if 1 <= field <= 7 and field != 2 and field != 3 and field != 4:  # string, array, kvlist, bytes
                which, at, until = field, pos, pos + length
            pos += length
        elif wire == 0:
            value, pos = varint(data, pos)
            if field == 2 or field == 3:  # bool, int
                which, number = field, value
        elif wire == 1:
            if field == 4:  # double
                which, at = 4, pos
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise Unexpected("group")
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
