"""The span view: what a reader makes of a span of a trace the agent will not judge (``LightSpan``),
and which of its attributes it reads (``LatencyOnly``: the sampling bound and the key plans).

Sampling is a hash of the trace id (``ragmon.sampling``), so it is decided before anything else is
read. A span whose trace lies outside every judging rate (``LatencyOnly.bound``: the highest rate
any pipeline can get) is read as a ``LightSpan``: ids, timings, status and only the attributes that
decide the latency-only fields (``LATENCY_KEYS``, document ids and scores, filed by document as
``indexed_fields`` splits them). Of a *content* key (question, answer, messages, document text or
metadata) only its position among the span's attributes is kept, so that the few questions whose
answer depends on content can read that one value later (``value``).

A ``LightSpan`` knows where it came from (``SpanOrigin``, one per message: the protobuf reader's):
the full ``SpanRecord`` of a trace that a priority rule picks for the judge, and a content value,
are read from there (``to_record``, ``value``). This module reads no wire format itself, so the
latency-only view (``_latency``) and the readers (``ingest/otlp_proto.py``) both import it and
nothing imports back.

The contract that keeps both paths equal is in ``_latency``'s module doc; the key sets it rests on
are here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

from ... import semconv as sc
from ...sampling import fraction_in_sample, trace_fraction
from ...types import AttrValue, SpanRecord
from ._settings import DEFAULT_SETTINGS, ExtractSettings

__all__ = [
    "BOTH", "CONTENT", "CONTENT_KEYS", "CONTENT_PREFIXES", "DOC", "DOCUMENT_LATENCY_SUFFIXES", "DOCUMENT_PREFIXES",
    "EMPTY_CONTENT", "EMPTY_DOCS", "LATENCY_KEYS", "SKIP", "SPAN_OVERHEAD", "VALUE", "DocFields", "DocRef",
    "KeyPlan", "KeyPlans", "LatencyOnly", "LightSpan", "SpanOrigin", "file_content", "file_value", "latency_keys",
]

#: Attributes whose values decide the latency-only fields (the configured pipeline attribute
#: comes on top, see ``latency_keys``).
LATENCY_KEYS: frozenset[str] = frozenset({
    sc.RAGMON_STAGE, sc.SPAN_KIND, sc.GEN_AI_OPERATION_NAME, sc.LLM_REQUEST_TYPE,  # roles
    sc.TRACELOOP_ENTITY_NAME, sc.TRACELOOP_SPAN_KIND,
    sc.RAGMON_PIPELINE, sc.GEN_AI_WORKFLOW_NAME, sc.TRACELOOP_WORKFLOW_NAME,  # pipeline name
    sc.LLM_MODEL_NAME, sc.GEN_AI_RESPONSE_MODEL, sc.GEN_AI_REQUEST_MODEL,  # release info
    sc.LLM_PROMPT_TEMPLATE_VERSION,
    sc.RAGMON_FEEDBACK,  # counted per span, a priority rule, and a feedback span names no request
    sc.RAGMON_RETRIEVER_SPANS, sc.RAGMON_GENERATOR_SPANS,  # when a trace written in parts is whole
})
#: Flattened document attributes: only ``{prefix}.{i}.document.id`` and ``.score`` are latency
#: keys; any other field under these prefixes (text, metadata) is content.
DOCUMENT_PREFIXES: tuple[str, ...] = (sc.RETRIEVAL_DOCUMENTS_PREFIX + ".", sc.RERANKER_OUTPUT_DOCUMENTS_PREFIX + ".")
DOCUMENT_LATENCY_SUFFIXES: tuple[str, ...] = ("." + sc.DOCUMENT_ID, "." + sc.DOCUMENT_SCORE)
#: Attributes whose text can change the latency-only fields: the reader keeps where they are.
CONTENT_KEYS: frozenset[str] = frozenset({
    sc.OUTPUT_VALUE, sc.TRACELOOP_ENTITY_OUTPUT,  # generator output, documents as JSON
    sc.GEN_AI_RETRIEVAL_DOCUMENTS, sc.GEN_AI_OUTPUT_MESSAGES,
    sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_SYSTEM_INSTRUCTIONS,  # contexts found in messages
})
CONTENT_PREFIXES: tuple[str, ...] = (
    sc.LLM_INPUT_MESSAGES_PREFIX + ".", sc.LLM_OUTPUT_MESSAGES_PREFIX + ".",
    sc.GEN_AI_PROMPT_PREFIX + ".", sc.GEN_AI_COMPLETION_PREFIX + ".",
)


def latency_keys(settings: ExtractSettings | None = None) -> frozenset[str]:
    """``LATENCY_KEYS`` plus the configured pipeline attribute."""
    attribute = (settings or DEFAULT_SETTINGS).pipeline_attribute
    return LATENCY_KEYS | {attribute} if attribute else LATENCY_KEYS


# What a reader does with an attribute key (``KeyPlans``): skip it, read its value (into the span's
# attributes, its documents or both), or keep where it is (content); a flattened document key also
# says where it goes (prefix, index, field).
SKIP: Final = 0
VALUE: Final = 1
CONTENT: Final = 2
DOC: Final = 3
BOTH: Final = 4
DocRef = tuple[str, int, str]
KeyPlan = tuple[int, DocRef | None]
#: prefix -> document index -> field -> value (ids, scores) or, for content, the key holding it
DocFields = dict[str, dict[int, dict[str, AttrValue]]]
EMPTY_CONTENT: dict[str, int] = {}  # shared, never written: dicts, so compiled readers index them natively
EMPTY_DOCS: DocFields = {}
SPAN_OVERHEAD: Final = 300  # as the assembler's estimate for a decoded span
_MAX_PLANS = 4096  # keys are the sender's: a bounded memo, then classified each time ...
_MAX_PLAN_KEY = 256  # ... and only short keys are kept (a hostile sender's 1 MB keys are not)
_FIELD_PREFIX = "document."  # the fields of a flattened document: document.id, document.score, ...


class KeyPlans:
    """Each attribute key's ``KeyPlan``, worked out once: the same few hundred keys come in every
    span, and one dict lookup costs less than the prefix and suffix tests it replaces. ``by_raw``
    holds them by the key's UTF-8 bytes (a reader of bytes looks there first, then ``get_raw``)."""

    __slots__ = ("_keys", "_plans", "by_raw")

    def __init__(self, keys: frozenset[str]) -> None:
        self._keys = keys
        self._plans: dict[str, KeyPlan] = {}
        self.by_raw: dict[bytes, tuple[str, KeyPlan]] = {}

    def get_raw(self, raw: bytes) -> tuple[str, KeyPlan]:
        """The key (decoded) and its plan, from the key's bytes on the wire."""
        found = self.by_raw.get(raw)
        if found is None:
            key = raw.decode("utf-8")
            found = key, self.get(key)
            if len(self.by_raw) < _MAX_PLANS and len(raw) <= _MAX_PLAN_KEY:
                self.by_raw[raw] = found
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
            return (VALUE, None) if doc is None else (BOTH, doc)
        if key.startswith(DOCUMENT_PREFIXES):
            if not key.endswith(DOCUMENT_LATENCY_SUFFIXES):
                return CONTENT, doc  # document text or metadata
            # an id or score; one no reader indexes stays an attribute (the role fallback sees it)
            return (VALUE, None) if doc is None else (DOC, doc)
        if key in CONTENT_KEYS or key.startswith(CONTENT_PREFIXES):
            return CONTENT, None
        return SKIP, None  # not read by the extraction, or read only for judged traces


def _doc_ref(key: str) -> DocRef | None:
    """``_values.indexed_fields``' reading of a flattened document key: its prefix, index and
    field, or None when that reader would skip it (only ASCII digits make an index)."""
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
    """When a span may be read lightly: its trace is outside ``bound`` (the highest judging rate
    any pipeline can get), and which attributes to read (``keys``, planned in ``plans``). The
    agent offers one to its sources (``SpanSink.latency_only``)."""

    bound: float
    keys: frozenset[str]
    plans: KeyPlans = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "plans", KeyPlans(self.keys))

    def of_trace(self, trace_id: bytes) -> tuple[float, bool]:
        """A trace's sampling fraction and whether its spans may be read lightly (outside ``bound``:
        ``sampling.fraction_in_sample``); with no judging rate every trace is light and its id is not
        even hashed (fraction -1.0, see LightSpan)."""
        if self.bound <= 0.0:
            return -1.0, True
        fraction = trace_fraction(trace_id)
        return fraction, not fraction_in_sample(fraction, self.bound)


class SpanOrigin(Protocol):
    """Where light spans came from (one per message, the reader's): what is read of them later."""

    def record(self, span: LightSpan) -> SpanRecord:
        """The span decoded in full, exactly as the full reader decodes it."""

    def value(self, span: LightSpan, key: str, position: int) -> AttrValue:
        """The value of content key ``key`` (its last occurrence is attribute number ``position``),
        as the full reader reads it; None when absent."""


class LightSpan:
    """A span read for latency only: what ``SpanRecord`` has, minus all attributes but the latency
    keys (``attributes``; document ids and scores apart, in ``docs``), plus the span's role, its
    trace's sampling fraction (-1.0 when no rate can judge the trace: not computed then), where its
    content keys are, its share of the message's bytes (``size``) and where it came from."""

    __slots__ = ("_record", "at", "attributes", "content", "doc_content", "docs", "dropped_attributes_count",
                 "end_time_ns", "fraction", "name", "origin", "parent_is_remote", "parent_span_id", "resource",
                 "retriever_event", "role", "scope_name", "service_name", "size", "span_id", "start_time_ns",
                 "status_code", "trace_id")

    events = ()  # only whether one is a retriever's result is kept (retriever_event)

    def __init__(self, origin: SpanOrigin, at: tuple[int, int, int, int, int], scope_name: str, trace_id: str,
                 span_id: str, parent_span_id: str | None, parent_is_remote: bool, fraction: float, name: str,
                 start_time_ns: int, end_time_ns: int, status_code: str, dropped_attributes_count: int,
                 attributes: dict[str, AttrValue], resource: Mapping[str, AttrValue], service_name: str | None,
                 content: dict[str, int], retriever_event: bool, docs: DocFields, doc_content: DocFields,
                 role: str | None, size: int) -> None:
        self.origin = origin
        self.at = at  # the reader's: where the span is in its message
        self.scope_name = scope_name
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_span_id = parent_span_id
        self.parent_is_remote = parent_is_remote
        self.fraction = fraction
        self.name = name
        self.start_time_ns = start_time_ns
        self.end_time_ns = end_time_ns
        self.status_code = status_code
        self.dropped_attributes_count = dropped_attributes_count
        self.attributes = attributes
        self.resource = resource
        self.service_name = service_name
        self.content = content  # content key -> position of its (last) occurrence among the attributes
        self.retriever_event = retriever_event
        self.docs = docs  # flattened document ids and scores, as extract's indexed_fields reads them
        self.doc_content = doc_content  # ... and which content key holds each document's text or metadata
        self.role = role
        self.size = size  # what this span holds (the assembler bounds buffered bytes)
        self._record: SpanRecord | None = None

    @property
    def duration_s(self) -> float:
        return max(0, self.end_time_ns - self.start_time_ns) / 1e9

    def to_record(self) -> SpanRecord:
        """The full ``SpanRecord``, exactly as the full reader decodes it (made once, by the origin)."""
        record = self._record
        if record is None:
            record = self._record = self.origin.record(self)
        return record

    def value(self, key: str) -> AttrValue:
        """The value of a content key as the full reader reads it; None when absent."""
        position = self.content.get(key)
        if position is None:
            return None
        return self.origin.value(self, key, position)


def file_content(content: dict[str, int] | None, doc_content: DocFields | None, key: str, position: int,
                 doc: DocRef | None) -> tuple[dict[str, int], DocFields | None]:
    """A content key: only where it is (its attribute's position), and by document when it is one
    document's text. The maps are made on first use (most spans have none)."""
    if content is None:
        content = {}
    content[key] = position
    if doc is not None:
        if doc_content is None:
            doc_content = {}
        doc_content.setdefault(doc[0], {}).setdefault(doc[1], {})[doc[2]] = key
    return content, doc_content


def file_value(attrs: dict[str, AttrValue], docs: DocFields | None, kind: int, key: str, doc: DocRef | None,
               value: AttrValue) -> DocFields | None:
    """A latency key's value into ``attrs`` (duplicate keys: last wins, like the full reader), and a
    document's id or score by document, as extract's indexed_fields splits them (a DOC or BOTH plan
    has its DocRef); returns ``docs``, made on first use."""
    if kind != DOC:
        attrs[key] = value
        if kind == VALUE:
            return docs
    prefix, index, name = doc  # type: ignore[misc]  # a DOC or BOTH plan has its DocRef
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
