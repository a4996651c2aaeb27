"""OTLP decoding on real bytes from the OpenTelemetry SDK: protobuf, OTLP/JSON (hex ids), gzip,
and every kind of bad body the receiver and the Kafka source can meet."""

from __future__ import annotations

import base64
import gzip
import json
import zlib

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from opentelemetry.trace import SpanKind, Status, StatusCode

from ragmon import semconv as sc
from ragmon.errors import DecodeError
from ragmon.ingest.decode.otlp import MAX_ERROR_MESSAGES, decode_export_request, decode_traces_payload
from tests.ingest.otel_helpers import SpanFactory, to_otlp_dict, to_otlp_json

PROTO = "application/x-protobuf"
JSON = "application/json"


@pytest.fixture
def factory() -> SpanFactory:
    f = SpanFactory("support-bot", resource={"deployment.environment": "test"})
    with f.tracer.start_as_current_span("rag", kind=SpanKind.SERVER,
                                        attributes={"input.value": "How do I reset my password?"}) as root:
        with f.tracer.start_as_current_span("search", kind=SpanKind.CLIENT, attributes={
            "openinference.span.kind": "RETRIEVER",
            "retrieval.documents.0.document.score": 0.87,
            "ragmon.retrieval.document_count": 3,
            "ragmon.content.sampled": True,
            "tag.tags": ["faq", "auth"],
            "numbers": [1, 2, 3],
        }) as child:
            child.add_event("cache_miss", {"cache.key": "k1", "attempt": 2})
            child.set_status(Status(StatusCode.ERROR, "index unavailable"))
        root.set_attribute("output.value", "Use the reset link.")
    return f


def _by_name(spans):  # type: ignore[no-untyped-def]
    return {s.name: s for s in spans}


def test_protobuf_round_trip_keeps_every_field(factory: SpanFactory) -> None:
    sdk_spans = {s.name: s for s in factory.finished()}
    batch = decode_export_request(factory.request().SerializeToString(), content_type=PROTO)
    assert batch.rejected_spans == 0 and batch.errors == []
    spans = _by_name(batch.spans)
    root, search = spans["rag"], spans["search"]

    sdk_root = sdk_spans["rag"]
    assert root.trace_id == format(sdk_root.context.trace_id, "032x")
    assert root.span_id == format(sdk_root.context.span_id, "016x")
    assert root.parent_span_id is None
    assert search.parent_span_id == root.span_id
    assert search.trace_id == root.trace_id
    assert (root.start_time_ns, root.end_time_ns) == (sdk_root.start_time, sdk_root.end_time)
    assert root.kind == "SERVER" and search.kind == "CLIENT"
    assert root.status_code == "UNSET"
    assert (search.status_code, search.status_message) == ("ERROR", "index unavailable")
    assert root.scope_name == "tests.ingest"
    assert root.resource["service.name"] == "support-bot"
    assert root.resource["deployment.environment"] == "test"
    assert root.service_name == "support-bot"
    assert search.attributes["retrieval.documents.0.document.score"] == 0.87
    assert search.attributes["ragmon.retrieval.document_count"] == 3
    assert search.attributes["ragmon.content.sampled"] is True
    assert search.attributes["tag.tags"] == ["faq", "auth"]
    assert search.attributes["numbers"] == [1, 2, 3]
    assert [(e.name, dict(e.attributes)) for e in search.events] == [
        ("cache_miss", {"cache.key": "k1", "attempt": 2})]
    assert root.attributes["output.value"] == "Use the reset link."


def test_otlp_json_with_hex_ids_decodes_like_protobuf(factory: SpanFactory) -> None:
    request = factory.request()
    from_proto = decode_export_request(request.SerializeToString(), content_type=PROTO)
    body = to_otlp_json(request)
    assert json.loads(body)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] == \
        from_proto.spans[0].trace_id  # the test really sends hex ids
    from_json = decode_export_request(body, content_type="application/json; charset=utf-8")
    assert from_json.spans == from_proto.spans
    assert from_json.rejected_spans == 0


def test_otlp_json_accepts_enum_names_and_int64_numbers(factory: SpanFactory) -> None:
    document = to_otlp_dict(factory.request())
    span = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["kind"] = "SPAN_KIND_CONSUMER"
    span["status"] = {"code": "STATUS_CODE_OK"}
    span["startTimeUnixNano"] = int(span["startTimeUnixNano"])  # number instead of string
    span["futureField"] = {"added": "in a later OTLP version"}  # receivers must ignore unknown fields
    batch = decode_export_request(json.dumps(document).encode(), content_type=JSON)
    decoded = batch.spans[0]
    assert decoded.kind == "CONSUMER" and decoded.status_code == "OK"
    assert decoded.start_time_ns == int(span["startTimeUnixNano"])


def test_otlp_json_with_base64_ids_is_also_accepted(factory: SpanFactory) -> None:
    from google.protobuf import json_format

    request = factory.request()
    base64_body = json_format.MessageToJson(request).encode()  # protobuf's mapping: base64 ids
    expected = decode_export_request(request.SerializeToString(), content_type=PROTO).spans
    assert decode_export_request(base64_body, content_type=JSON).spans == expected


@pytest.mark.parametrize("content_type", [PROTO, JSON])
def test_gzip_bodies(factory: SpanFactory, content_type: str) -> None:
    request = factory.request()
    raw = request.SerializeToString() if content_type == PROTO else to_otlp_json(request)
    plain = decode_export_request(raw, content_type=content_type)
    zipped = decode_export_request(gzip.compress(raw), content_type=content_type, content_encoding="gzip")
    assert zipped.spans == plain.spans and len(plain.spans) == 2
    # RFC 1952 allows several gzip members back to back
    half = len(raw) // 2
    members = gzip.compress(raw[:half]) + gzip.compress(raw[half:])
    assert decode_export_request(members, content_type=content_type, content_encoding="GZIP").spans == plain.spans


def test_identity_encoding_and_content_type_parameters(factory: SpanFactory) -> None:
    raw = factory.request().SerializeToString()
    batch = decode_export_request(raw, content_type="Application/X-Protobuf; foo=bar", content_encoding="identity")
    assert len(batch.spans) == 2


def test_zip_bomb_is_refused_without_inflating_it() -> None:
    bomb = gzip.compress(b"\0" * (64 << 20), compresslevel=9)  # 64 MiB of zeros in ~64 KiB
    assert len(bomb) < 1 << 20
    with pytest.raises(DecodeError) as info:
        decode_export_request(bomb, content_type=PROTO, content_encoding="gzip", max_bytes=1 << 20)
    assert info.value.reason == sc.DROP_BODY_TOO_LARGE
    assert "inflates beyond" in str(info.value)


def test_inflated_size_exactly_at_the_limit_is_accepted(factory: SpanFactory) -> None:
    raw = factory.request().SerializeToString()
    batch = decode_export_request(gzip.compress(raw), content_type=PROTO, content_encoding="gzip",
                                  max_bytes=len(raw))
    assert len(batch.spans) == 2
    with pytest.raises(DecodeError) as info:
        decode_export_request(gzip.compress(raw), content_type=PROTO, content_encoding="gzip",
                              max_bytes=len(raw) - 1)
    assert info.value.reason == sc.DROP_BODY_TOO_LARGE


def test_raw_body_over_the_limit() -> None:
    with pytest.raises(DecodeError) as info:
        decode_export_request(b"x" * 101, content_type=PROTO, max_bytes=100)
    assert info.value.reason == sc.DROP_BODY_TOO_LARGE


@pytest.mark.parametrize("body", [b"\xff\xff\xff\xff garbage", b"\x0a\xff\xff\xff\xff\x0f"])
def test_garbage_protobuf(body: bytes) -> None:
    with pytest.raises(DecodeError) as info:
        decode_export_request(body, content_type=PROTO)
    assert info.value.reason == sc.DROP_MALFORMED_BODY
    assert "not a valid OTLP protobuf" in str(info.value)


def test_truncated_protobuf_is_malformed_at_every_cut(factory: SpanFactory) -> None:
    raw = factory.request().SerializeToString()
    cuts = range(2, len(raw) - 1, max(1, len(raw) // 40))
    for cut in cuts:
        with pytest.raises(DecodeError) as info:
            decode_export_request(raw[:cut], content_type=PROTO)
        assert info.value.reason == sc.DROP_MALFORMED_BODY, cut


@pytest.mark.parametrize("body", [b"{", b"[]", b'"text"', b"\xff\xfe", b'{"resourceSpans": "nope"}',
                                  b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": "soon"}]}]}]}'])
def test_malformed_json(body: bytes) -> None:
    with pytest.raises(DecodeError) as info:
        decode_export_request(body, content_type=JSON)
    assert info.value.reason == sc.DROP_MALFORMED_BODY


def test_unknown_enum_names_are_ignored_and_a_span_without_ids_rejected() -> None:
    body = b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"kind": "SPAN_KIND_FROM_THE_FUTURE"}]}]}]}'
    batch = decode_export_request(body, content_type=JSON)
    assert batch.spans == [] and batch.rejected_spans == 1
    assert "trace_id must be 16" in batch.errors[0]


def test_truncated_and_corrupt_gzip(factory: SpanFactory) -> None:
    zipped = gzip.compress(factory.request().SerializeToString())
    for body in (zipped[: len(zipped) // 2], b"not gzip at all", zipped[:5] + b"\x00" * 20):
        with pytest.raises(DecodeError) as info:
            decode_export_request(body, content_type=PROTO, content_encoding="gzip")
        assert info.value.reason == sc.DROP_MALFORMED_BODY


@pytest.mark.parametrize("content_type", ["text/plain", "", "application/grpc", "application/protobuf+x"])
def test_unsupported_content_type(content_type: str) -> None:
    with pytest.raises(DecodeError) as info:
        decode_export_request(b"{}", content_type=content_type)
    assert info.value.reason == sc.DROP_UNSUPPORTED_MEDIA


def test_unsupported_content_encoding() -> None:
    with pytest.raises(DecodeError) as info:
        decode_export_request(b"{}", content_type=JSON, content_encoding="br")
    assert info.value.reason == sc.DROP_UNSUPPORTED_MEDIA


def test_deflate_encoding_is_understood(factory: SpanFactory) -> None:
    raw = factory.request().SerializeToString()
    batch = decode_export_request(zlib.compress(raw), content_type=PROTO, content_encoding="deflate")
    assert len(batch.spans) == 2


def test_malformed_spans_are_rejected_one_by_one(factory: SpanFactory) -> None:
    request = factory.request()
    spans = request.resource_spans[0].scope_spans[0].spans
    good = spans[0]
    bad_trace = spans.add()
    bad_trace.CopyFrom(good)
    bad_trace.trace_id = b"\x01\x02\x03"
    bad_span = spans.add()
    bad_span.CopyFrom(good)
    bad_span.span_id = b""
    zero_trace = spans.add()
    zero_trace.CopyFrom(good)
    zero_trace.trace_id = b"\x00" * 16
    bad_parent = spans.add()
    bad_parent.CopyFrom(good)
    bad_parent.parent_span_id = b"\x01" * 4
    batch = decode_export_request(request.SerializeToString(), content_type=PROTO)
    assert len(batch.spans) == 2  # the two real ones
    assert batch.rejected_spans == 4
    assert len(batch.errors) == 4
    assert any("trace_id must be 16" in e for e in batch.errors)
    assert any("span_id must be 8" in e for e in batch.errors)
    assert any("parent_span_id" in e for e in batch.errors)


def test_malformed_hex_ids_in_json_reject_only_that_span(factory: SpanFactory) -> None:
    document = to_otlp_dict(factory.request())
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    extra = dict(spans[0], traceId="zz" * 16)
    orphan = dict(spans[0], spanId="0123456789abcdef", parentSpanId="not-an-id!")
    spans.extend([extra, orphan])
    batch = decode_export_request(json.dumps(document).encode(), content_type=JSON)
    assert len(batch.spans) == 2
    assert batch.rejected_spans == 2  # an unparsable parent never turns a child into a root


def test_error_messages_are_bounded(factory: SpanFactory) -> None:
    request = factory.request()
    spans = request.resource_spans[0].scope_spans[0].spans
    for _ in range(50):
        bad = spans.add()
        bad.CopyFrom(spans[0])
        bad.trace_id = b"\x01"
    batch = decode_export_request(request.SerializeToString(), content_type=PROTO)
    assert batch.rejected_spans == 50
    assert len(batch.errors) == MAX_ERROR_MESSAGES


def test_all_attribute_value_kinds(factory: SpanFactory) -> None:
    request = factory.request()
    span = request.resource_spans[0].scope_spans[0].spans[0]
    del span.attributes[:]
    kv = KeyValueList(values=[KeyValue(key="a", value=AnyValue(int_value=1)),
                              KeyValue(key="b", value=AnyValue(array_value=ArrayValue(values=[
                                  AnyValue(string_value="x"), AnyValue(bool_value=False)])))])
    span.attributes.extend([
        KeyValue(key="s", value=AnyValue(string_value="text")),
        KeyValue(key="t", value=AnyValue(bool_value=True)),
        KeyValue(key="i", value=AnyValue(int_value=-(2**62))),
        KeyValue(key="d", value=AnyValue(double_value=0.25)),
        KeyValue(key="bytes", value=AnyValue(bytes_value=b"\x00\x01")),
        KeyValue(key="kv", value=AnyValue(kvlist_value=kv)),
        KeyValue(key="empty", value=AnyValue()),
    ])
    span.dropped_attributes_count = 7
    for body, ctype in ((request.SerializeToString(), PROTO), (to_otlp_json(request), JSON)):
        decoded = decode_export_request(body, content_type=ctype).spans[0]
        assert dict(decoded.attributes) == {
            "s": "text", "t": True, "i": -(2**62), "d": 0.25, "bytes": b"\x00\x01",
            "kv": {"a": 1, "b": ["x", False]},
        }
        assert decoded.dropped_attributes_count == 7


def test_sdk_attribute_limit_shows_as_dropped_count() -> None:
    f = SpanFactory(max_attributes=4)
    with f.tracer.start_as_current_span("retrieve") as span:
        for i in range(10):
            span.set_attribute(f"retrieval.documents.{i}.document.id", f"d{i}")
    (record,) = f.records()
    assert record.dropped_attributes_count == 6
    assert len(record.attributes) == 4


def test_kafka_payloads_proto_and_json(factory: SpanFactory) -> None:
    request = factory.request()
    expected = decode_export_request(request.SerializeToString(), content_type=PROTO).spans
    traces_data = TracesData(resource_spans=request.resource_spans)  # what kafkaexporter writes
    assert decode_traces_payload(traces_data.SerializeToString(), "otlp_proto").spans == expected
    assert decode_traces_payload(to_otlp_json(request), "otlp_json").spans == expected
    with pytest.raises(DecodeError) as info:
        decode_traces_payload(b"\x0a\x05abc", "otlp_proto")
    assert info.value.reason == sc.DROP_MALFORMED_BODY
    with pytest.raises(DecodeError) as info:
        decode_traces_payload(b"{}", "zipkin_json")
    assert info.value.reason == sc.DROP_UNSUPPORTED_MEDIA


def test_empty_requests_are_valid() -> None:
    assert decode_export_request(b"", content_type=PROTO).spans == []
    assert decode_export_request(b"{}", content_type=JSON).spans == []
    assert decode_export_request(b'{"resourceSpans": []}', content_type=JSON).spans == []


def test_hex_id_case_is_normalised(factory: SpanFactory) -> None:
    document = to_otlp_dict(factory.request())
    span = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["traceId"] = span["traceId"].upper()
    decoded = decode_export_request(json.dumps(document).encode(), content_type=JSON).spans[0]
    assert decoded.trace_id == span["traceId"].lower()
    assert base64.b16decode(decoded.trace_id.upper())  # still 16 valid bytes


def test_remote_parent_flag_survives_both_encodings() -> None:
    from opentelemetry import trace as trace_api
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    f = SpanFactory()
    upstream = SpanContext(trace_id=0xABC, span_id=0xDEF, is_remote=True, trace_flags=TraceFlags(1))
    with f.tracer.start_as_current_span("entry", context=trace_api.set_span_in_context(NonRecordingSpan(upstream))), \
            f.tracer.start_as_current_span("local child"):
        pass
    request = f.request()
    for body, ctype in ((request.SerializeToString(), PROTO), (to_otlp_json(request), JSON)):
        spans = _by_name(decode_export_request(body, content_type=ctype).spans)
        assert spans["entry"].parent_span_id == format(0xDEF, "016x")
        assert spans["entry"].parent_is_remote is True
        assert spans["local child"].parent_is_remote is False


@pytest.mark.parametrize("content_type", [PROTO, JSON])
def test_mutated_bodies_only_ever_raise_decode_error(factory: SpanFactory, content_type: str) -> None:
    """Deterministic fuzzing: flipped, dropped and inserted bytes either decode or raise
    DecodeError — never another exception that would escape the receiver's error handling."""
    import random

    request = factory.request()
    body = request.SerializeToString() if content_type == PROTO else to_otlp_json(request)
    rng = random.Random(1234)
    outcomes = {"decoded": 0, "rejected": 0}
    for _ in range(300):
        mutated = bytearray(body)
        for _ in range(rng.randint(1, 4)):
            pos = rng.randrange(len(mutated))
            action = rng.random()
            if action < 0.5:
                mutated[pos] = rng.randrange(256)
            elif action < 0.75:
                del mutated[pos]
            else:
                mutated.insert(pos, rng.randrange(256))
        try:
            decode_export_request(bytes(mutated), content_type=content_type)
            outcomes["decoded"] += 1
        except DecodeError as exc:
            assert exc.reason == sc.DROP_MALFORMED_BODY
            outcomes["rejected"] += 1
    assert outcomes["rejected"] > 0 and sum(outcomes.values()) == 300


@pytest.mark.parametrize("document", [
    {"resourceSpans": None},
    {"resourceSpans": [None, 1, "x"]},
    {"resourceSpans": [{"scopeSpans": None}]},
    {"resourceSpans": [{"scopeSpans": [{"spans": None}]}]},
    {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": 5}]}]}]},
    {"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": [{"key": "k", "value": {"intValue": "x"}}]}]}]}]},
    {"resourceSpans": [{"resource": {"attributes": "nope"}}]},
])
def test_odd_json_shapes_are_rejected_or_decoded_never_crash(document: dict) -> None:
    try:
        batch = decode_export_request(json.dumps(document).encode(), content_type=JSON)
    except DecodeError as exc:
        assert exc.reason == sc.DROP_MALFORMED_BODY
    else:
        assert batch.spans == []
