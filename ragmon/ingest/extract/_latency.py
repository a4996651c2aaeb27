"""The latency-only view of a trace: what the agent records for a trace it does not judge.

For a trace outside the judging sample the agent needs only a handful of fields: service and
pipeline, whether it is a RAG request, the retrieval / generation / pipeline latencies, the number
of retrieved documents and the top score, where the contexts came from, the model and prompt
version (release info), feedback and what the priority rules read. ``latency_trace`` computes
exactly those, with the rules of ``build_rag_trace``, from spans that carry only the attributes
that can decide them (``LATENCY_KEYS``; the document ids and scores already filed by document,
``docs``) plus where their content keys are (``content``; a document's own, ``doc_content``): the
span view of ``_span_view``. The reader (``ingest/otlp_proto.py``) reads nothing else of such a span.

The contract that keeps both paths equal: an attribute the extraction reads is either

* a *latency key* — read by the decoder and used here with the same converters and precedence;
* a *content key* (``CONTENT_KEYS``, ``CONTENT_PREFIXES``, document text or metadata) — only its
  presence is known. Presence alone decides most questions: no output key, no answer; no message
  key, no messages; a document with its own id keeps it whatever its text. Where presence is not
  enough the span's value is read then, with the full path's own readers, and for that span only:
  whether a document's text is blank (the first one usually settles ``contexts_source``), the
  documents of a span whose ids come from metadata or text, or from JSON (LangChain, OpenLLMetry,
  GenAI ``gen_ai.retrieval.documents``) or ``db.query.result`` events; which generator produced
  the answer when there are several; the best of several document-bearing spans of one group.
  Where the answer would need the whole trace's text (contexts recovered from the chat's messages)
  ``latency_trace`` returns None and the trace is extracted in full;
* or irrelevant to the fields above (the question, session and user ids, tags, error.type, ...):
  only the judge and the trace inspector read those, and a judged trace is always rebuilt in full.

The retrieved documents are read in :mod:`._latency_docs`.

tests/ingest/test_fast_path.py runs the same OTLP bytes through both paths and compares the
agent's metrics and accounting.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from operator import attrgetter

from ... import semconv as sc
from ...types import AttrValue
from ._latency_docs import LatencyGroup, has_text
from ._latency_docs import documents as retrieved_documents
from ._messages import generator_output
from ._settings import DEFAULT_SETTINGS, ExtractSettings
from ._span_view import LightSpan as LatencySpan  # concrete: compiled code reads its fields directly
from ._values import to_str
from ._view import ROLE_GENERATOR, ROLE_PIPELINE, ROLE_RERANKER, ROLE_RETRIEVER

# what generator_output reads (no such key: no answer) ...
_OUTPUT_KEYS = (sc.OUTPUT_VALUE, sc.TRACELOOP_ENTITY_OUTPUT, sc.GEN_AI_OUTPUT_MESSAGES)
_OUTPUT_PREFIXES = (sc.LLM_OUTPUT_MESSAGES_PREFIX + ".", sc.GEN_AI_COMPLETION_PREFIX + ".")
# ... what input_messages reads (no such key: no messages) ...
_MESSAGE_KEYS = (sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_SYSTEM_INSTRUCTIONS)
_MESSAGE_PREFIXES = (sc.LLM_INPUT_MESSAGES_PREFIX + ".", sc.GEN_AI_PROMPT_PREFIX + ".")


# init=False: the __init__ below is compiled with the module (a generated one runs as interpreted
# Python: it cost more than the rest of a trace's view); not frozen for the same reason.
@dataclass(slots=True, init=False)
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
    contexts_source: str
    feedback: AttrValue  # attributes["ragmon.feedback"] of the full trace
    fraction: float  # the decoder's trace_fraction of the trace id; -1.0 when it did not compute one

    def __init__(self, trace_id: str, service: str, pipeline: str, complete: bool, not_rag: bool,
                 retrieval_latency_s: float | None, generation_latency_s: float | None,
                 pipeline_latency_s: float | None, document_count: int, top_retrieval_score: float | None,
                 has_error: bool, model: str | None, prompt_version: str | None,
                 contexts_source: str = sc.CONTEXTS_NONE, feedback: AttrValue = None, fraction: float = -1.0) -> None:
        self.trace_id = trace_id
        self.service = service
        self.pipeline = pipeline
        self.complete = complete
        self.not_rag = not_rag
        self.retrieval_latency_s = retrieval_latency_s
        self.generation_latency_s = generation_latency_s
        self.pipeline_latency_s = pipeline_latency_s
        self.document_count = document_count
        self.top_retrieval_score = top_retrieval_score
        self.has_error = has_error
        self.model = model
        self.prompt_version = prompt_version
        self.contexts_source = contexts_source
        self.feedback = feedback
        self.fraction = fraction


def latency_trace(trace_id: str, spans: list[LatencySpan], *, complete: bool,
                  settings: ExtractSettings | None = None) -> LatencyTrace | None:
    """The latency-only fields of one trace: the same values ``build_rag_trace`` gives (see the
    module doc); None when they depend on text that only the full extraction reads. Mirrors
    ``TraceView`` and ``build_rag_trace``."""
    if not spans:
        raise ValueError("latency_trace needs at least one span")
    settings = settings or DEFAULT_SETTINGS
    ordered = _in_order(spans)
    by_id = {s.span_id: s for s in ordered}
    root: LatencySpan | None = None
    local_root: LatencySpan | None = None  # this service's part of a distributed trace: its local root
    has_error = False

    groups: dict[str, dict[str, LatencyGroup]] = {ROLE_RETRIEVER: {}, ROLE_RERANKER: {}, ROLE_GENERATOR: {}}
    declares_pipeline = False
    main: LatencySpan | None = None
    feedback_spans: list[LatencySpan] = []
    present: set[str] = set()  # the latency keys any span has: the lookups below skip the others
    for span in ordered:  # one pass: roots, errors, roles and groups, the main span, feedback
        if span.parent_span_id is None:
            if root is None:
                root = span
        elif local_root is None and span.parent_is_remote:
            local_root = span
        if span.status_code == "ERROR":
            has_error = True
        role = span.role
        if role == ROLE_PIPELINE:
            declares_pipeline = True
        elif role is not None:
            head = _head(span, role, by_id)
            by_head = groups[role]
            group = by_head.get(head.span_id)
            if group is None:
                group = by_head[head.span_id] = LatencyGroup(head)
            group.members.append(span)
        attrs = span.attributes
        if not attrs:
            continue
        present.update(attrs)
        if main is None and _text(attrs, sc.RAGMON_STAGE) == sc.STAGE_PIPELINE:
            main = span
        if sc.RAGMON_FEEDBACK in attrs:
            feedback_spans.append(span)  # (a late feedback span names the pipeline, and is no request)
        elif not declares_pipeline and _text(attrs, sc.RAGMON_PIPELINE):
            declares_pipeline = True
    if root is None:
        root = local_root
    by_head = groups[ROLE_RETRIEVER]
    retrievers = _sorted_groups(by_head) if len(by_head) > 1 else list(by_head.values())
    by_head = groups[ROLE_RERANKER]
    rerankers = _sorted_groups(by_head) if by_head else []
    by_head = groups[ROLE_GENERATOR]
    generators = _sorted_groups(by_head) if len(by_head) > 1 else list(by_head.values())

    documents = retrieved_documents(retrievers, rerankers, settings.doc_id_keys)
    heads = [g.head for g in retrievers]
    if rerankers:
        heads += [g.head for g in rerankers]
    generator, generator_data = _choose_generator(generators)
    # contexts: the documents' own text, else what the chat's messages hold (full extraction)
    messages = False
    if generator is not None and generator_data is not None:
        for member in (generator_data, *generator.members):
            if member.content and _has(member, _MESSAGE_KEYS, _MESSAGE_PREFIXES):
                messages = True
                break
    if documents:
        if any(d[2] is True or (d[2] is not False and has_text(d)) for d in documents):
            contexts_source = sc.CONTEXTS_RETRIEVAL
        elif messages:
            return None
        else:
            contexts_source = sc.CONTEXTS_NONE
    elif messages and not retrievers:
        return None
    else:
        contexts_source = sc.CONTEXTS_NONE
    main = main or root
    depth = _Depth(by_id)
    model = to_str(_first_attr(ordered, depth, _MODEL_KEYS, present, prefer=generator_data))
    top_score: float | None = None  # max() of the scores there are, without the generic call
    for doc in documents:
        score = doc[1]
        if score is not None and (top_score is None or score > top_score):
            top_score = score
    return LatencyTrace(
        trace_id=trace_id,
        service=_service(root or main, ordered),
        pipeline=settings.rename_pipeline(_pipeline_name(ordered, root, depth, settings.pipeline_attribute,
                                                          present)),
        complete=complete,
        not_rag=not (retrievers or rerankers or generators or documents or declares_pipeline),
        retrieval_latency_s=(_duration_s(heads[0]) if len(heads) == 1 else _envelope_s(heads)) if heads else None,
        generation_latency_s=_duration_s(generator.head) if generator is not None else None,
        pipeline_latency_s=_duration_s(main) if main is not None else _envelope_s(ordered),
        document_count=len(documents),
        top_retrieval_score=top_score,
        has_error=has_error,
        model=model if model is not None and model.lower() != sc.UNKNOWN_LABEL else None,
        prompt_version=to_str(_first_attr(ordered, depth, _PROMPT_KEYS, present)),
        contexts_source=contexts_source,
        feedback=_feedback(feedback_spans) if feedback_spans else None,
        fraction=ordered[0].fraction,  # (one trace id: the same for every span)
    )


def _has(span: LatencySpan, keys: tuple[str, ...], prefixes: tuple[str, ...]) -> bool:
    content = span.content
    return bool(content) and (any(k in content for k in keys) or any(k.startswith(prefixes) for k in content))


def _feedback(spans: list[LatencySpan]) -> AttrValue:
    """``_trace_attributes``' feedback: the latest-ending span's usable value."""
    for span in sorted(spans, key=lambda s: s.end_time_ns, reverse=True):
        value = span.attributes.get(sc.RAGMON_FEEDBACK)
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            return None if value == "" else value
    return None


def _choose_generator(groups: list[LatencyGroup]) -> tuple[LatencyGroup | None, LatencySpan | None]:
    """``_trace._choose_generator``: the last-ending group that produced text, and its member
    holding the text. Whether a span produced text is read only when the choice depends on it."""
    if not groups:
        return None, None
    if len(groups) == 1 and len(groups[0].members) == 1:
        return groups[0], groups[0].head  # chosen whether or not it produced text
    for group in sorted(groups, key=lambda g: g.head.end_time_ns, reverse=True):
        for member in sorted(group.members, key=lambda s: s.end_time_ns, reverse=True):
            if _has(member, _OUTPUT_KEYS, _OUTPUT_PREFIXES) and generator_output(member.to_record()):
                return group, member
    last = max(groups, key=lambda g: g.head.end_time_ns)
    return last, last.head


_START_END = attrgetter("start_time_ns", "end_time_ns")  # the order of TraceView's spans
_INSERTION_SORT_MAX = 16


def _in_order(spans: list[LatencySpan]) -> list[LatencySpan]:
    """``sorted(spans, key=_START_END)``: a stable insertion sort for the usual few spans (no key
    tuples, no generic calls), ``sorted`` for more."""
    if len(spans) > _INSERTION_SORT_MAX:
        return sorted(spans, key=_START_END)
    ordered = list(spans)
    for i in range(1, len(ordered)):
        span = ordered[i]
        start, end = span.start_time_ns, span.end_time_ns
        j = i - 1
        while j >= 0:
            before = ordered[j]
            if before.start_time_ns < start or (before.start_time_ns == start and before.end_time_ns <= end):
                break
            ordered[j + 1] = before
            j -= 1
        ordered[j + 1] = span
    return ordered


def _head(span: LatencySpan, role: str, by_id: dict[str, LatencySpan]) -> LatencySpan:
    """The outermost same-role ancestor of ``span`` (itself when none): ``_ancestors`` without the list."""
    head = span
    parent_id = span.parent_span_id
    if parent_id is None:
        return head
    seen = {span.span_id}
    while parent_id is not None and parent_id not in seen:
        parent = by_id.get(parent_id)
        if parent is None:
            break
        seen.add(parent_id)  # guards against parent cycles in bad input
        if parent.role == role:
            head = parent
        parent_id = parent.parent_span_id
    return head


def _ancestors(span: LatencySpan, by_id: dict[str, LatencySpan]) -> list[LatencySpan]:
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

    def __init__(self, by_id: dict[str, LatencySpan]) -> None:
        self._by_id = by_id
        self._depth: dict[str, int] = {}

    def key(self, span: LatencySpan) -> tuple[int, int]:
        """``TraceView``'s outermost-first order: (depth, start)."""
        depth = self._depth.get(span.span_id)
        if depth is None:
            depth = self._depth[span.span_id] = len(_ancestors(span, self._by_id))
        return depth, span.start_time_ns

    def outermost(self, spans: list[LatencySpan]) -> LatencySpan:
        """``min(spans, key=self.key)``. A span whose parent is not in the trace has depth 0 and
        needs no walk: the earliest of those wins (the first of equals, as ``min`` keeps)."""
        if len(spans) == 1:
            return spans[0]
        by_id = self._by_id
        best: LatencySpan | None = None
        for span in spans:
            parent = span.parent_span_id
            if (parent is None or parent == span.span_id or parent not in by_id) and (
                    best is None or span.start_time_ns < best.start_time_ns):
                best = span
        return best if best is not None else min(spans, key=self.key)


def _sorted_groups(groups: dict[str, LatencyGroup]) -> list[LatencyGroup]:
    return sorted(groups.values(), key=lambda g: g.head.start_time_ns) if len(groups) > 1 else list(groups.values())


_MODEL_KEYS = (sc.LLM_MODEL_NAME, sc.GEN_AI_RESPONSE_MODEL, sc.GEN_AI_REQUEST_MODEL)
_PROMPT_KEYS = (sc.LLM_PROMPT_TEMPLATE_VERSION,)


def _first_attr(ordered: list[LatencySpan], depth: _Depth, keys: tuple[str, ...], present: set[str],
                prefer: LatencySpan | None = None) -> AttrValue:
    """``TraceView.first_attr``: the preferred span first, then outermost first (``present``: the
    keys any span has)."""
    if present.isdisjoint(keys):
        return None
    if prefer is not None:
        value = _first_value(prefer, keys)
        if value is not None:
            return value
    candidates = [s for s in ordered if _first_value(s, keys) is not None]
    if not candidates:
        return None
    return _first_value(depth.outermost(candidates), keys)


def _first_value(span: LatencySpan, keys: tuple[str, ...]) -> AttrValue:
    attrs = span.attributes
    for key in keys:
        value = attrs.get(key)
        if value not in (None, "", [], {}):
            return value
    return None


def _service(first: LatencySpan | None, ordered: list[LatencySpan]) -> str:
    if first is not None and first.service_name:
        return first.service_name
    names = Counter(s.service_name for s in ordered if s.service_name)
    return names.most_common(1)[0][0] if names else sc.UNKNOWN_LABEL


def _pipeline_name(ordered: list[LatencySpan], root: LatencySpan | None, depth: _Depth,
                   attribute: str | None, present: set[str]) -> str:
    """``TraceView.pipeline_name``: the first key any span names it by, outermost span first
    (``present``: the keys any span has)."""
    keys = [sc.RAGMON_PIPELINE, sc.GEN_AI_WORKFLOW_NAME]
    if attribute:
        keys.append(attribute)
    keys.append(sc.TRACELOOP_WORKFLOW_NAME)
    for key in keys:
        named = [s for s in ordered if key in s.attributes and _text(s.attributes, key)] if key in present else None
        if named:
            first = depth.outermost(named)
            return _text(first.attributes, key) or sc.UNKNOWN_LABEL
        if key == attribute:
            named = [s for s in ordered if to_str(s.resource.get(key))]
            if named:
                return to_str(depth.outermost(named).resource.get(key)) or sc.UNKNOWN_LABEL
    top = root or depth.outermost(ordered)
    return top.name or sc.UNKNOWN_LABEL


def _text(attrs: dict[str, AttrValue], key: str) -> str | None:
    """``to_str(attrs.get(key))``, without the call for the (usual) missing key."""
    value = attrs.get(key)
    return None if value is None else to_str(value)


def _duration_s(span: LatencySpan) -> float:
    return max(0, span.end_time_ns - span.start_time_ns) / 1e9


def _envelope_s(spans: list[LatencySpan]) -> float:
    return max(0, max(s.end_time_ns for s in spans) - min(s.start_time_ns for s in spans)) / 1e9
