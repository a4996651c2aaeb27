"""The latency-only decode: OTLP protobuf spans of traces the agent will not judge, read lightly.

Sampling is a hash of the trace id, so it is decided before anything else is decoded. A span
whose trace lies outside every judging rate (``LatencyOnly.bound``: the highest rate any pipeline
can get) becomes a ``LightSpan``: ids, timings, status and only the attributes that decide the
latency-only fields (``extract.latency_keys``, document ids and scores). Other attributes are
looked at by key and skipped: no value object, no text copy. Of a *content* key (question,
answer, messages, document text or metadata: ``extract/_latency.py``) only its presence is
kept, as its position among the span's attributes, so that the few questions whose answer
depends on content can read that one value later (``value``); of the events only whether one is
a ``db.query.result`` (a retriever). A ``LightSpan`` keeps a reference to its protobuf span, so a
trace that a priority rule picks for the judge is rebuilt in full (``to_record``).

Everything else — id validation, rejected spans and their messages — is ``otlp.py``'s: a span
that is not plainly valid is handed to the full decoder, which rejects it as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from .. import semconv as sc
from ..sampling import trace_fraction
from ..types import AttrValue, SpanRecord
from .extract import (
    CONTENT_KEYS,
    CONTENT_PREFIXES,
    DOCUMENT_LATENCY_SUFFIXES,
    DOCUMENT_PREFIXES,
    declared_role,
    key_role,
)
from .otlp import (
    _FLAG_PARENT_IS_REMOTE,
    _STATUS_NAMES,
    MAX_ERROR_MESSAGES,
    _any_value,
    _attributes,
    _convert_span,
    _short,
    _validate_ids,
)

__all__ = ["LatencyOnly", "LightBatch", "LightSpan", "convert_request_light"]

_ZERO_TRACE = bytes(16)
_ZERO_SPAN = bytes(8)
_SPAN_OVERHEAD = 300  # as the assembler's estimate for a decoded span
_NO_CONTENT: Mapping[str, int] = {}


@dataclass(frozen=True, slots=True)
class LatencyOnly:
    """When a span may be read lightly: its trace is outside ``bound`` (``ragmon.sampling``: the
    highest judging rate any pipeline can get), and which attributes to read (``latency_keys``)."""

    bound: float
    keys: frozenset[str]

    def light(self, fraction: float) -> bool:
        """Not inside ``bound`` (``in_sample`` on the trace's fraction)."""
        return self.bound <= 0.0 or (self.bound < 1.0 and fraction >= self.bound)


class LightSpan:
    """A span read for latency only: what ``SpanRecord`` has, minus all attributes but the
    latency keys, plus the span's role, its trace's sampling fraction and its protobuf span."""

    __slots__ = ("_proto", "_record", "_scope", "attributes", "content", "dropped_attributes_count",
                 "end_time_ns", "fraction", "name", "parent_is_remote", "parent_span_id", "resource",
                 "retriever_event", "role", "service_name", "size", "span_id", "start_time_ns",
                 "status_code", "trace_id")

    events = ()  # only whether one is a retriever's result is kept (retriever_event)

    def __init__(self, proto: Span, scope: str, trace_id: str, span_id: str, parent_span_id: str | None,
                 parent_is_remote: bool, fraction: float, attributes: dict[str, AttrValue],
                 resource: Mapping[str, AttrValue], service_name: str | None,
                 content: Mapping[str, int] = _NO_CONTENT, retriever_event: bool = False) -> None:
        self._proto = proto
        self._record: SpanRecord | None = None
        self._scope = scope
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_span_id = parent_span_id
        self.parent_is_remote = parent_is_remote
        self.fraction = fraction
        self.attributes = attributes
        self.resource = resource
        self.service_name = service_name
        self.name: str = proto.name
        self.start_time_ns: int = proto.start_time_unix_nano
        self.end_time_ns: int = proto.end_time_unix_nano
        self.status_code = _STATUS_NAMES.get(proto.status.code, "UNSET")
        self.dropped_attributes_count: int = proto.dropped_attributes_count
        self.content = content  # content key -> position of its (last) occurrence in proto.attributes
        self.retriever_event = retriever_event
        role = declared_role(attributes, retriever_event)
        if role is None and (content or attributes):
            role = _key_role(proto)
        self.role = role or None
        # what this span holds: its protobuf message (the assembler bounds buffered bytes)
        self.size = _SPAN_OVERHEAD + len(self.name) + proto.ByteSize()

    @property
    def duration_s(self) -> float:
        return max(0, self.end_time_ns - self.start_time_ns) / 1e9

    def to_record(self) -> SpanRecord:
        """The full ``SpanRecord``, exactly as ``otlp.py`` decodes it (made once)."""
        if self._record is None:
            self._record = _convert_span(self._proto, self.resource, self._scope)
        return self._record

    def value(self, key: str) -> AttrValue:
        """The value of a content key as the full decoder reads it; None when absent."""
        position = self.content.get(key)
        if position is None:
            return None
        pairs = self._proto.attributes
        value = _any_value(pairs[position].value, 0)
        if value is None:  # an empty last occurrence: the full decoder keeps the last set one
            for pair in reversed(pairs):
                if pair.key == key:
                    value = _any_value(pair.value, 0)
                    if value is not None:
                        break
        return value


def _key_role(proto: Span) -> str | None:
    """``role_of``'s data-key fallback: the first key (with a value) that implies a role, in the
    order the full decoder's attribute dict has them (a key sits where it first had a value)."""
    for pair in proto.attributes:
        role = key_role(pair.key)
        if role is not None and pair.value.WhichOneof("value") is not None:
            return role
    return None


@dataclass(frozen=True)
class LightBatch:
    """``otlp.DecodedBatch`` with ``LightSpan``s among its spans (an ``otlp.SpanBatch``)."""

    spans: list[SpanRecord | LightSpan]
    rejected_spans: int = 0
    errors: list[str] = field(default_factory=list)


def convert_request_light(request: ExportTraceServiceRequest, latency_only: LatencyOnly) -> LightBatch:
    """``otlp._convert_request`` with ``LightSpan``s for spans of traces outside the judging bound."""
    spans: list[SpanRecord | LightSpan] = []
    errors: list[str] = []
    rejected = 0
    keys = latency_only.keys
    last_trace: bytes | None = None
    trace_hex = ""
    fraction = 0.0
    light = False
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        service = resource.get("service.name")
        service_name = str(service) if service is not None else None
        for scope_spans in resource_spans.scope_spans:
            scope_name = scope_spans.scope.name
            for span in scope_spans.spans:
                trace_id = span.trace_id
                if trace_id != last_trace:  # spans of one trace mostly come together: hash once
                    last_trace = trace_id
                    trace_hex = trace_id.hex()
                    fraction = trace_fraction(trace_id)
                    light = latency_only.light(fraction)
                if light:
                    try:
                        record = _light_span(span, scope_name, trace_id, trace_hex, fraction, keys,
                                             resource, service_name)
                    except (ValueError, TypeError, RecursionError):  # the full decoder decides
                        record = None
                    if record is not None:
                        spans.append(record)
                        continue
                problem = _validate_ids(span)
                if problem is None:
                    try:
                        spans.append(_convert_span(span, resource, scope_name))
                        continue
                    except (ValueError, TypeError, RecursionError) as exc:  # defensive: never fail a batch
                        problem = f"span {span.name[:64]!r}: {_short(exc)}"
                rejected += 1
                if len(errors) < MAX_ERROR_MESSAGES:
                    errors.append(problem)
    return LightBatch(spans=spans, rejected_spans=rejected, errors=errors)


def _light_span(span: Span, scope_name: str, trace_id: bytes, trace_hex: str, fraction: float,
                keys: frozenset[str], resource: Mapping[str, AttrValue],
                service_name: str | None) -> LightSpan | None:
    """The span read lightly, or None when the full decoder must decide (odd ids)."""
    span_id = span.span_id
    parent = span.parent_span_id
    if (len(trace_id) != 16 or trace_id == _ZERO_TRACE or len(span_id) != 8 or span_id == _ZERO_SPAN
            or (parent and len(parent) != 8)):
        return None
    attrs: dict[str, AttrValue] = {}
    content: dict[str, int] | None = None
    # The hot loop: one set lookup per attribute; a value is read only for latency keys (their
    # common scalar kinds inline: a call per attribute costs as much as the read itself); of a
    # content key only where it is.
    doc_prefixes, doc_suffixes = DOCUMENT_PREFIXES, DOCUMENT_LATENCY_SUFFIXES
    content_keys, content_prefixes = CONTENT_KEYS, CONTENT_PREFIXES
    for position, pair in enumerate(span.attributes):
        key = pair.key
        if key in keys:
            pass
        elif key.startswith(doc_prefixes):
            if not key.endswith(doc_suffixes):  # document text or metadata
                if content is None:
                    content = {}
                content[key] = position
                continue
        elif key in content_keys or key.startswith(content_prefixes):
            if content is None:
                content = {}
            content[key] = position
            continue
        else:
            continue  # not read by the extraction, or read only for judged traces
        value = pair.value
        which = value.WhichOneof("value")
        if which == "string_value":
            attrs[key] = value.string_value  # duplicate keys: last wins, like the full decoder
        elif which == "double_value":
            attrs[key] = value.double_value
        elif which is not None:
            converted = _any_value(value, 0)
            if converted is not None:
                attrs[key] = converted
    retriever_event = False
    if span.events:
        retriever_event = any(event.name == sc.DB_QUERY_RESULT_EVENT for event in span.events)
    return LightSpan(
        span, scope_name, trace_hex, span_id.hex(),
        # an all-zero parent id is "no parent" in some exporters (as in otlp._convert_span)
        parent.hex() if parent and parent != _ZERO_SPAN else None,
        bool(parent) and bool(span.flags & _FLAG_PARENT_IS_REMOTE),
        fraction, attrs, resource, service_name, content or _NO_CONTENT, retriever_event,
    )
