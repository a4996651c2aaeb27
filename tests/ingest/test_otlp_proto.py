"""The protobuf reader (``otlp_proto``): a light span is the full decode's span, read lightly.

With ``latency_only`` the reader reads spans of traces outside the bound from the message bytes
(``proto_wire``) as ``LightSpan``s; the full decode of the same message (every span from the parsed
protobuf objects, ``proto_values``) is the reference. Both run here on the fast path's corpus (real
SDK spans, text and hostile shapes) and on hand-made wire shapes that protobuf resolves in its own
ways (fields given twice, unknown fields, wrong wire types, groups, oneof members in turn): each
light span holds exactly what the full span has of its latency keys, documents, content positions
and values, role and header, and completes to the same record; what protobuf merges is decoded
from the objects. Whether this module runs compiled or as pure Python depends on the install:
test_native.py runs it both ways.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from ragmon import semconv as sc
from ragmon.ingest.decode.otlp import decode_export_request
from ragmon.ingest.decode.otlp_proto import read_protobuf
from ragmon.ingest.extract import (
    BOTH,
    CONTENT,
    DOC,
    SPAN_OVERHEAD,
    VALUE,
    LatencyOnly,
    LightSpan,
    latency_keys,
    role_of,
)
from ragmon.sampling import trace_fraction
from ragmon.types import SpanRecord

from .test_fast_path import _bodies

BOUNDS = (0.0, 0.5, 1.0)


@pytest.fixture(scope="module")
def bodies() -> list[bytes]:
    return _bodies()


def _expected_view(record: SpanRecord, latency_only: LatencyOnly) -> dict[str, Any]:
    """What a light span must hold of ``record`` (the full decode's span), by the key plans."""
    attrs: dict[str, Any] = {}
    docs: dict[str, dict[int, dict[str, Any]]] = {}
    content = set()
    for key, value in record.attributes.items():
        kind, doc = latency_only.plans.get(key)
        if kind in (VALUE, BOTH):
            attrs[key] = value
        if kind in (DOC, BOTH):
            assert doc is not None
            docs.setdefault(doc[0], {}).setdefault(doc[1], {})[doc[2]] = value
        if kind == CONTENT:
            content.add(key)
    return {"attributes": attrs, "docs": docs, "content": content}


def _check(raw: bytes, bound: float) -> int:
    """The reader's batch against the full decode, span by span; how many spans were light."""
    latency_only = LatencyOnly(bound, latency_keys())
    light = read_protobuf(raw, latency_only)
    full = read_protobuf(raw)
    assert (light.rejected_spans, light.errors) == (full.rejected_spans, full.errors)
    request = ExportTraceServiceRequest.FromString(raw)
    share = len(raw) // max(1, sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans))
    count = 0
    for span, record in zip(light.spans, full.spans, strict=True):
        if not isinstance(span, LightSpan):
            assert span == record
            continue
        count += 1
        expected = _expected_view(record, latency_only)
        assert span.attributes == expected["attributes"]
        assert span.docs == expected["docs"]
        assert expected["content"] <= set(span.content)  # (also where every occurrence is empty)
        assert {key: span.value(key) for key in span.content} == {
            key: record.attributes.get(key) for key in span.content}
        for prefix, by_index in span.doc_content.items():
            for index, fields in by_index.items():
                for name, key in fields.items():
                    assert key in span.content and latency_only.plans.get(key)[1] == (prefix, index, name)
        assert span.role == role_of(record.attributes, record.events)
        assert span.retriever_event == any(e.name == sc.DB_QUERY_RESULT_EVENT for e in record.events)
        assert (span.trace_id, span.span_id, span.parent_span_id, span.parent_is_remote, span.name,
                span.start_time_ns, span.end_time_ns, span.status_code, span.dropped_attributes_count,
                span.resource, span.scope_name) == (
            record.trace_id, record.span_id, record.parent_span_id, record.parent_is_remote, record.name,
            record.start_time_ns, record.end_time_ns, record.status_code, record.dropped_attributes_count,
            record.resource, record.scope_name)
        service = record.resource.get(sc.SERVICE_NAME)
        assert span.service_name == (str(service) if service is not None else None)
        assert span.size == SPAN_OVERHEAD + len(record.name) + share
        assert span.fraction == (trace_fraction(span.trace_id) if bound > 0 else -1.0)
        assert span.to_record() == record
    return count


def test_light_spans_are_the_full_decodes_spans_on_the_corpus(bodies: list[bytes]) -> None:
    light = 0
    for bound in BOUNDS:
        for body in bodies:
            light += _check(body, bound)
    assert light > 300


# --- wire shapes, by hand --------------------------------------------------------------------
def _tag(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _len(number: int, payload: bytes) -> bytes:
    return _tag(number, 2) + _varint(len(payload)) + payload


def _request(span: bytes, *, resource: bytes | None = None, scope: bytes = b"") -> bytes:
    if resource is None:
        resource = _len(1, Resource(attributes=[_kv(sc.SERVICE_NAME, "shop")]).SerializeToString())
    return _len(1, resource + _len(2, scope + _len(2, span)))


def _kv(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def _span(**attributes: Any) -> bytes:
    span = Span(trace_id=bytes(range(1, 17)), span_id=bytes(range(1, 9)), name="retrieve",
                start_time_unix_nano=10**18, end_time_unix_nano=10**18 + 5 * 10**8)
    span.attributes.append(_kv(sc.SPAN_KIND, sc.KIND_RETRIEVER))
    span.attributes.append(_kv(sc.retrieval_document_attr(0, sc.DOCUMENT_ID), "doc-0"))
    for key, value in attributes.items():
        span.attributes.append(KeyValue(key=key, value=value))
    return span.SerializeToString()


def _attribute(key: str, value: bytes) -> bytes:
    return _len(9, _len(1, key.encode()) + value)


SCORE = sc.retrieval_document_attr(0, sc.DOCUMENT_SCORE)
MODEL = sc.LLM_MODEL_NAME
VERSION = sc.LLM_PROMPT_TEMPLATE_VERSION
UNKNOWN = _tag(99, 0) + _varint(5) + _tag(98, 1) + bytes(8) + _len(97, b"xyz") + _tag(96, 5) + bytes(4)
RETRIEVER_EVENT = _len(2, sc.DB_QUERY_RESULT_EVENT.encode())
SHAPES: dict[str, bytes] = {
    "plain": _request(_span()),
    "unknown fields everywhere": _request(
        _span() + UNKNOWN + _attribute(MODEL, UNKNOWN + _len(2, UNKNOWN + _len(1, b"m"))),
        scope=_len(1, UNKNOWN + _len(1, b"scope")) + UNKNOWN),
    "a known field with the wrong wire type (unknown)": _request(
        _span() + _tag(7, 0) + _varint(3) + _tag(5, 5) + bytes(4)),
    "scalar fields given twice (the last counts)": _request(
        _span() + _len(5, b"renamed") + _tag(10, 0) + _varint(3) + _tag(10, 0) + _varint(2**40 + 7)
        + _tag(16, 5) + (0x300).to_bytes(4, "little") + _len(4, bytes(range(9, 17)))),
    "a key given twice in one pair": _request(
        _span() + _len(9, _len(1, b"junk") + _len(1, MODEL.encode()) + _len(2, _len(1, b"gpt")))),
    "a value given twice in one pair (merged)": _request(
        _span() + _len(9, _len(1, MODEL.encode()) + _len(2, _len(1, b"a")) + _len(2, _tag(3, 0) + _varint(7)))),
    "oneof members in turn": _request(
        _span() + _attribute(SCORE, _len(2, _len(1, b"0.5") + _tag(4, 1) + struct.pack("<d", 0.25)))
        + _attribute(MODEL, _len(2, _tag(3, 0) + _varint(1) + _len(1, b"m")))),
    "an empty value, an empty string": _request(
        _span() + _attribute(MODEL, _len(2, b"")) + _attribute(VERSION, _len(2, _len(1, b"")))),
    "a pair without a value": _request(_span() + _len(9, _len(1, MODEL.encode()))),
    "ints: negative, ten bytes, bool of 2": _request(
        _span(**{SCORE: AnyValue(int_value=-3), sc.RAGMON_FEEDBACK: AnyValue(bool_value=True)})
        + _attribute(VERSION, _len(2, _tag(3, 0) + _varint(2**70 - 1)))
        + _attribute(sc.RAGMON_PIPELINE, _len(2, _tag(2, 0) + _varint(2)))),
    "doubles: inf, -0.0": _request(_span(**{
        SCORE: AnyValue(double_value=math.inf),
        sc.retrieval_document_attr(1, sc.DOCUMENT_SCORE): AnyValue(double_value=-0.0),
        sc.retrieval_document_attr(1, sc.DOCUMENT_ID): AnyValue(int_value=4)})),
    "arrays, kvlists, bytes": _request(_span(**{
        MODEL: AnyValue(array_value={"values": [AnyValue(string_value="x")]}),
        sc.RAGMON_PIPELINE: AnyValue(kvlist_value={"values": [_kv("k", "v")]}),
        SCORE: AnyValue(bytes_value=b"\x00\xff")})),
    "status given once, code negative": _request(_span() + _len(15, _tag(3, 0) + _varint(2**64 - 1))),
    "events, a retriever's among them": _request(
        _span() + _len(11, _len(2, b"other")) + _len(11, RETRIEVER_EVENT + _len(2, b"renamed"))
        + _len(11, RETRIEVER_EVENT)),
    "no resource, no scope": _request(_span(), resource=b""),
    "content keys": _request(_span(**{
        sc.OUTPUT_VALUE: AnyValue(string_value="answer"),
        sc.retrieval_document_attr(0, sc.DOCUMENT_CONTENT): AnyValue(string_value="text")})),
    # content values are read when asked (LightSpan.value), from the bytes where they are plain
    "content values: merged, set then empty, an array, an int, blank": _request(
        _span(**{sc.GEN_AI_INPUT_MESSAGES: AnyValue(array_value={"values": [AnyValue(string_value="m")]}),
                 sc.TRACELOOP_ENTITY_OUTPUT: AnyValue(int_value=7),
                 sc.retrieval_document_attr(1, sc.DOCUMENT_ID): AnyValue(string_value="doc-1"),
                 sc.retrieval_document_attr(1, sc.DOCUMENT_CONTENT): AnyValue(string_value="  ")})
        + _len(9, _len(1, sc.OUTPUT_VALUE.encode()) + _len(2, _len(1, b"a")) + _len(2, _tag(3, 0) + _varint(7)))
        + _attribute(sc.retrieval_document_attr(0, sc.DOCUMENT_CONTENT), _len(2, _len(1, b"text")))
        + _attribute(sc.retrieval_document_attr(0, sc.DOCUMENT_CONTENT), _len(2, b""))),
}
# protobuf merges these (or skips a group): the objects decide
LEFT_TO_THE_OBJECTS: dict[str, bytes] = {
    "status given twice": _request(_span() + _len(15, _tag(3, 0) + _varint(2)) + _len(15, _len(2, b"m"))),
    "resource given twice": _request(_span(), resource=_len(1, b"") + _len(1, Resource().SerializeToString())),
    "scope given twice": _request(_span(), scope=_len(1, _len(1, b"a")) + _len(1, _len(2, b"1"))),
    "a group": _request(_span() + _tag(50, 3) + _tag(1, 0) + _varint(1) + _tag(50, 4)),
}


@pytest.mark.parametrize("name", list(SHAPES))
@pytest.mark.parametrize("bound", BOUNDS)
def test_the_reader_reads_wire_shapes_as_protobuf_does(name: str, bound: float) -> None:
    light = _check(SHAPES[name], bound)
    assert light == (0 if bound >= 1.0 else 1)  # (one span, its trace light below the bound)


@pytest.mark.parametrize("name", list(LEFT_TO_THE_OBJECTS))
def test_what_protobuf_merges_is_decoded_from_the_objects(name: str) -> None:
    raw = LEFT_TO_THE_OBJECTS[name]
    light = decode_export_request(raw, content_type="application/x-protobuf",
                                  latency_only=LatencyOnly(0.0, latency_keys()))
    full = decode_export_request(raw, content_type="application/x-protobuf")
    assert not any(isinstance(s, LightSpan) for s in light.spans)
    assert (list(light.spans), light.rejected_spans, light.errors) == (full.spans, full.rejected_spans, full.errors)
    assert full.spans  # (the message is valid: its span is kept)


def test_status_the_objects_read_is_the_one_given() -> None:
    batch = read_protobuf(SHAPES["status given once, code negative"], LatencyOnly(0.0, latency_keys()))
    assert isinstance(batch.spans[0], LightSpan)
    assert batch.spans[0].status_code == "UNSET"  # (-1: no known code)
    assert Status.FromString(_tag(3, 0) + _varint(2**64 - 1)).code == -1
