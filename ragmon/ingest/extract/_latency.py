"""The latency-only view of a trace: what the agent records for a trace it does not judge.

For a trace outside the judging sample the agent needs only a handful of fields: service and
pipeline, whether it is a RAG request, the retrieval / generation / pipeline latencies, the number
of retrieved documents, the model and prompt version (release info) and what the priority rules
read. ``latency_trace`` computes exactly those, with the rules of ``build_rag_trace``, from spans
that carry only the attributes that can decide them (``LATENCY_KEYS`` and the document id / score
keys). The decoder (``ingest/otlp_light.py``) reads nothing else of such a span.

The contract that keeps both paths equal: an attribute the extraction reads is either

* a *latency key* — read by the decoder and used here with the same converters and precedence;
* a *content key* (``CONTENT_KEYS``, ``CONTENT_PREFIXES``, document text or metadata, any span
  event) — it can change the outcome (contexts source, document ids derived from text, which
  generator produced the answer, feedback): a span carrying one is decoded in full and its trace
  takes ``build_rag_trace``;
* or irrelevant to the fields above (session and user ids, tags, error.type, ...): only the
  judge and the trace inspector read those, and a judged trace is always rebuilt in full.

tests/ingest/test_fast_path.py runs the same OTLP bytes through both paths and compares the
agent's metrics and accounting.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ... import semconv as sc
from ...types import AttrValue
from ._settings import DEFAULT_SETTINGS, ExtractSettings
from ._values import indexed_fields, to_float, to_id, to_str
from ._view import ROLE_GENERATOR, ROLE_PIPELINE, ROLE_RERANKER, ROLE_RETRIEVER

#: Attributes whose values decide the latency-only fields (the configured pipeline attribute
#: comes on top, see ``latency_keys``).
LATENCY_KEYS: frozenset[str] = frozenset({
    sc.RAGMON_STAGE, sc.SPAN_KIND, sc.GEN_AI_OPERATION_NAME, sc.LLM_REQUEST_TYPE,  # roles
    sc.TRACELOOP_ENTITY_NAME, sc.TRACELOOP_SPAN_KIND,
    sc.RAGMON_PIPELINE, sc.GEN_AI_WORKFLOW_NAME, sc.TRACELOOP_WORKFLOW_NAME,  # pipeline name
    sc.LLM_MODEL_NAME, sc.GEN_AI_RESPONSE_MODEL, sc.GEN_AI_REQUEST_MODEL,  # release info
    sc.LLM_PROMPT_TEMPLATE_VERSION,
})
#: Flattened document attributes: only ``{prefix}.{i}.document.id`` and ``.score`` are latency
#: keys; any other field under these prefixes (text, metadata) is content.
DOCUMENT_PREFIXES: tuple[str, ...] = (sc.RETRIEVAL_DOCUMENTS_PREFIX + ".", sc.RERANKER_OUTPUT_DOCUMENTS_PREFIX + ".")
DOCUMENT_LATENCY_SUFFIXES: tuple[str, ...] = ("." + sc.DOCUMENT_ID, "." + sc.DOCUMENT_SCORE)
#: Attributes that can change the latency-only fields through their text: decode in full.
CONTENT_KEYS: frozenset[str] = frozenset({
    sc.OUTPUT_VALUE, sc.TRACELOOP_ENTITY_OUTPUT,  # generator output, documents as JSON
    sc.GEN_AI_RETRIEVAL_DOCUMENTS, sc.GEN_AI_OUTPUT_MESSAGES,
    sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_SYSTEM_INSTRUCTIONS,  # contexts found in messages
    sc.RAGMON_FEEDBACK,  # counted per span, and a priority rule
    # the question: only its length matters here (text over max_text_chars is cut and counted
    # as dropped{text_truncated} for every trace), but its length is its text
    sc.INPUT_VALUE, sc.TRACELOOP_ENTITY_INPUT, sc.GEN_AI_RETRIEVAL_QUERY_TEXT, sc.RERANKER_QUERY,
})
CONTENT_PREFIXES: tuple[str, ...] = (
    sc.LLM_INPUT_MESSAGES_PREFIX + ".", sc.LLM_OUTPUT_MESSAGES_PREFIX + ".",
    sc.GEN_AI_PROMPT_PREFIX + ".", sc.GEN_AI_COMPLETION_PREFIX + ".",
)


def latency_keys(settings: ExtractSettings | None = None) -> frozenset[str]:
    """``LATENCY_KEYS`` plus the configured pipeline attribute."""
    attribute = (settings or DEFAULT_SETTINGS).pipeline_attribute
    return LATENCY_KEYS | {attribute} if attribute else LATENCY_KEYS


class LatencySpan(Protocol):
    """What ``latency_trace`` reads of a span (``otlp_light.LightSpan``)."""

    @property
    def span_id(self) -> str: ...
    @property
    def parent_span_id(self) -> str | None: ...
    @property
    def parent_is_remote(self) -> bool: ...
    @property
    def name(self) -> str: ...
    @property
    def start_time_ns(self) -> int: ...
    @property
    def end_time_ns(self) -> int: ...
    @property
    def status_code(self) -> str: ...
    @property
    def attributes(self) -> Mapping[str, AttrValue]: ...  # latency keys only
    @property
    def resource(self) -> Mapping[str, AttrValue]: ...
    @property
    def service_name(self) -> str | None: ...
    @property
    def role(self) -> str | None: ...  # role_of(attributes), computed once by the decoder


@dataclass(frozen=True, slots=True)
class LatencyTrace:
    """The fields of ``build_rag_trace``'s ``RagTrace`` that the agent reads for a trace it does
    not judge, with the same values."""

    trace_id: str
    service: str
    pipeline: str
    complete: bool
    not_rag: bool
    retrieval_latency_s: float | None
    generation_latency_s: float | None
    pipeline_latency_s: float | None
    document_count: int
    top_retrieval_score: float | None
    has_error: bool  # some span ended in error (the priority rule reads only RAG spans: it asks the full path)
    model: str | None
    prompt_version: str | None
    contexts_source: str = sc.CONTEXTS_NONE  # no text was read, so no context either


class _Group:
    __slots__ = ("head", "members")

    def __init__(self, head: LatencySpan) -> None:
        self.head = head
        self.members: list[LatencySpan] = []


def latency_trace(trace_id: str, spans: Sequence[LatencySpan], *, complete: bool,
                  settings: ExtractSettings | None = None) -> LatencyTrace:
    """The latency-only fields of one trace; the same values ``build_rag_trace`` gives for spans
    without content keys (see the module doc). Mirrors ``TraceView`` and ``build_rag_trace``."""
    if not spans:
        raise ValueError("latency_trace needs at least one span")
    settings = settings or DEFAULT_SETTINGS
    ordered = sorted(spans, key=_start_end) if len(spans) > 1 else list(spans)
    by_id = {s.span_id: s for s in ordered}
    root = next((s for s in ordered if s.parent_span_id is None), None)
    if root is None:  # this service's part of a distributed trace: its local root
        root = next((s for s in ordered if s.parent_is_remote), None)

    groups: dict[str, dict[str, _Group]] = {ROLE_RETRIEVER: {}, ROLE_RERANKER: {}, ROLE_GENERATOR: {}}
    declares_pipeline = False
    main: LatencySpan | None = None
    for span in ordered:
        role = span.role
        if role == ROLE_PIPELINE:
            declares_pipeline = True
        elif role is not None:
            head = span
            for ancestor in _ancestors(span, by_id):  # outermost same-role ancestor
                if ancestor.role == role:
                    head = ancestor
            by_head = groups[role]
            group = by_head.get(head.span_id)
            if group is None:
                group = by_head[head.span_id] = _Group(head)
            group.members.append(span)
        attrs = span.attributes
        if main is None and _text(attrs, sc.RAGMON_STAGE) == sc.STAGE_PIPELINE:
            main = span
        if not declares_pipeline and _text(attrs, sc.RAGMON_PIPELINE):
            declares_pipeline = True  # (a feedback span also names it, but feedback is content)
    retrievers = _sorted_groups(groups[ROLE_RETRIEVER])
    rerankers = _sorted_groups(groups[ROLE_RERANKER])
    generators = _sorted_groups(groups[ROLE_GENERATOR])

    documents = _documents(retrievers, rerankers)
    heads = [g.head for g in retrievers + rerankers]
    generator = max(generators, key=lambda g: g.head.end_time_ns).head if generators else None
    main = main or root
    depth = _Depth(by_id)
    model = to_str(_first_attr(ordered, depth, (sc.LLM_MODEL_NAME, sc.GEN_AI_RESPONSE_MODEL,
                                                sc.GEN_AI_REQUEST_MODEL), prefer=generator))
    scores = [score for _, score in documents if score is not None]
    return LatencyTrace(
        trace_id=trace_id,
        service=_service(root or main, ordered),
        pipeline=settings.rename_pipeline(_pipeline_name(ordered, root, depth, settings.pipeline_attribute)),
        complete=complete,
        not_rag=not (retrievers or rerankers or generators or documents or declares_pipeline),
        retrieval_latency_s=_envelope_s(heads) if heads else None,
        generation_latency_s=_duration_s(generator) if generator is not None else None,
        pipeline_latency_s=_duration_s(main) if main is not None else _envelope_s(ordered),
        document_count=len(documents),
        top_retrieval_score=max(scores) if scores else None,
        has_error=any(s.status_code == "ERROR" for s in ordered),
        model=model if model is not None and model.lower() != sc.UNKNOWN_LABEL else None,
        prompt_version=to_str(_first_attr(ordered, depth, (sc.LLM_PROMPT_TEMPLATE_VERSION,))),
    )


def _start_end(span: LatencySpan) -> tuple[int, int]:
    return span.start_time_ns, span.end_time_ns


def _ancestors(span: LatencySpan, by_id: Mapping[str, LatencySpan]) -> list[LatencySpan]:
    out: list[LatencySpan] = []
    seen = {span.span_id}
    parent_id = span.parent_span_id
    while parent_id is not None and parent_id in by_id and parent_id not in seen:
        seen.add(parent_id)  # guards against parent cycles in bad input
        parent = by_id[parent_id]
        out.append(parent)
        parent_id = parent.parent_span_id
    return out


class _Depth:
    """Ancestor counts, computed on demand (most traces never need them)."""

    def __init__(self, by_id: Mapping[str, LatencySpan]) -> None:
        self._by_id = by_id
        self._depth: dict[str, int] = {}

    def key(self, span: LatencySpan) -> tuple[int, int]:
        """``TraceView``'s outermost-first order: (depth, start)."""
        depth = self._depth.get(span.span_id)
        if depth is None:
            depth = self._depth[span.span_id] = len(_ancestors(span, self._by_id))
        return depth, span.start_time_ns


def _sorted_groups(groups: dict[str, _Group]) -> list[_Group]:
    return sorted(groups.values(), key=lambda g: g.head.start_time_ns) if len(groups) > 1 else list(groups.values())


def _documents(retrievers: list[_Group], rerankers: list[_Group]) -> list[tuple[str, float | None]]:
    """``_retrieval_documents`` for spans whose documents carry ids and scores only: the (id,
    score) pairs after ``dedupe_and_rank``."""
    found: list[tuple[str, float | None]] = []
    for group in retrievers:
        found.extend(_best(group, _RETRIEVAL_PREFIX, None))
    for group in rerankers:
        reranked = _best(group, _RERANKER_PREFIX, _RETRIEVAL_PREFIX)
        if reranked:
            found = reranked
    if len(found) < 2:
        return found
    seen: set[str] = set()
    unique: list[tuple[str, float | None]] = []
    for doc in found:
        if doc[0] not in seen:
            seen.add(doc[0])
            unique.append(doc)
    return unique


_RETRIEVAL_PREFIX = sc.RETRIEVAL_DOCUMENTS_PREFIX + "."
_RERANKER_PREFIX = sc.RERANKER_OUTPUT_DOCUMENTS_PREFIX + "."
_FIELD_PREFIX = "document."


def _best(group: _Group, prefix: str, fallback: str | None) -> list[tuple[str, float | None]]:
    """``_best_documents``: most documents, then most scores (no text here, so no other key differs)."""
    best: list[tuple[str, float | None]] = []
    best_key = (-1, -1)
    for span in group.members:
        docs = _flattened(span.attributes, prefix)
        if not docs and fallback is not None:
            docs = _flattened(span.attributes, fallback)
        if not docs:
            continue
        key = (len(docs), sum(score is not None for _, score in docs))
        if key > best_key:
            best, best_key = docs, key
    return best


def _flattened(attrs: Mapping[str, AttrValue], prefix: str) -> list[tuple[str, float | None]]:
    """``_documents._flattened_documents`` without text or metadata: a document is its id (else
    skipped: an id from metadata or from the text needs those) and its score, in index order."""
    fields = indexed_fields(attrs, prefix, _FIELD_PREFIX)
    docs: list[tuple[str, float | None]] = []
    for index in sorted(fields):
        f = fields[index]
        doc_id = to_id(f.get(sc.DOCUMENT_ID))
        if doc_id is not None:
            docs.append((doc_id, to_float(f.get(sc.DOCUMENT_SCORE))))
    return docs


def _first_attr(ordered: Sequence[LatencySpan], depth: _Depth, keys: tuple[str, ...],
                prefer: LatencySpan | None = None) -> AttrValue:
    """``TraceView.first_attr``: the preferred span first, then outermost first."""
    if prefer is not None:
        value = _first_value(prefer, keys)
        if value is not None:
            return value
    candidates = [s for s in ordered if _first_value(s, keys) is not None]
    if not candidates:
        return None
    return _first_value(min(candidates, key=depth.key), keys)


def _first_value(span: LatencySpan, keys: tuple[str, ...]) -> AttrValue:
    attrs = span.attributes
    for key in keys:
        value = attrs.get(key)
        if value not in (None, "", [], {}):
            return value
    return None


def _service(first: LatencySpan | None, ordered: Sequence[LatencySpan]) -> str:
    if first is not None and first.service_name:
        return first.service_name
    names = Counter(s.service_name for s in ordered if s.service_name)
    return names.most_common(1)[0][0] if names else sc.UNKNOWN_LABEL


def _pipeline_name(ordered: Sequence[LatencySpan], root: LatencySpan | None, depth: _Depth,
                   attribute: str | None) -> str:
    """``TraceView.pipeline_name``: the first key any span names it by, outermost span first."""
    keys = [sc.RAGMON_PIPELINE, sc.GEN_AI_WORKFLOW_NAME]
    if attribute:
        keys.append(attribute)
    keys.append(sc.TRACELOOP_WORKFLOW_NAME)
    for key in keys:
        named = [s for s in ordered if _text(s.attributes, key)]
        if named:
            return _text(min(named, key=depth.key).attributes, key) or sc.UNKNOWN_LABEL
        if key == attribute:
            named = [s for s in ordered if to_str(s.resource.get(key))]
            if named:
                return to_str(min(named, key=depth.key).resource.get(key)) or sc.UNKNOWN_LABEL
    top = root or min(ordered, key=depth.key)
    return top.name or sc.UNKNOWN_LABEL


def _text(attrs: Mapping[str, AttrValue], key: str) -> str | None:
    """``to_str(attrs.get(key))``, without the call for the (usual) missing key."""
    value = attrs.get(key)
    return None if value is None else to_str(value)


def _duration_s(span: LatencySpan) -> float:
    return max(0, span.end_time_ns - span.start_time_ns) / 1e9


def _envelope_s(spans: Sequence[LatencySpan]) -> float:
    return max(0, max(s.end_time_ns for s in spans) - min(s.start_time_ns for s in spans)) / 1e9
