"""Protobuf span objects -> ``SpanRecord``s: how a span is decoded in full, written once.

The protobuf reader (``otlp_proto.py``) parses a message with protobuf and reads the spans it
decodes in full from the parsed objects with these functions: every span without
``latency_only``, a span of a trace inside the judging sample, a light span completed later
(``LightSpan.to_record``). The JSON reader's reference path (``json_format.ParseDict``) ends here
too. Protobuf objects never leave ``ingest/``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ...types import AttrValue, SpanEvent, SpanRecord
from .decoded import (
    FLAG_PARENT_IS_REMOTE,
    KIND_NAMES,
    MAX_ANY_VALUE_DEPTH,
    MAX_ERROR_MESSAGES,
    STATUS_NAMES,
    DecodedBatch,
    id_problem,
    short_error,
)

__all__ = ["any_value", "attributes", "convert_request", "file_full_span", "span_record"]


def convert_request(request: ExportTraceServiceRequest) -> DecodedBatch:
    """Every span of ``request`` decoded in full (a span with bad ids is rejected, its batch kept)."""
    spans: list[SpanRecord] = []
    errors: list[str] = []
    rejected = 0
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope_name = scope_spans.scope.name
            for span in scope_spans.spans:
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
    problem = id_problem(span.name, span.trace_id, span.span_id, span.parent_span_id)
    if problem is not None:
        return problem
    try:
        return span_record(span, resource, scope_name)
    except (ValueError, TypeError, RecursionError) as exc:  # defensive
        return f"span {span.name[:64]!r}: {short_error(exc)}"


def span_record(span: Span, resource: Mapping[str, AttrValue], scope_name: str) -> SpanRecord:
    """The ``SpanRecord`` of a span whose ids are valid."""
    parent = span.parent_span_id
    return SpanRecord(
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        # An all-zero parent id is "no parent" in some exporters.
        parent_span_id=parent.hex() if parent and any(parent) else None,
        name=span.name,
        start_time_ns=span.start_time_unix_nano,
        end_time_ns=span.end_time_unix_nano,
        attributes=attributes(span.attributes),
        resource=resource,
        events=tuple(
            SpanEvent(name=event.name, time_ns=event.time_unix_nano, attributes=attributes(event.attributes))
            for event in span.events
        ),
        status_code=STATUS_NAMES.get(span.status.code, "UNSET"),
        status_message=span.status.message,
        kind=KIND_NAMES.get(span.kind, "INTERNAL"),
        scope_name=scope_name,
        dropped_attributes_count=span.dropped_attributes_count,
        parent_is_remote=bool(parent) and bool(span.flags & FLAG_PARENT_IS_REMOTE),
    )


def attributes(pairs: Iterable[KeyValue]) -> dict[str, AttrValue]:
    """Key-value pairs as a dict (duplicate keys: the last set value wins, like the SDKs)."""
    out: dict[str, AttrValue] = {}
    for pair in pairs:
        value = any_value(pair.value, 0)
        if value is not None:
            out[pair.key] = value
    return out


def any_value(value: AnyValue, depth: int) -> AttrValue:
    """An ``AnyValue`` as a Python value; None when unset (or nested deeper than ``MAX_ANY_VALUE_DEPTH``)."""
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
        return [any_value(item, depth + 1) for item in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: any_value(kv.value, depth + 1) for kv in value.kvlist_value.values}
    return None
