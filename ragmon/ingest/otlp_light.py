"""The latency-only decode: OTLP protobuf spans of traces the agent will not judge, read lightly.

Sampling is a hash of the trace id, so it is decided before anything else is decoded. A span
whose trace lies outside every judging rate (``LatencyOnly.bound``: the highest rate any pipeline
can get) becomes a ``LightSpan``: ids, timings, status and only the attributes that decide the
latency-only fields (``extract.latency_keys``, document ids and scores). Other attributes are
looked at by key and skipped: no value object, no text copy. A span carrying a content key or an
event (see ``extract/_latency.py``) is decoded in full instead, exactly as ``otlp.py`` does, and
its trace then takes the full extraction. A ``LightSpan`` keeps a reference to its protobuf span,
so a trace that a priority rule picks for the judge is rebuilt in full (``to_record``).

Everything else — id validation, rejected spans and their messages — is ``otlp.py``'s: a span
that is not plainly valid is handed to the full decoder, which rejects it as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ..sampling import trace_fraction
from ..types import AttrValue, SpanRecord
from .extract import (
    CONTENT_KEYS,
    CONTENT_PREFIXES,
    DOCUMENT_LATENCY_SUFFIXES,
    DOCUMENT_PREFIXES,
    role_of,
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

    __slots__ = ("_proto", "_scope", "attributes", "dropped_attributes_count", "end_time_ns", "fraction",
                 "name", "parent_is_remote", "parent_span_id", "resource", "role", "service_name",
                 "size", "span_id", "start_time_ns", "status_code", "trace_id")

    events = ()  # a span with events is decoded in full

    def __init__(self, proto: Span, scope: str, trace_id: str, span_id: str, parent_span_id: str | None,
                 parent_is_remote: bool, fraction: float, attributes: dict[str, AttrValue],
                 resource: Mapping[str, AttrValue], service_name: str | None) -> None:
        self._proto = proto
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
        self.role = role_of(attributes)
        # what this span holds: its protobuf message (the assembler bounds buffered bytes)
        self.size = _SPAN_OVERHEAD + len(self.name) + proto.ByteSize()

    @property
    def duration_s(self) -> float:
        return max(0, self.end_time_ns - self.start_time_ns) / 1e9

    def to_record(self) -> SpanRecord:
        """The full ``SpanRecord``, exactly as ``otlp.py`` decodes it."""
        return _convert_span(self._proto, self.resource, self._scope)


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
    """The span read lightly, or None when it must be decoded in full (odd ids, events, content)."""
    span_id = span.span_id
    parent = span.parent_span_id
    if (len(trace_id) != 16 or trace_id == _ZERO_TRACE or len(span_id) != 8 or span_id == _ZERO_SPAN
            or (parent and len(parent) != 8) or span.events):
        return None
    attrs: dict[str, AttrValue] = {}
    # The hot loop: one set lookup per attribute; a value is read only for latency keys (their
    # common scalar kinds inline: a call per attribute costs as much as the read itself).
    doc_prefixes, doc_suffixes = DOCUMENT_PREFIXES, DOCUMENT_LATENCY_SUFFIXES
    content_keys, content_prefixes = CONTENT_KEYS, CONTENT_PREFIXES
    for pair in span.attributes:
        key = pair.key
        if key in keys:
            pass
        elif key.startswith(doc_prefixes):
            if not key.endswith(doc_suffixes):
                return None  # document text or metadata
        elif key in content_keys or key.startswith(content_prefixes):
            return None
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
    return LightSpan(
        span, scope_name, trace_hex, span_id.hex(),
        # an all-zero parent id is "no parent" in some exporters (as in otlp._convert_span)
        parent.hex() if parent and parent != _ZERO_SPAN else None,
        bool(parent) and bool(span.flags & _FLAG_PARENT_IS_REMOTE),
        fraction, attrs, resource, service_name,
    )
