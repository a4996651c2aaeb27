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

What it costs is Python work per attribute, so that is kept small: what to do with a key is worked
out once per distinct key (``_KeyPlans``: one dict lookup per attribute after that); flattened
document ids and scores are filed by document as they are read (``LightSpan.docs``: the
extraction's ``indexed_fields`` split, done once); the resource's attributes are decoded once per
distinct resource; a span's size for the assembler's byte bound is its share of the message's
length, not a ``ByteSize`` per span; with no judging rate at all the trace id is not hashed.

Everything else — id validation, rejected spans and their messages — is ``otlp.py``'s: a span
that is not plainly valid is handed to the full decoder, which rejects it as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from .. import semconv as sc
from ..sampling import trace_fraction
from ..types import AttrValue, SpanRecord
from .extract import (
    CONTENT_KEYS,
    CONTENT_PREFIXES,
    DOCUMENT_LATENCY_SUFFIXES,
    DOCUMENT_PREFIXES,
    key_role,
)
from .extract._view import declared_role_of_dict
from .otlp import (
    _FLAG_PARENT_IS_REMOTE,
    _STATUS_NAMES,
    _any_value,
    _attributes,
    _convert_span,
    file_full_span,
)

__all__ = ["LatencyOnly", "LightBatch", "LightSpan", "convert_request_light", "file_content", "file_value"]

_ZERO_TRACE: Final = bytes(16)
_ZERO_SPAN: Final = bytes(8)
_SPAN_OVERHEAD: Final = 300  # as the assembler's estimate for a decoded span
_NO_CONTENT: dict[str, int] = {}  # shared, never written: dicts, so compiled readers index them natively
_NO_DOCS: dict[str, dict[int, dict[str, AttrValue]]] = {}

# What the decoder does with an attribute key (``_KeyPlans``): skip it, read its value (into the
# span's attributes, its documents or both), or keep where it is (content); a flattened document
# key also says where it goes (prefix, index, field).
_SKIP: Final = 0
_VALUE: Final = 1
_CONTENT: Final = 2
_DOC: Final = 3
_BOTH: Final = 4
DocRef = tuple[str, int, str]
KeyPlan = tuple[int, DocRef | None]
_MAX_PLANS = 4096  # keys are the sender's: a bounded memo, then classified each time ...
_MAX_PLAN_KEY = 256  # ... and only short keys are kept (a hostile sender's 1 MB keys are not)
_FIELD_PREFIX = "document."  # the fields of a flattened document: document.id, document.score, ...


class _KeyPlans:
    """Each attribute key's ``KeyPlan``, worked out once: the same few hundred keys come in every
    span, and one dict lookup costs less than the prefix and suffix tests it replaces."""

    __slots__ = ("_keys", "_plans", "_raw")

    def __init__(self, keys: frozenset[str]) -> None:
        self._keys = keys
        self._plans: dict[str, KeyPlan] = {}
        self._raw: dict[bytes, tuple[str, KeyPlan]] = {}  # by the key's UTF-8 bytes (otlp_scan)

    def get_raw(self, raw: bytes) -> tuple[str, KeyPlan]:
        """The key (decoded) and its plan, from the key's bytes on the wire."""
        found = self._raw.get(raw)
        if found is None:
            key = raw.decode("utf-8")
            found = key, self.get(key)
            if len(self._raw) < _MAX_PLANS and len(raw) <= _MAX_PLAN_KEY:
                self._raw[raw] = found
        return found

    def get(self, key: str) -> KeyPlan:
        plan = self._plans.get(key)
        if plan is None:
            plan = self._classify(key)
            if len(self._plans) < _MAX_PLANS and len(key) <= _MAX_PLAN_KEY:
                self._plans[key] = plan
        return plan

    def _classify(self, key: str) -> KeyPlan:
        doc = _doc_ref(key)
        if key in self._keys:
            return (_VALUE, None) if doc is None else (_BOTH, doc)
        if key.startswith(DOCUMENT_PREFIXES):
            if not key.endswith(DOCUMENT_LATENCY_SUFFIXES):
                return _CONTENT, doc  # document text or metadata
            # an id or score; one no reader indexes stays an attribute (the role fallback sees it)
            return (_VALUE, None) if doc is None else (_DOC, doc)
        if key in CONTENT_KEYS or key.startswith(CONTENT_PREFIXES):
            return _CONTENT, None
        return _SKIP, None  # not read by the extraction, or read only for judged traces


def _doc_ref(key: str) -> DocRef | None:
    """``extract._values.indexed_fields``' reading of a flattened document key: its prefix, index
    and field, or None when that reader would skip it (only ASCII digits make an index)."""
    for prefix in DOCUMENT_PREFIXES:
        if key.startswith(prefix):
            index, dot, name = key[len(prefix):].partition(".")
            if dot and index.isascii() and index.isdigit() and name.startswith(_FIELD_PREFIX):
                # (int() refuses an index of thousands of digits: the ValueError sends the span to
                # the full decoder, whose extraction fails on it the same way)
                return prefix, int(index), name
            return None
    return None



@dataclass(frozen=True, slots=True)
class LatencyOnly:
    """When a span may be read lightly: its trace is outside ``bound`` (``ragmon.sampling``: the
    highest judging rate any pipeline can get), and which attributes to read (``latency_keys``)."""

    bound: float
    keys: frozenset[str]
    plans: _KeyPlans = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "plans", _KeyPlans(self.keys))

    def light(self, fraction: float) -> bool:
        """Not inside ``bound`` (``in_sample`` on the trace's fraction)."""
        return self.bound <= 0.0 or (self.bound < 1.0 and fraction >= self.bound)

    def of_trace(self, trace_id: bytes) -> tuple[float, bool]:
        """A trace's sampling fraction and whether its spans may be read lightly; with no judging
        rate every trace is light and its id is not even hashed (fraction -1.0, see LightSpan)."""
        if self.bound <= 0.0:
            return -1.0, True
        fraction = trace_fraction(trace_id)
        return fraction, self.light(fraction)


#: prefix -> document index -> field -> value (ids, scores) or, for content, the key holding it
DocFields = dict[str, dict[int, dict[str, AttrValue]]]
#: a span's name, start and end (ns), status code and dropped attribute count
SpanFields = tuple[str, int, int, int, int]
#: where a span is: its request and its resource_spans, scope_spans and spans indexes
SpanAt = tuple[ExportTraceServiceRequest, int, int, int]


class LightSpan:
    """A span read for latency only: what ``SpanRecord`` has, minus all attributes but the
    latency keys (``attributes``; document ids and scores apart, in ``docs``), plus the span's
    role, its trace's sampling fraction (``trace_fraction``; -1.0 when no rate can judge the trace: not
    computed then) and its
    protobuf span."""

    __slots__ = ("_bytes", "_locate", "_proto", "_record", "_scope", "attributes", "content", "doc_content", "docs",
                 "dropped_attributes_count", "end_time_ns", "fraction", "name", "parent_is_remote",
                 "parent_span_id", "resource", "retriever_event", "role", "service_name", "size", "span_id",
                 "start_time_ns", "status_code", "trace_id")

    events = ()  # only whether one is a retriever's result is kept (retriever_event)

    def __init__(self, proto: Span | None, scope: str, trace_id: str, span_id: str, parent_span_id: str | None,
                 parent_is_remote: bool, fraction: float, attributes: dict[str, AttrValue],
                 resource: Mapping[str, AttrValue], service_name: str | None,
                 content: dict[str, int] = _NO_CONTENT, retriever_event: bool = False,
                 docs: DocFields = _NO_DOCS, doc_content: DocFields = _NO_DOCS, size: int | None = None,
                 fields: SpanFields | None = None, locate: SpanAt | None = None,
                 span_bytes: tuple[bytes, int, int] | None = None) -> None:
        # the protobuf span, or where it is in its request (otlp_scan: found when first needed)
        self._proto = proto
        self._locate = locate
        self._bytes = span_bytes  # otlp_scan: the message and where the span is in it (see value())
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
        if fields is None:
            assert proto is not None
            fields = (proto.name, proto.start_time_unix_nano, proto.end_time_unix_nano, proto.status.code,
                      proto.dropped_attributes_count)
        self.name: str = fields[0]
        self.start_time_ns: int = fields[1]
        self.end_time_ns: int = fields[2]
        self.status_code = _STATUS_NAMES.get(fields[3], "UNSET")
        self.dropped_attributes_count: int = fields[4]
        self.content = content  # content key -> position of its (last) occurrence in proto.attributes
        self.retriever_event = retriever_event
        self.docs = docs  # flattened document ids and scores, as extract's indexed_fields reads them
        self.doc_content = doc_content  # ... and which content key holds each document's text or metadata
        role = declared_role_of_dict(attributes, retriever_event) if attributes or retriever_event else None
        if role is None and (content or attributes or docs):
            role = _key_role(self.proto)
        self.role = role or None
        # what this span holds: its share of the protobuf message (the assembler bounds buffered bytes)
        self.size = _SPAN_OVERHEAD + len(self.name) + (self.proto.ByteSize() if size is None else size)

    @property
    def proto(self) -> Span:
        """The protobuf span (looked up in its request the first time, when ``locate`` was given)."""
        proto = self._proto
        if proto is None:
            assert self._locate is not None
            request, i, j, k = self._locate
            proto = self._proto = request.resource_spans[i].scope_spans[j].spans[k]
        return proto

    @property
    def duration_s(self) -> float:
        return max(0, self.end_time_ns - self.start_time_ns) / 1e9

    def to_record(self) -> SpanRecord:
        """The full ``SpanRecord``, exactly as ``otlp.py`` decodes it (made once)."""
        if self._record is None:
            self._record = _convert_span(self.proto, self.resource, self._scope)
        return self._record

    def value(self, key: str) -> AttrValue:
        """The value of a content key as the full decoder reads it; None when absent."""
        position = self.content.get(key)
        if position is None:
            return None
        if self._bytes is not None:  # read from the span's bytes: no protobuf objects made
            from .otlp_scan import attribute_value  # (otlp_scan imports this module)

            raw, start, end = self._bytes
            value = attribute_value(raw, start, end, position)
            if value is not None:
                return value
        pairs = self.proto.attributes
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


@dataclass(slots=True, init=False)  # init=False, not frozen: a compiled __init__ (see LatencyTrace)
class LightBatch:
    """``otlp.DecodedBatch`` with ``LightSpan``s among its spans (an ``otlp.SpanBatch``)."""

    spans: list[SpanRecord | LightSpan]
    rejected_spans: int
    errors: list[str]

    def __init__(self, spans: list[SpanRecord | LightSpan], rejected_spans: int = 0,
                 errors: list[str] | None = None) -> None:
        self.spans = spans
        self.rejected_spans = rejected_spans
        self.errors = [] if errors is None else errors


_MAX_RESOURCES = 256
_MAX_RESOURCE_BYTES = 4096  # a bigger resource is decoded each time, not kept


class _Resources:
    """Resource attributes by their serialized bytes: every message of a service repeats the same
    resource, and one ``SerializeToString`` costs less than decoding its attributes again. The
    dicts are shared read-only, as spans of one message already share theirs."""

    def __init__(self) -> None:
        self._seen: dict[bytes, tuple[Mapping[str, AttrValue], str | None]] = {}

    def get(self, resource: Resource, raw: bytes | None = None) -> tuple[Mapping[str, AttrValue], str | None]:
        """``resource``'s attributes and service name; ``raw``: its bytes as they came (otlp_scan),
        a key as good as the serialized ones (bytes that parse to the same resource)."""
        if raw is None:
            raw = resource.SerializeToString()
        found = self._seen.get(raw)
        if found is None:
            attributes = _attributes(resource.attributes)
            service = attributes.get("service.name")
            found = attributes, (str(service) if service is not None else None)
            if len(raw) <= _MAX_RESOURCE_BYTES:
                if len(self._seen) >= _MAX_RESOURCES:
                    self._seen.clear()  # many resources: start over rather than grow (no LRU cost per hit)
                self._seen[raw] = found
        return found


    def get_scanned(self, raw: bytes, request: ExportTraceServiceRequest, index: int,
                    ) -> tuple[Mapping[str, AttrValue], str | None]:
        """``get`` of the resource of ``request.resource_spans[index]``, whose bytes are ``raw``:
        the protobuf object is looked at only when those bytes are new (otlp_scan)."""
        found = self._seen.get(raw)
        return found if found is not None else self.get(request.resource_spans[index].resource, raw)


_RESOURCES = _Resources()


def convert_request_light(request: ExportTraceServiceRequest, latency_only: LatencyOnly,
                          size: int | None = None) -> LightBatch:
    """``otlp._convert_request`` with ``LightSpan``s for spans of traces outside the judging bound.
    ``size``: the serialized request's length, shared out as each light span's size (else each
    span's own serialized size is measured)."""
    spans: list[SpanRecord | LightSpan] = []
    errors: list[str] = []
    rejected = 0
    plans = latency_only.plans
    share: int | None = None
    if size is not None:
        count = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
        share = size // max(1, count)
    last_trace: bytes | None = None
    trace_hex = ""
    fraction = -1.0  # (not computed: see LightSpan)
    light = False
    for resource_spans in request.resource_spans:
        resource, service_name = _RESOURCES.get(resource_spans.resource)
        for scope_spans in resource_spans.scope_spans:
            scope_name = scope_spans.scope.name
            for span in scope_spans.spans:
                trace_id = span.trace_id
                if trace_id != last_trace:  # spans of one trace mostly come together: decide once
                    last_trace = trace_id
                    trace_hex = trace_id.hex()
                    fraction, light = latency_only.of_trace(trace_id)
                if light:
                    try:
                        record = _light_span(span, scope_name, trace_id, trace_hex, fraction, plans,
                                             resource, service_name, share)
                    except (ValueError, TypeError, RecursionError):  # the full decoder decides
                        record = None
                    if record is not None:
                        spans.append(record)
                        continue
                rejected += file_full_span(span, resource, scope_name, spans.append, errors)
    return LightBatch(spans=spans, rejected_spans=rejected, errors=errors)



DocValues = dict[str, dict[int, dict[str, AttrValue]]]


def file_content(content: dict[str, int] | None, doc_content: DocValues | None, key: str, position: int,
                 doc: DocRef | None) -> tuple[dict[str, int], DocValues | None]:
    """A content key: only where it is (its attribute's position), and by document when it is one
    document's text. Both light readers (``_light_span`` here, ``otlp_scan``) file through here;
    the maps are made on first use (most spans have none)."""
    if content is None:
        content = {}
    content[key] = position
    if doc is not None:
        if doc_content is None:
            doc_content = {}
        doc_content.setdefault(doc[0], {}).setdefault(doc[1], {})[doc[2]] = key
    return content, doc_content


def file_value(attrs: dict[str, AttrValue], docs: DocValues | None, kind: int, key: str, doc: DocRef | None,
               value: AttrValue) -> DocValues | None:
    """A latency key's value into ``attrs`` (duplicate keys: last wins, like the full decoder), and
    a document's id or score by document, as extract's indexed_fields splits them (a _DOC or _BOTH
    plan has its DocRef); returns ``docs``, made on first use."""
    if kind != _DOC:
        attrs[key] = value
        if kind == _VALUE:
            return docs
    prefix, index, name = doc  # type: ignore[misc]  # a _DOC or _BOTH plan has its DocRef
    if docs is None:
        docs = {}
    by_index = docs.get(prefix)
    if by_index is None:
        by_index = docs[prefix] = {}
    fields = by_index.get(index)
    if fields is None:
        by_index[index] = {name: value}
    else:
        fields[name] = value
    return docs

def _light_span(span: Span, scope_name: str, trace_id: bytes, trace_hex: str, fraction: float,
                plans: _KeyPlans, resource: Mapping[str, AttrValue], service_name: str | None,
                size: int | None) -> LightSpan | None:
    """The span read lightly, or None when the full decoder must decide (odd ids)."""
    span_id = span.span_id
    parent = span.parent_span_id
    if (len(trace_id) != 16 or trace_id == _ZERO_TRACE or len(span_id) != 8 or span_id == _ZERO_SPAN
            or (parent and len(parent) != 8)):
        return None
    attrs: dict[str, AttrValue] = {}
    content: dict[str, int] | None = None
    docs: dict[str, dict[int, dict[str, AttrValue]]] | None = None
    doc_content: dict[str, dict[int, dict[str, AttrValue]]] | None = None
    # The hot loop: one memo lookup per attribute (its KeyPlan); a value is read only for latency
    # keys (their common scalar kinds inline: a call per attribute costs as much as the read
    # itself); of a content key only where it is.
    memo = plans._plans
    for position, pair in enumerate(span.attributes):
        key = pair.key
        plan = memo.get(key)
        if plan is None:
            plan = plans.get(key)
        kind, doc = plan
        if kind == _SKIP:
            continue
        if kind == _CONTENT:
            content, doc_content = file_content(content, doc_content, key, position, doc)
            continue
        value = pair.value
        # a non-empty string is its oneof's set member: no WhichOneof then
        converted: AttrValue = value.string_value
        if not converted:
            which = value.WhichOneof("value")
            if which is None:
                continue
            converted = value.double_value if which == "double_value" else _any_value(value, 0)
            if converted is None:
                continue
        docs = file_value(attrs, docs, kind, key, doc, converted)
    retriever_event = False
    if span.events:
        retriever_event = any(event.name == sc.DB_QUERY_RESULT_EVENT for event in span.events)
    return LightSpan(
        span, scope_name, trace_hex, span_id.hex(),
        # an all-zero parent id is "no parent" in some exporters (as in otlp._convert_span)
        parent.hex() if parent and parent != _ZERO_SPAN else None,
        bool(parent) and bool(span.flags & _FLAG_PARENT_IS_REMOTE),
        fraction, attrs, resource, service_name, content or _NO_CONTENT, retriever_event,
        docs or _NO_DOCS, doc_content or _NO_DOCS, size,
    )
