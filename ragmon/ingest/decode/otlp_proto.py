"""The protobuf reader: OTLP protobuf bytes -> ``SpanRecord``s and, with ``latency_only``,
``LightSpan``s (compiled with mypyc where it can be: ``_native.py``; the same code runs as pure
Python otherwise).

The bytes are parsed with protobuf first (that validates them: wire format, UTF-8). Without
``latency_only`` every span is then decoded in full from the parsed objects (``proto_values``).
With it, the spans are read from the message bytes (``proto_wire``): each span's ids, timings and
status; the trace's sampling fraction decides (``LatencyOnly.of_trace``); a span of a trace
outside the judging bound becomes a ``LightSpan`` — only its latency keys' values are made, of its
content keys only where they are — and any other span is decoded in full from the objects, as is
a span whose ids are not plainly valid (the full decoder rejects it, with its message).

What costs is Python work per attribute, so that is kept small: what to do with a key is worked
out once per distinct key (``extract.KeyPlans``: one dict lookup per attribute after that, by the
key's bytes); flattened document ids and scores are filed by document as they are read; the
resource's attributes are decoded once per distinct resource (``_Resources``); a light span's size
for the assembler's byte bound is its share of the message's length.

A light span is read a second time in one place, ``ProtoMessage``, the ``SpanOrigin`` of every
light span of a message: when a priority rule picks its trace for the judge (``record``: the span
decoded in full from the parsed objects, kept since the parse) and when the latency-only view needs
one content value (``value``: from the bytes when it is a plain scalar, else from the objects).

A message the byte reader does not expect (a singular field given twice, which protobuf merges; a
group) is decoded in full, every span of it: the result is the same, only slower.
tests/ingest/test_otlp_proto.py holds light spans equal to the full decode, shape by shape.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

from google.protobuf.message import DecodeError as ProtobufDecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ... import semconv as sc
from ...errors import DecodeError
from ...types import AttrValue, SpanRecord
from ..extract import (
    CONTENT,
    EMPTY_CONTENT,
    EMPTY_DOCS,
    SKIP,
    SPAN_OVERHEAD,
    DocFields,
    KeyPlans,
    LatencyOnly,
    LightSpan,
    declared_role_of_dict,
    file_content,
    file_value,
    key_role,
)
from .decoded import FLAG_PARENT_IS_REMOTE, DecodedBatch
from .proto_values import any_value, attributes, convert_request, file_full_span, span_record
from .proto_wire import (
    KEY_TAG,
    VALUE_TAG,
    Unexpected,
    attribute_value,
    event_name,
    fixed32,
    fixed64,
    next_attribute,
    request_structure,
    scalar,
    skip,
    status_code,
    varint,
)

__all__ = ["LightBatch", "ProtoMessage", "read_protobuf"]

_ZERO_TRACE = bytes(16)
_ZERO_SPAN = bytes(8)
_RETRIEVER_EVENT = sc.DB_QUERY_RESULT_EVENT.encode()
_MAX_RESOURCES = 256
_MAX_RESOURCE_BYTES = 4096  # a bigger resource is decoded each time, not kept


def read_protobuf(raw: bytes, latency_only: LatencyOnly | None = None) -> DecodedBatch | LightBatch:
    """The spans of an OTLP protobuf message (``ExportTraceServiceRequest``, or the Collector's
    ``TracesData``: the same layout). With ``latency_only`` spans of traces outside its bound are
    read as ``LightSpan``s. Raises ``DecodeError`` when the bytes do not parse."""
    try:
        request = ExportTraceServiceRequest.FromString(raw)
    except (ProtobufDecodeError, RuntimeError, ValueError) as exc:
        raise DecodeError(f"body is not a valid OTLP protobuf message: {exc}") from exc
    if latency_only is not None:
        try:
            return _read_light(ProtoMessage(raw, request), latency_only)
        except (Unexpected, IndexError, UnicodeDecodeError, struct.error):
            pass  # what protobuf merges or skips: the objects tell (see the module doc)
    return convert_request(request)


@dataclass(slots=True, init=False)  # init=False, not frozen: a compiled __init__
class LightBatch:
    """A ``decoded.SpanBatch`` with ``LightSpan``s among its spans."""

    spans: list[SpanRecord | LightSpan]
    rejected_spans: int
    errors: list[str]

    def __init__(self, spans: list[SpanRecord | LightSpan], rejected_spans: int = 0,
                 errors: list[str] | None = None) -> None:
        self.spans = spans
        self.rejected_spans = rejected_spans
        self.errors = [] if errors is None else errors


class ProtoMessage:
    """A message as its light spans came from it (their ``SpanOrigin``): its bytes and its parsed
    objects. The one place a light span is read again (see the module doc)."""

    __slots__ = ("raw", "request")

    def __init__(self, raw: bytes, request: ExportTraceServiceRequest) -> None:
        self.raw = raw
        self.request = request

    def span(self, i: int, j: int, k: int) -> Span:
        """The protobuf span at ``resource_spans[i].scope_spans[j].spans[k]``."""
        return self.request.resource_spans[i].scope_spans[j].spans[k]

    def record(self, span: LightSpan) -> SpanRecord:
        i, j, k, _, _ = span.at
        return span_record(self.span(i, j, k), span.resource, span.scope_name)

    def value(self, span: LightSpan, key: str, position: int) -> AttrValue:
        i, j, k, start, end = span.at
        value = attribute_value(self.raw, start, end, position)  # from the bytes: no objects made
        if value is not None:
            return value
        pairs = self.span(i, j, k).attributes
        value = any_value(pairs[position].value, 0)
        if value is None:  # an empty last occurrence: the full decoder keeps the last set one
            for pair in reversed(pairs):
                if pair.key == key:
                    value = any_value(pair.value, 0)
                    if value is not None:
                        break
        return value


class _Resources:
    """Resource attributes by their bytes: every message of a service repeats the same resource,
    and a dict lookup costs less than decoding its attributes again. The dicts are shared
    read-only, as spans of one message already share theirs."""

    def __init__(self) -> None:
        self._seen: dict[bytes, tuple[Mapping[str, AttrValue], str | None]] = {}

    def get(self, raw: bytes, request: ExportTraceServiceRequest, index: int
            ) -> tuple[Mapping[str, AttrValue], str | None]:
        """The attributes and service name of ``request.resource_spans[index].resource``, whose bytes
        are ``raw`` (bytes that parse to the same resource: as good a key as the serialized ones);
        the protobuf object is looked at only when those bytes are new."""
        found = self._seen.get(raw)
        if found is None:
            resource: Resource = request.resource_spans[index].resource
            attrs = attributes(resource.attributes)
            service = attrs.get("service.name")
            found = attrs, (str(service) if service is not None else None)
            if len(raw) <= _MAX_RESOURCE_BYTES:
                if len(self._seen) >= _MAX_RESOURCES:
                    self._seen.clear()  # many resources: start over rather than grow (no LRU cost per hit)
                self._seen[raw] = found
        return found


_RESOURCES = _Resources()


def _read_light(message: ProtoMessage, latency_only: LatencyOnly) -> LightBatch:
    raw, request = message.raw, message.request
    resources, scopes, located = request_structure(raw)
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
            resource, service_name = _RESOURCES.get(raw[at:until], request, i)
        scope_name = scopes[(i, j)]
        # the span's own fields (its attributes are read below, for a light span only)
        trace_id = span_id = parent = b""
        name_at = name_end = start_ns = end_ns = flags = dropped = code = 0
        status_seen = has_attributes = retriever_event = False
        pos = start
        while pos < end:
            tag, pos = varint(raw, pos)
            field, wire = tag >> 3, tag & 7
            if wire == 2:
                length, pos = varint(raw, pos)
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
                    retriever_event = retriever_event or event_name(raw, at, pos) == _RETRIEVER_EVENT
                elif field == 15:
                    if status_seen:
                        raise Unexpected("status given twice")  # protobuf merges them
                    status_seen = True
                    code = status_code(raw, at, pos)
            elif wire == 1:
                if field == 7:
                    start_ns = fixed64(raw, pos)
                elif field == 8:
                    end_ns = fixed64(raw, pos)
                pos += 8
            elif wire == 0:
                value, pos = varint(raw, pos)
                if field == 10:
                    dropped = value & 0xFFFFFFFF
            elif wire == 5:
                if field == 16:
                    flags = fixed32(raw, pos)
                pos += 4
            else:
                raise Unexpected("group")
        if trace_id != last_trace:  # spans of one trace mostly come together: decide once
            last_trace = trace_id
            trace_hex = trace_id.hex()
            fraction, light = latency_only.of_trace(trace_id)
        if light and (len(trace_id) == 16 and trace_id != _ZERO_TRACE and len(span_id) == 8
                      and span_id != _ZERO_SPAN and (not parent or len(parent) == 8)):
            try:
                record: LightSpan | None = _light_span(
                    message, (i, j, k, start if has_attributes else end, end), plans,
                    raw[name_at:name_end].decode("utf-8"), start_ns, end_ns, code, dropped, scope_name,
                    trace_hex, span_id, parent, flags, fraction, resource, service_name, retriever_event, share)
            except UnicodeDecodeError:
                raise
            except (ValueError, TypeError, RecursionError):  # the full decoder decides
                record = None
            if record is not None:
                spans.append(record)
                continue
        rejected += file_full_span(message.span(i, j, k), resource, scope_name, spans.append, errors)
    return LightBatch(spans=spans, rejected_spans=rejected, errors=errors)


def _light_span(message: ProtoMessage, at: tuple[int, int, int, int, int], plans: KeyPlans, name: str,
                start_ns: int, end_ns: int, code: int, dropped: int, scope_name: str, trace_hex: str,
                span_id: bytes, parent: bytes, flags: int, fraction: float, resource: Mapping[str, AttrValue],
                service_name: str | None, retriever_event: bool, size: int) -> LightSpan:
    """A span's ``LightSpan`` (its ids already checked): its attributes read from the bytes. The hot
    loop: one memo lookup per attribute (its KeyPlan); a value is read only for latency keys; of a
    content key only where it is."""
    raw = message.raw
    i, j, k, pos, end = at
    attrs: dict[str, AttrValue] = {}
    content: dict[str, int] | None = None
    docs: DocFields | None = None
    doc_content: DocFields | None = None
    memo = plans.by_raw
    position = -1
    while True:
        pos, pair_end = next_attribute(raw, pos, end)
        if pos < 0:
            break
        position += 1
        key_raw = b""
        value_at = value_end = -1
        twice = False
        while pos < pair_end:
            tag, pos = varint(raw, pos)
            if tag == KEY_TAG:
                length, pos = varint(raw, pos)
                key_raw = raw[pos:pos + length]
                pos += length
            elif tag == VALUE_TAG:
                length, pos = varint(raw, pos)
                twice = value_at >= 0  # protobuf merges the two: read as the objects have it
                value_at, value_end = pos, pos + length
                pos += length
            else:
                pos = skip(raw, pos, tag & 7)
        found = memo.get(key_raw)
        key, (kind, doc) = found if found is not None else plans.get_raw(key_raw)
        if kind == SKIP:
            continue
        if kind == CONTENT:
            content, doc_content = file_content(content, doc_content, key, position, doc)
            continue
        if value_at < 0:
            continue  # no value
        if twice:
            read, converted = False, None
        else:
            read, converted = scalar(raw, value_at, value_end)
        if not read:  # an array, a kvlist, bytes: as the objects have them
            converted = any_value(message.span(i, j, k).attributes[position].value, 0)
        if converted is None:
            continue
        docs = file_value(attrs, docs, kind, key, doc, converted)
    role = declared_role_of_dict(attrs, retriever_event) if attrs or retriever_event else None
    if role is None and (content or attrs or docs):
        role = _key_role(message.span(i, j, k))
    return LightSpan(
        message, at, scope_name, trace_hex, span_id.hex(),
        # an all-zero parent id is "no parent" in some exporters (as in proto_values.span_record)
        parent.hex() if parent and parent != _ZERO_SPAN else None,
        bool(parent) and bool(flags & FLAG_PARENT_IS_REMOTE), fraction,
        name, start_ns, end_ns, "OK" if code == 1 else "ERROR" if code == 2 else "UNSET", dropped,
        attrs, resource, service_name, content or EMPTY_CONTENT, retriever_event,
        docs or EMPTY_DOCS, doc_content or EMPTY_DOCS, role or None, SPAN_OVERHEAD + len(name) + size,
    )


def _key_role(proto: Span) -> str | None:
    """``role_of``'s data-key fallback: the first key (with a value) that implies a role, in the
    order the full decoder's attribute dict has them (a key sits where it first had a value)."""
    for pair in proto.attributes:
        role = key_role(pair.key)
        if role is not None and pair.value.WhichOneof("value") is not None:
            return role
    return None
