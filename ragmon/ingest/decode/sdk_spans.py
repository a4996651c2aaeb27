"""Finished OpenTelemetry SDK spans -> ``SpanRecord``s, in process (``ragmon eval --app``).

The agent receives these spans as OTLP bytes; an in-process evaluation already holds them as
SDK objects. Encoding them to protobuf only to decode them again cost ``ragmon eval`` ~40 % of
its per-question time at 100 documents a question. This converter builds the records directly
and must give exactly what ``encode_spans`` + the protobuf reader (``otlp_proto.py``)
give (``tests/ingest/test_sdk_spans.py`` compares both on real SDK spans), so offline and online
extraction still read identical records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from ...types import AttrValue, SpanEvent, SpanRecord
from .decoded import MAX_ANY_VALUE_DEPTH

_MAX_DEPTH = MAX_ANY_VALUE_DEPTH  # deeper values are dropped, as the decoder does


def records_from_sdk_spans(spans: Iterable[ReadableSpan]) -> list[SpanRecord]:
    """One ``SpanRecord`` per span with a valid context (the decoder rejects the others)."""
    out: list[SpanRecord] = []
    for span in spans:
        context = span.context
        if context is None or not context.trace_id or not context.span_id:
            continue
        parent = span.parent
        parent_id = parent.span_id if parent is not None else 0
        scope = span.instrumentation_scope
        status = span.status
        out.append(SpanRecord(
            trace_id=f"{context.trace_id:032x}",
            span_id=f"{context.span_id:016x}",
            parent_span_id=f"{parent_id:016x}" if parent_id else None,
            name=span.name,
            start_time_ns=span.start_time or 0,
            end_time_ns=span.end_time or 0,
            attributes=_attributes(span.attributes),
            resource=_attributes(span.resource.attributes),
            events=tuple(SpanEvent(name=e.name, time_ns=e.timestamp, attributes=_attributes(e.attributes))
                         for e in span.events),
            status_code=status.status_code.name,
            status_message=status.description or "",
            kind=span.kind.name,
            scope_name=scope.name if scope is not None else "",
            dropped_attributes_count=span.dropped_attributes,
            parent_is_remote=bool(parent_id) and bool(parent is not None and parent.is_remote),
        ))
    return out


def _attributes(attributes: Mapping[str, Any] | None) -> dict[str, AttrValue]:
    out: dict[str, AttrValue] = {}
    for key, value in (attributes or {}).items():
        converted = _value(value, 0)
        if converted is not None:
            out[key] = converted
    return out


def _value(value: Any, depth: int) -> AttrValue:
    # the order of the OTLP encoder's checks: bool before int (bool is an int in Python)
    if isinstance(value, bool | str | int | float):
        return value
    if isinstance(value, bytes):
        return bytes(value)
    if depth >= _MAX_DEPTH:
        return None
    if isinstance(value, Mapping):
        return {str(k): _value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, Sequence):
        return [_value(item, depth + 1) for item in value]
    return None


__all__ = ["records_from_sdk_spans"]
