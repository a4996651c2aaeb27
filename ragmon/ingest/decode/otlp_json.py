"""The OTLP/JSON reader: a JSON body -> ``SpanRecord``s (always in full: JSON has no light read).

OTLP/JSON differs from protobuf's canonical JSON mapping in one way that matters here:
``traceId``/``spanId``/``parentSpanId`` are *hex* strings, not base64. Enum values may be ints or
names and int64 may be strings. Unknown fields are ignored, as the OTLP spec requires of receivers.

Two paths, one result. ``json_format.ParseDict`` walks every field in Python and decodes OTLP/JSON
about ten times slower than protobuf (Node.js and browser OpenTelemetry exporters send JSON by
default), so the common, well-formed shape is converted directly (``fast_decode``), which returns
``None`` — "use the reference path" — at the first thing it does not recognise exactly: an unknown
or snake_case key, a null, an enum name it does not know, a number in an unusual form, base64 ids,
links, bytes values. The document is then decoded with ``ParseDict`` (``decode_reference``: hex ids
rewritten to base64 first; ids that are already base64, as some hand-written clients send them, are
told apart by length: 16 bytes are 32 hex chars but 24 base64 chars) and read as protobuf objects
(``proto_values``), so behaviour on odd input is protobuf's own; a test checks that both paths agree
wherever the fast path answers.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ...errors import DecodeError
from ...types import AttrValue, SpanEvent, SpanRecord
from .decoded import (
    FLAG_PARENT_IS_REMOTE,
    MAX_ANY_VALUE_DEPTH,
    MAX_ERROR_MESSAGES,
    DecodedBatch,
    id_problem,
    short_error,
)
from .proto_values import convert_request

__all__ = ["Fallback", "decode_reference", "fast_decode", "read_json"]


def read_json(raw: bytes) -> DecodedBatch:
    """The spans of an OTLP/JSON document (strict UTF-8). Raises ``DecodeError``."""
    try:
        # Strict UTF-8 (json.loads on bytes would let encoded surrogates through, 'surrogatepass').
        text = raw.decode("utf-8-sig")
        document = json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise DecodeError(f"body is not valid JSON: {short_error(exc)}") from exc
    if _SURROGATE_ESCAPE.search(text):
        # "\ud800" escapes are valid JSON but not valid Unicode text: such a string cannot be
        # encoded as UTF-8 later (a label value once broke every /metrics scrape). Lone
        # surrogates become U+FFFD, as Go's encoding/json (the Collector) does; pairs were
        # already combined by the parser.
        document = _replace_lone_surrogates(document)
    if not isinstance(document, dict):
        raise DecodeError("OTLP/JSON body must be a JSON object with 'resourceSpans'")
    fast = fast_decode(document)
    if fast is not None:
        spans, rejected, errors = fast
        return DecodedBatch(spans=spans, rejected_spans=rejected, errors=errors)
    return decode_reference(document)


def decode_reference(document: dict[str, Any]) -> DecodedBatch:
    """OTLP/JSON through ``json_format.ParseDict``: exact protobuf semantics for any input."""
    try:
        _hex_ids_to_base64(document)
        request = json_format.ParseDict(document, ExportTraceServiceRequest(), ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError, AttributeError, RecursionError) as exc:
        raise DecodeError(f"body is not valid OTLP/JSON: {short_error(exc)}") from exc
    return convert_request(request)


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


# --- the reference path's id fix-up --------------------------------------------------------------
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


# --- the fast path ---------------------------------------------------------------------------------

_KIND_VALUES = {0: "INTERNAL", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
_KIND_NAMES = {
    "SPAN_KIND_UNSPECIFIED": "INTERNAL", "SPAN_KIND_INTERNAL": "INTERNAL", "SPAN_KIND_SERVER": "SERVER",
    "SPAN_KIND_CLIENT": "CLIENT", "SPAN_KIND_PRODUCER": "PRODUCER", "SPAN_KIND_CONSUMER": "CONSUMER",
}
_STATUS_VALUES = {0: "UNSET", 1: "OK", 2: "ERROR"}
_STATUS_NAMES = {"STATUS_CODE_UNSET": "UNSET", "STATUS_CODE_OK": "OK", "STATUS_CODE_ERROR": "ERROR"}

_TOP_KEYS = frozenset({"resourceSpans"})
_RESOURCE_SPANS_KEYS = frozenset({"resource", "scopeSpans", "schemaUrl"})
_RESOURCE_KEYS = frozenset({"attributes", "droppedAttributesCount"})  # entityRefs: reference path
_SCOPE_SPANS_KEYS = frozenset({"scope", "spans", "schemaUrl"})
_SCOPE_KEYS = frozenset({"name", "version", "attributes", "droppedAttributesCount"})
_SPAN_KEYS = frozenset({
    "traceId", "spanId", "traceState", "parentSpanId", "flags", "name", "kind", "startTimeUnixNano",
    "endTimeUnixNano", "attributes", "droppedAttributesCount", "events", "droppedEventsCount", "links",
    "droppedLinksCount", "status",
})
_EVENT_KEYS = frozenset({"timeUnixNano", "name", "attributes", "droppedAttributesCount"})
_STATUS_KEYS = frozenset({"code", "message"})
_KEY_VALUE_KEYS = frozenset({"key", "value"})
_MAX_DEPTH = MAX_ANY_VALUE_DEPTH
_INT64 = 1 << 63
_UINT64 = 1 << 64


class Fallback(Exception):
    """This document needs the reference (ParseDict) path."""


def fast_decode(document: Mapping[str, Any]) -> tuple[list[SpanRecord], int, list[str]] | None:
    """``(spans, rejected, errors)``, or None when the reference path must decide."""
    try:
        return _decode(document)
    except (Fallback, ValueError, TypeError, AttributeError, KeyError, RecursionError):
        return None


def _decode(document: Mapping[str, Any]) -> tuple[list[SpanRecord], int, list[str]]:
    _keys(document, _TOP_KEYS)
    spans: list[SpanRecord] = []
    errors: list[str] = []
    rejected = 0
    for resource_spans in _list(document.get("resourceSpans", [])):
        _keys(resource_spans, _RESOURCE_SPANS_KEYS)
        resource_obj = _dict(resource_spans.get("resource", {}))
        _keys(resource_obj, _RESOURCE_KEYS)
        resource = _attributes(resource_obj.get("attributes", []))
        _uint(resource_obj.get("droppedAttributesCount", 0), 32)
        _str(resource_spans.get("schemaUrl", ""))
        for scope_spans in _list(resource_spans.get("scopeSpans", [])):
            _keys(scope_spans, _SCOPE_SPANS_KEYS)
            scope = _dict(scope_spans.get("scope", {}))
            _keys(scope, _SCOPE_KEYS)
            scope_name = _str(scope.get("name", ""))
            _str(scope.get("version", ""))
            _attributes(scope.get("attributes", []))
            _uint(scope.get("droppedAttributesCount", 0), 32)
            _str(scope_spans.get("schemaUrl", ""))
            for span in _list(scope_spans.get("spans", [])):
                record, problem = _span(span, resource, scope_name)
                if record is not None:
                    spans.append(record)
                    continue
                rejected += 1
                if len(errors) < MAX_ERROR_MESSAGES:
                    errors.append(problem)
    return spans, rejected, errors


def _span(span: Any, resource: Mapping[str, AttrValue], scope_name: str) -> tuple[SpanRecord | None, str]:
    _keys(span, _SPAN_KEYS)
    if _list(span.get("links", [])):
        raise Fallback  # links are validated by the reference path (ragmon does not keep them)
    name = _str(span.get("name", ""))
    trace_id = _hex_id(span.get("traceId", ""), 16)
    span_id = _hex_id(span.get("spanId", ""), 8)
    parent = _hex_id(span.get("parentSpanId", ""), 8)
    _str(span.get("traceState", ""))
    flags = _uint(span.get("flags", 0), 32)
    kind = _enum(span.get("kind", 0), _KIND_VALUES, _KIND_NAMES, "INTERNAL")
    start = _uint(span.get("startTimeUnixNano", 0), 64)
    end = _uint(span.get("endTimeUnixNano", 0), 64)
    attributes = _attributes(span.get("attributes", []))
    dropped = _uint(span.get("droppedAttributesCount", 0), 32)
    _uint(span.get("droppedEventsCount", 0), 32)
    _uint(span.get("droppedLinksCount", 0), 32)
    events = tuple(_event(e) for e in _list(span.get("events", [])))
    status = _dict(span.get("status", {}))
    _keys(status, _STATUS_KEYS)
    status_code = _enum(status.get("code", 0), _STATUS_VALUES, _STATUS_NAMES, "UNSET")
    status_message = _str(status.get("message", ""))
    problem = id_problem(name, trace_id, span_id, parent)
    if problem is not None:
        return None, problem
    return SpanRecord(
        trace_id=trace_id.hex(),
        span_id=span_id.hex(),
        parent_span_id=parent.hex() if parent and any(parent) else None,
        name=name,
        start_time_ns=start,
        end_time_ns=end,
        attributes=attributes,
        resource=resource,
        events=events,
        status_code=status_code,
        status_message=status_message,
        kind=kind,
        scope_name=scope_name,
        dropped_attributes_count=dropped,
        parent_is_remote=bool(parent) and bool(flags & FLAG_PARENT_IS_REMOTE),
    ), ""


def _event(event: Any) -> SpanEvent:
    _keys(event, _EVENT_KEYS)
    _uint(event.get("droppedAttributesCount", 0), 32)
    return SpanEvent(name=_str(event.get("name", "")), time_ns=_uint(event.get("timeUnixNano", 0), 64),
                     attributes=_attributes(event.get("attributes", [])))


def _attributes(pairs: Any) -> dict[str, AttrValue]:
    out: dict[str, AttrValue] = {}
    for pair in _list(pairs):
        _keys(pair, _KEY_VALUE_KEYS)
        value = _any_value(_dict(pair.get("value", {})), 0)
        if value is not None:
            out[_str(pair.get("key", ""))] = value
    return out


def _any_value(value: Mapping[str, Any], depth: int) -> AttrValue:
    if not value:
        return None
    if len(value) != 1:
        raise Fallback  # a oneof with two members set: let protobuf say what it thinks
    ((which, raw),) = value.items()
    if which == "stringValue":
        return _str(raw)
    if which == "boolValue":
        if not isinstance(raw, bool):
            raise Fallback
        return raw
    if which == "intValue":
        number = _int(raw)
        if number >= _INT64:
            raise Fallback  # beyond int64
        return number
    if which == "doubleValue":
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise Fallback  # "NaN", "Infinity", numeric strings: the reference path knows them
        return float(raw)
    if which == "arrayValue":
        array = _dict(raw)
        _keys(array, frozenset({"values"}))
        items = _list(array.get("values", []))
        if depth >= _MAX_DEPTH:
            return None
        return [_any_value(_dict(item), depth + 1) for item in items]
    if which == "kvlistValue":
        kvlist = _dict(raw)
        _keys(kvlist, frozenset({"values"}))
        entries = _list(kvlist.get("values", []))
        if depth >= _MAX_DEPTH:
            return None
        out: dict[str, AttrValue] = {}
        for entry in entries:
            _keys(entry, _KEY_VALUE_KEYS)
            out[_str(entry.get("key", ""))] = _any_value(_dict(entry.get("value", {})), depth + 1)
        return out
    raise Fallback  # bytesValue, or a member this version does not know


# --- strict little checks: anything unusual falls back ----------------------------------------------
def _enum(value: Any, by_number: Mapping[int, str], by_name: Mapping[str, str], default: str) -> str:
    if isinstance(value, str):
        if value not in by_name:
            raise Fallback  # unknown names are the reference path's call
        return by_name[value]
    number = _int(value)
    if not -(1 << 31) <= number < (1 << 31):
        raise Fallback
    return by_number.get(number, default)  # open enum: unknown numbers are kept, shown as default


def _keys(obj: Any, allowed: frozenset[str]) -> None:
    if not isinstance(obj, dict) or not allowed.issuperset(obj):
        raise Fallback


def _dict(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Fallback
    return value


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise Fallback
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise Fallback
    return value


def _uint(value: Any, bits: int) -> int:
    number = _int(value)
    if number < 0 or number >= (1 << bits):
        raise Fallback
    return number


def _int(value: Any) -> int:
    if isinstance(value, bool):
        raise Fallback
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and value.isascii() and (value.isdigit() or (value[:1] == "-" and value[1:].isdigit())):
        number = int(value)
    else:
        raise Fallback  # floats such as 1e3, odd strings
    if not -_INT64 <= number < _UINT64:
        raise Fallback
    return number


def _hex_id(value: Any, size: int) -> bytes:
    text = _str(value)
    if not text:
        return b""
    if len(text) != 2 * size:
        raise Fallback  # base64 ids or wrong lengths: the reference path handles those
    return bytes.fromhex(text)  # ValueError (not hex) -> fallback
