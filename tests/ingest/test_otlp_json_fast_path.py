"""The OTLP/JSON fast path agrees with the reference (json_format.ParseDict) path wherever it
answers, and answers for what real SDKs send."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest
from opentelemetry import trace as trace_api
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from ragmon.errors import DecodeError
from ragmon.ingest.decode.decoded import DecodedBatch
from ragmon.ingest.decode.otlp import decode_export_request
from ragmon.ingest.decode.otlp_json import decode_reference, fast_decode
from tests.ingest.otel_helpers import SpanFactory, to_otlp_dict


def _rich_document() -> dict[str, Any]:
    f = SpanFactory("svc", resource={"deployment.environment": "prod", "host.cpus": 8})
    upstream = SpanContext(trace_id=0xABC, span_id=0xDEF, is_remote=True, trace_flags=TraceFlags(1))
    with f.tracer.start_as_current_span("entry", kind=SpanKind.SERVER,
                                        context=trace_api.set_span_in_context(NonRecordingSpan(upstream))):
        for kind in (SpanKind.CLIENT, SpanKind.PRODUCER, SpanKind.CONSUMER, SpanKind.INTERNAL):
            with f.tracer.start_as_current_span(f"child-{kind.name}", kind=kind, attributes={
                    "s": "text ✓", "b": False, "i": -42, "d": 2.5, "d0": 0.0, "strs": ["a", "b"],
                    "ints": [1, 2], "bools": [True], "floats": [0.5, 1.0]}) as span:
                span.add_event("evt", {"k": "v", "n": 3})
                span.set_status(Status(StatusCode.ERROR, "bad") if kind == SpanKind.CLIENT else Status(StatusCode.OK))
    request = f.request()
    span = next(s for s in request.resource_spans[0].scope_spans[0].spans if s.name == "entry")
    span.dropped_attributes_count = 3
    span.dropped_events_count = 1
    nested = KeyValueList(values=[KeyValue(key="x", value=AnyValue(array_value=ArrayValue(values=[
        AnyValue(int_value=1), AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key="y", value=AnyValue())]))]))),
        KeyValue(key="empty", value=AnyValue())])
    span.attributes.append(KeyValue(key="kv", value=AnyValue(kvlist_value=nested)))
    span.attributes.append(KeyValue(key="unset", value=AnyValue()))
    return to_otlp_dict(request)


def _both(document: dict[str, Any]) -> tuple[DecodedBatch | None, DecodedBatch | DecodeError]:
    fast = fast_decode(copy.deepcopy(document))
    try:
        reference: DecodedBatch | DecodeError = decode_reference(copy.deepcopy(document))
    except DecodeError as exc:
        reference = exc
    return (DecodedBatch(*fast) if fast is not None else None), reference


def test_fast_path_answers_for_sdk_output_and_matches_the_reference() -> None:
    document = _rich_document()
    fast, reference = _both(document)
    assert fast is not None, "the fast path must handle what the OpenTelemetry SDK sends"
    assert isinstance(reference, DecodedBatch)
    assert fast == reference
    assert len(fast.spans) == 5
    assert {s.kind for s in fast.spans} == {"SERVER", "CLIENT", "PRODUCER", "CONSUMER", "INTERNAL"}
    entry = next(s for s in fast.spans if s.name == "entry")
    assert entry.parent_is_remote and entry.dropped_attributes_count == 3
    assert entry.attributes["kv"] == {"x": [1, {"y": None}], "empty": None}
    # and the public entry point uses it
    body = json.dumps(document).encode()
    assert decode_export_request(body, content_type="application/json") == reference


@pytest.mark.parametrize("edit", [
    lambda d: d["resourceSpans"][0].__setitem__("resource_spans_typo", 1),         # unknown key
    lambda d: _span(d).__setitem__("kind", "SPAN_KIND_SERVER"),                    # enum by name
    lambda d: _span(d).__setitem__("startTimeUnixNano", 17),                       # int64 as number
    lambda d: _span(d).__setitem__("links", [{"traceId": _span(d)["traceId"], "spanId": _span(d)["spanId"]}]),
    lambda d: _span(d)["attributes"].append({"key": "raw", "value": {"bytesValue": "AAE="}}),
    lambda d: _span(d)["attributes"].append({"key": "inf", "value": {"doubleValue": "Infinity"}}),
    lambda d: _span(d).__setitem__("traceId", "AAAAAAAAAAAAAAAAAAAAAQ=="),       # base64 id
    lambda d: _span(d).__setitem__("spanId", "zz" * 8),                            # not hex
    lambda d: _span(d).__setitem__("status", None),                                # null
], ids=["unknown-key", "enum-name", "int-number", "links", "bytes", "infinity", "base64-id", "bad-hex", "null"])
def test_unusual_documents_agree_whichever_path_answers(edit: Any) -> None:
    document = _rich_document()
    edit(document)
    fast, reference = _both(document)
    if fast is not None:
        assert fast == reference
    body = json.dumps(document).encode()
    try:
        public: DecodedBatch | DecodeError = decode_export_request(body, content_type="application/json")
    except DecodeError as exc:
        public = exc
    if isinstance(reference, DecodeError):
        assert isinstance(public, DecodeError)
    else:
        assert public == reference


def _span(document: dict[str, Any]) -> dict[str, Any]:
    return document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]


_ODD_VALUES: list[Any] = [None, 0, -1, 1.5, True, "", "x", "12", "-3", "1e3", [], {}, [1], {"a": 1},
                          2**63, 2**64, "SPAN_KIND_CLIENT", "STATUS_CODE_ERROR", "00" * 8, "ab" * 16]


def test_random_value_swaps_never_make_the_paths_disagree() -> None:
    rng = random.Random(7)
    base = _rich_document()
    answered = 0
    for _ in range(400):
        document = copy.deepcopy(base)
        for _ in range(rng.randint(1, 3)):
            _swap_random_leaf(document, rng)
        fast, reference = _both(document)
        if fast is not None:
            answered += 1
            assert isinstance(reference, DecodedBatch), (document, reference)
            assert fast == reference
    assert answered >= 20  # the fast path is not simply always declining


def _swap_random_leaf(document: Any, rng: random.Random) -> None:
    """Replace one randomly chosen value somewhere in the document with an odd one."""
    node = document
    for _ in range(12):
        if isinstance(node, dict) and node:
            key = rng.choice(list(node))
            child = node[key]
            if not isinstance(child, dict | list) or not child or rng.random() < 0.25:
                node[key] = rng.choice(_ODD_VALUES)
                return
            node = child
        elif isinstance(node, list) and node:
            index = rng.randrange(len(node))
            child = node[index]
            if not isinstance(child, dict | list) or not child or rng.random() < 0.25:
                node[index] = rng.choice(_ODD_VALUES)
                return
            node = child
        else:
            return
