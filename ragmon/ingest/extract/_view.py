"""The span tree of one trace: each span's role, same-role groups, the main and root spans."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ... import semconv as sc
from ...types import AttrValue, SpanEvent, SpanRecord
from ._values import to_bool, to_str

ROLE_PIPELINE = "pipeline"
ROLE_RETRIEVER = "retriever"
ROLE_RERANKER = "reranker"
ROLE_GENERATOR = "generator"

_OI_KIND_ROLES = {
    sc.KIND_RETRIEVER: ROLE_RETRIEVER,
    sc.KIND_RERANKER: ROLE_RERANKER,
    sc.KIND_LLM: ROLE_GENERATOR,
}
_STAGE_ROLES = {
    sc.STAGE_PIPELINE: ROLE_PIPELINE,
    sc.STAGE_RETRIEVER: ROLE_RETRIEVER,
    sc.STAGE_GENERATOR: ROLE_GENERATOR,
}
_GEN_AI_OP_ROLES = {
    sc.GEN_AI_OP_RETRIEVAL: ROLE_RETRIEVER,
    sc.OPENLLMETRY_OP_VECTOR_DB_RETRIEVE: ROLE_RETRIEVER,
    sc.GEN_AI_OP_CHAT: ROLE_GENERATOR,
    sc.GEN_AI_OP_TEXT_COMPLETION: ROLE_GENERATOR,
    sc.GEN_AI_OP_GENERATE_CONTENT: ROLE_GENERATOR,
    sc.GEN_AI_OP_RERANK: ROLE_RERANKER,  # OpenLLMetry's LlamaIndex postprocessor rerankers
}
_LLM_REQUEST_TYPES = {"chat", "completion"}
_RETRIEVER_KEY_PREFIX = sc.RETRIEVAL_DOCUMENTS_PREFIX + "."
_RERANKER_KEY_PREFIX = sc.RERANKER_OUTPUT_DOCUMENTS_PREFIX + "."
_LLM_KEY_PREFIX = sc.LLM_OUTPUT_MESSAGES_PREFIX + "."
# OpenLLMetry's LlamaIndex spans carry no operation for retrievers, only the class name:
# "VectorIndexRetriever.task", "BM25Retriever.task", ...
_TRACELOOP_RETRIEVER_SUFFIXES = ("Retriever." + sc.TRACELOOP_KIND_TASK, "Retriever." + sc.TRACELOOP_KIND_WORKFLOW)


@dataclass(slots=True)
class Group:
    head: SpanRecord  # outermost span of the group: latency
    members: list[SpanRecord]


def _span_role(span: SpanRecord) -> str | None:
    return role_of(span.attributes, span.events)


def role_of(attrs: Mapping[str, AttrValue], events: Sequence[SpanEvent] = ()) -> str | None:
    """A span's role from its attributes and events."""
    role = declared_role(attrs, any(e.name == sc.DB_QUERY_RESULT_EVENT for e in events))
    if role is not None:
        return role or None
    # The SDK's attribute limit evicts the *oldest* attributes, often the span kind itself:
    # fall back on the data keys that only those span kinds carry.
    for key in attrs:
        role = key_role(key)
        if role is not None:
            return role
    return None


def declared_role(attrs: Mapping[str, AttrValue], retriever_event: bool) -> str | None:
    """``role_of`` without the data-key fallback (the latency-only decoder finds that one in
    the order the keys come: ``key_role``); ``retriever_event``: a ``db.query.result`` event.
    ``""``: the span kind says it has no stage role (CHAIN, EMBEDDING ...: no fallback either)."""
    return declared_role_of_dict(attrs if isinstance(attrs, dict) else dict(attrs), retriever_event)


def declared_role_of_dict(attrs: dict[str, AttrValue], retriever_event: bool) -> str | None:
    """``declared_role`` of a dict (compiled: its lookups are native)."""
    stage = to_str(attrs.get(sc.RAGMON_STAGE))
    if stage in _STAGE_ROLES:
        return _STAGE_ROLES[stage]
    kind = to_str(attrs.get(sc.SPAN_KIND))
    if kind is not None:
        role = _OI_KIND_ROLES.get(kind)  # (the keys are upper case, as instrumentations send them)
        return role if role is not None else _OI_KIND_ROLES.get(kind.upper(), "")  # CHAIN, TOOL...: no stage role
    op = to_str(attrs.get(sc.GEN_AI_OPERATION_NAME))
    if op in _GEN_AI_OP_ROLES:
        return _GEN_AI_OP_ROLES[op]
    if to_str(attrs.get(sc.LLM_REQUEST_TYPE)) in _LLM_REQUEST_TYPES:
        return ROLE_GENERATOR
    if retriever_event:
        return ROLE_RETRIEVER
    entity = to_str(attrs.get(sc.TRACELOOP_ENTITY_NAME))
    if entity is not None and entity.endswith(_TRACELOOP_RETRIEVER_SUFFIXES):
        return ROLE_RETRIEVER
    return None


def key_role(key: str) -> str | None:
    """The role a data key implies on a span that declares none (see ``role_of``)."""
    if key.startswith(_RETRIEVER_KEY_PREFIX):
        return ROLE_RETRIEVER
    if key.startswith(_RERANKER_KEY_PREFIX):
        return ROLE_RERANKER
    if key.startswith(_LLM_KEY_PREFIX) or key == sc.GEN_AI_OUTPUT_MESSAGES:
        return ROLE_GENERATOR
    return None


class TraceView:
    def __init__(self, spans: Sequence[SpanRecord]) -> None:
        self.spans = sorted(spans, key=lambda s: (s.start_time_ns, s.end_time_ns))
        self.by_id = {s.span_id: s for s in self.spans}
        self.roles = {s.span_id: _span_role(s) for s in self.spans}
        roots = [s for s in self.spans if s.parent_span_id is None]
        if not roots:  # this service's part of a distributed trace: its local root
            roots = [s for s in self.spans if s.parent_is_remote]
        self.root = roots[0] if roots else None
        self._depth: dict[str, int] = {}
        self._outermost: list[SpanRecord] | None = None

    def ancestors(self, span: SpanRecord) -> Iterable[SpanRecord]:
        seen = {span.span_id}
        parent_id = span.parent_span_id
        while parent_id is not None and parent_id in self.by_id and parent_id not in seen:
            seen.add(parent_id)  # guards against parent cycles in bad input
            parent = self.by_id[parent_id]
            yield parent
            parent_id = parent.parent_span_id

    def depth(self, span: SpanRecord) -> int:
        if span.span_id not in self._depth:
            self._depth[span.span_id] = sum(1 for _ in self.ancestors(span))
        return self._depth[span.span_id]

    def groups(self, role: str) -> list[Group]:
        """Spans of ``role`` grouped under their outermost same-role ancestor, in start order."""
        groups: dict[str, Group] = {}
        for span in self.spans:
            if self.roles[span.span_id] != role:
                continue
            head = span
            for ancestor in self.ancestors(span):
                if self.roles[ancestor.span_id] == role:
                    head = ancestor
            group = groups.get(head.span_id)
            if group is None:
                group = groups[head.span_id] = Group(head=head, members=[])
            group.members.append(span)
        return sorted(groups.values(), key=lambda g: g.head.start_time_ns)

    def main_span(self) -> SpanRecord | None:
        """The span that is the RAG request: ragmon's pipeline span, else the root."""
        for span in self.spans:
            if to_str(span.attributes.get(sc.RAGMON_STAGE)) == sc.STAGE_PIPELINE:
                return span
        return self.root

    def pipeline_candidates(self) -> list[SpanRecord]:
        """Spans whose input/output is the user's question/answer, best first."""
        out: list[SpanRecord] = []
        main = self.main_span()
        if main is not None:
            out.append(main)
        if self.root is not None and self.root is not main:
            out.append(self.root)
        workflows = [s for s in self.spans
                     if to_str(s.attributes.get(sc.TRACELOOP_SPAN_KIND)) == sc.TRACELOOP_KIND_WORKFLOW]
        # Only outermost CHAINs: nested ones are framework plumbing whose input/output is
        # anything (a passthrough of the question would otherwise pass for the answer).
        chains = [s for s in self.spans if self._is_chain(s)
                  and not any(self._is_chain(a) for a in self.ancestors(s))]
        for span in sorted(workflows, key=self.depth) + sorted(chains, key=self.depth):
            if span not in out:
                out.append(span)
        return out

    @staticmethod
    def _is_chain(span: SpanRecord) -> bool:
        return to_str(span.attributes.get(sc.SPAN_KIND)) == sc.KIND_CHAIN

    def service(self) -> str:
        first = self.root or self.main_span()
        if first is not None and first.service_name:
            return first.service_name
        names = Counter(s.service_name for s in self.spans if s.service_name)
        return names.most_common(1)[0][0] if names else sc.UNKNOWN_LABEL

    def pipeline_name(self, attribute: str | None = None) -> str:
        """``ragmon.pipeline``, else ``gen_ai.workflow.name``, else the configured ``attribute``
        (on a span, else on the resource), else OpenLLMetry's ``traceloop.workflow.name``, else
        the root span's name. Outermost spans first: an inner span's value names a sub-step."""
        keys = [sc.RAGMON_PIPELINE, sc.GEN_AI_WORKFLOW_NAME]
        if attribute:
            keys.append(attribute)
        keys.append(sc.TRACELOOP_WORKFLOW_NAME)
        for key in keys:
            for span in self._outermost_first():
                value = to_str(span.attributes.get(key))
                if value:
                    return value
            if key == attribute:
                for span in self._outermost_first():
                    value = to_str(span.resource.get(key))
                    if value:
                        return value
        top = self.root or min(self.spans, key=lambda s: (self.depth(s), s.start_time_ns))
        return top.name or sc.UNKNOWN_LABEL

    def declares_pipeline(self) -> bool:
        """A span says this trace is a RAG pipeline, whatever other spans it holds: ragmon's
        ``ragmon.stage=pipeline``, or a ``ragmon.pipeline`` name on a span that is not a late
        feedback span (``record_feedback(trace_id=...)`` names the pipeline too, and is no request)."""
        return any(self.roles[s.span_id] == ROLE_PIPELINE
                   or (to_str(s.attributes.get(sc.RAGMON_PIPELINE)) and sc.RAGMON_FEEDBACK not in s.attributes)
                   for s in self.spans)

    def content_sampled_flag(self) -> bool | None:
        flag: bool | None = None
        for span in self.spans:
            value = to_bool(span.attributes.get(sc.RAGMON_CONTENT_SAMPLED))
            if value is False:
                return False
            if value is True:
                flag = True
        return flag

    def _outermost_first(self) -> list[SpanRecord]:
        if self._outermost is None:
            self._outermost = sorted(self.spans, key=lambda s: (self.depth(s), s.start_time_ns))
        return self._outermost

    def first_attr(self, *keys: str, prefer: SpanRecord | None = None) -> AttrValue:
        ordered = ([prefer] if prefer is not None else []) + self._outermost_first()
        for span in ordered:
            for key in keys:
                value = span.attributes.get(key)
                if value not in (None, "", [], {}):
                    return value
        return None
