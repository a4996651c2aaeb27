"""The spans of one trace -> one ``RagTrace``. Pure and forgiving: odd attribute types are
ignored or converted, never raised on.

Conventions read (names in ``semconv``): ragmon's own ``ragmon.*`` (its SDK writes
OpenInference), OpenInference, OTel GenAI, and OpenLLMetry/Traceloop.

How the stages are found
    Each span gets at most one *role*: pipeline, retriever, reranker or generator
    (``ragmon.stage`` wins, then ``openinference.span.kind``, then ``gen_ai.operation.name``,
    then OpenLLMetry's ``llm.request.type``, then ``db.query.result`` events, then the data
    keys themselves — the SDK's attribute limit evicts the *oldest* attributes, often the
    span kind, while ``retrieval.documents.*`` survive). Framework instrumentors nest spans
    of one role (a RETRIEVER inside a RETRIEVER, an LLM inside an LLM), so spans of a role
    are grouped under their outermost same-role ancestor and each *group* counts once:

    * latency comes from the group's outermost span (it covers the whole operation as the
      application sees it; an inner span is a part of it);
    * data (documents, answer) comes from the group member that holds the most of it,
      whichever depth that is. Nothing is counted twice.

Retrieval: documents of all retriever groups in start order (ids de-duplicated); when a
reranker returned documents those are what the generator saw, so they replace the list.
Retrieval latency is the envelope (first start to last end) of the retriever and reranker
groups, i.e. it includes reranking and covers parallel (hybrid) retrievers once.

Generation: the last-ending generator group that produced text (an earlier LLM call is
typically query rewriting); its outermost span gives the latency.

Question: the pipeline span's input (``ragmon.stage=pipeline``, else the root — or the local
root, whose parent is in another process — else an OpenLLMetry workflow span or an outermost
CHAIN; nested CHAINs are framework plumbing and never used), else the retriever's query, else
the last user message sent to the generator. Answer: the pipeline span's output, else the generator's.
JSON-wrapped values (``{"question": ...}``, chat completion responses, LangChain
``generations``) are unwrapped.

Documents without an id take one from their metadata (``id``, ``doc_id``, ...), else a content
hash (``sha256(content)[:16]``, the same as ragmon's SDK). GenAI retrieval spans
may carry ids and scores only; then texts are looked up in the chat span's input messages
(matched by id in structured tool results, or by position when the counts agree). When that is
not possible the documents stay without text — documented, not guessed.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import semconv as sc
from ..types import AttrValue, Document, RagTrace, SpanRecord

__all__ = ["build_rag_trace", "content_id"]

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
}
_LLM_REQUEST_TYPES = {"chat", "completion"}
_RETRIEVER_KEY_PREFIX = sc.RETRIEVAL_DOCUMENTS_PREFIX + "."
_RERANKER_KEY_PREFIX = sc.RERANKER_OUTPUT_DOCUMENTS_PREFIX + "."
_LLM_KEY_PREFIX = sc.LLM_OUTPUT_MESSAGES_PREFIX + "."

_QUESTION_KEYS = ("question", "query", "query_str", "user_input", "input", "inputs", "prompt", "q",
                  "text", "message", "messages", "args")
_ANSWER_KEYS = ("answer", "output", "outputs", "result", "response", "output_text", "generations",
                "choices", "text", "content", "message", "generation")
_CONTENT_KEYS = ("page_content", "pageContent", "content", "text", "document", "chunk", "body")
_ID_KEYS = ("id", "doc_id", "document_id", "id_", "node_id", "chunk_id", "_id")
_SCORE_KEYS = ("score", "relevance_score", "similarity", "_score")
_DOC_LIST_KEYS = ("documents", "docs", "outputs", "output", "result", "results", "nodes",
                  "source_nodes", "context", "contexts")
_MAX_JSON_CHARS = 8 << 20  # do not even try to parse absurdly large attribute strings
_MAX_DEPTH = 8


@dataclass(slots=True)
class _Group:
    head: SpanRecord  # outermost span of the group: latency
    members: list[SpanRecord]


def content_id(content: str) -> str:
    """Stable id for a document that came without one."""
    return hashlib.sha256(content.encode("utf-8", "replace")).hexdigest()[:16]


def build_rag_trace(spans: Sequence[SpanRecord], *, complete: bool) -> RagTrace:
    """Assemble one ``RagTrace`` from all spans of one trace (any order)."""
    if not spans:
        raise ValueError("build_rag_trace needs at least one span")
    view = _TraceView(spans)
    trace_id = spans[0].trace_id

    pipeline_spans = view.pipeline_candidates()
    retriever_groups = view.groups(ROLE_RETRIEVER)
    reranker_groups = view.groups(ROLE_RERANKER)
    generator_groups = view.groups(ROLE_GENERATOR)

    documents, retrieval_query = _retrieval_documents(retriever_groups, reranker_groups)
    retrieval_heads = [g.head for g in retriever_groups + reranker_groups]
    retrieval_latency = _envelope_s(retrieval_heads) if retrieval_heads else None

    generator, generator_data = _choose_generator(generator_groups)
    messages: list[tuple[str, str, Any]] = []
    if generator is not None and generator_data is not None:
        # the prompt may sit on another member of the group than the answer (a framework's LLM
        # span around the client library's span): first the data span, then the others
        for member in [generator_data, *generator.members]:
            messages = _messages(member)
            if messages:
                break

    question = _first_text(_span_input(s) for s in pipeline_spans) or retrieval_query
    if not question:
        question = _last_message(messages, ("user", "human"))
    answer = _first_text(_span_output(s) for s in pipeline_spans)
    if not answer and generator_data is not None:
        answer = _generator_output(generator_data)
    if documents and all(d.content is None for d in documents) and messages:
        documents = _fill_from_messages(documents, messages, question)
    elif not documents and messages and not retriever_groups:
        documents = _documents_from_messages(messages, question)

    main = view.main_span()
    if main is not None:
        pipeline_latency: float | None = main.duration_s
        start_ns = main.start_time_ns
    else:
        pipeline_latency = _envelope_s(spans)
        start_ns = min(s.start_time_ns for s in spans)

    sampled_flag = view.content_sampled_flag()
    has_text = bool(question or answer or any(d.content for d in documents))
    rag_spans = [*pipeline_spans, *(m for g in retriever_groups + reranker_groups + generator_groups
                                    for m in g.members)]
    return RagTrace(
        trace_id=trace_id,
        service=view.service(),
        pipeline=view.pipeline_name(),
        question=question,
        answer=answer,
        documents=tuple(documents),
        retrieval_latency_s=retrieval_latency,
        generation_latency_s=generator.head.duration_s if generator is not None else None,
        pipeline_latency_s=pipeline_latency,
        start_time_ns=start_ns,
        error_type=_error_type(rag_spans),
        complete=complete,
        content_sampled=has_text and sampled_flag is not False,
        attribute_limit_hit=any(_int(s.dropped_attributes_count) > 0 for s in spans),
        span_count=len(spans),
        attributes=_trace_attributes(view, generator_data, len(documents)),
    )


# --- the span tree --------------------------------------------------------------------------------
class _TraceView:
    def __init__(self, spans: Sequence[SpanRecord]) -> None:
        self.spans = sorted(spans, key=lambda s: (s.start_time_ns, s.end_time_ns))
        self.by_id = {s.span_id: s for s in self.spans}
        self.roles = {s.span_id: _role(s) for s in self.spans}
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

    def groups(self, role: str) -> list[_Group]:
        """Spans of ``role`` grouped under their outermost same-role ancestor, in start order."""
        groups: dict[str, _Group] = {}
        for span in self.spans:
            if self.roles[span.span_id] != role:
                continue
            head = span
            for ancestor in self.ancestors(span):
                if self.roles[ancestor.span_id] == role:
                    head = ancestor
            group = groups.get(head.span_id)
            if group is None:
                group = groups[head.span_id] = _Group(head=head, members=[])
            group.members.append(span)
        return sorted(groups.values(), key=lambda g: g.head.start_time_ns)

    def main_span(self) -> SpanRecord | None:
        """The span that is the RAG request: ragmon's pipeline span, else the root."""
        for span in self.spans:
            if _str(span.attributes.get(sc.RAGMON_STAGE)) == sc.STAGE_PIPELINE:
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
                     if _str(s.attributes.get(sc.TRACELOOP_SPAN_KIND)) == sc.TRACELOOP_KIND_WORKFLOW]
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
        return _str(span.attributes.get(sc.SPAN_KIND)) == sc.KIND_CHAIN

    def service(self) -> str:
        first = self.root or self.main_span()
        if first is not None and first.service_name:
            return first.service_name
        names = Counter(s.service_name for s in self.spans if s.service_name)
        return names.most_common(1)[0][0] if names else sc.UNKNOWN_LABEL

    def pipeline_name(self) -> str:
        for key in (sc.RAGMON_PIPELINE, sc.TRACELOOP_WORKFLOW_NAME):
            for span in self._outermost_first():
                value = _str(span.attributes.get(key))
                if value:
                    return value
        top = self.root or min(self.spans, key=lambda s: (self.depth(s), s.start_time_ns))
        return top.name or sc.UNKNOWN_LABEL

    def content_sampled_flag(self) -> bool | None:
        flag: bool | None = None
        for span in self.spans:
            value = _bool(span.attributes.get(sc.RAGMON_CONTENT_SAMPLED))
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


def _role(span: SpanRecord) -> str | None:
    attrs = span.attributes
    stage = _str(attrs.get(sc.RAGMON_STAGE))
    if stage in _STAGE_ROLES:
        return _STAGE_ROLES[stage]
    kind = _str(attrs.get(sc.SPAN_KIND))
    if kind is not None:
        return _OI_KIND_ROLES.get(kind.upper())  # CHAIN, EMBEDDING, TOOL...: no stage role
    op = _str(attrs.get(sc.GEN_AI_OPERATION_NAME))
    if op in _GEN_AI_OP_ROLES:
        return _GEN_AI_OP_ROLES[op]
    if _str(attrs.get(sc.LLM_REQUEST_TYPE)) in _LLM_REQUEST_TYPES:
        return ROLE_GENERATOR
    if any(e.name == sc.DB_QUERY_RESULT_EVENT for e in span.events):
        return ROLE_RETRIEVER
    # The SDK's attribute limit evicts the *oldest* attributes, often the span kind itself:
    # fall back on the data keys that only those span kinds carry.
    for key in attrs:
        if key.startswith(_RETRIEVER_KEY_PREFIX):
            return ROLE_RETRIEVER
        if key.startswith(_RERANKER_KEY_PREFIX):
            return ROLE_RERANKER
        if key.startswith(_LLM_KEY_PREFIX):
            return ROLE_GENERATOR
    return None


# --- retrieval --------------------------------------------------------------------------------------
def _retrieval_documents(
    retriever_groups: list[_Group], reranker_groups: list[_Group]
) -> tuple[list[Document], str | None]:
    query: str | None = None
    found: list[Document] = []
    for group in retriever_groups:
        docs, data_span = _best_documents(group, _span_documents)
        found.extend(docs)
        if query is None:
            for span in ([data_span] if data_span else []) + group.members:
                query = _retrieval_query(span)
                if query:
                    break
    for group in reranker_groups:
        reranked, data_span = _best_documents(group, _reranker_documents)
        if reranked:
            found = reranked  # what the generator actually saw
        if query is None and data_span is not None:
            query = _text(data_span.attributes.get(sc.RERANKER_QUERY), _QUESTION_KEYS)
    return _dedupe_and_rank(found), query


def _best_documents(group: _Group, reader: Any) -> tuple[list[Document], SpanRecord | None]:
    best: list[Document] = []
    best_span: SpanRecord | None = None
    best_key: tuple[int, ...] = (-1,)
    for span in group.members:
        docs = reader(span)
        key = (
            len(docs),
            sum(d.content is not None for d in docs),
            sum(d.score is not None for d in docs),
            sum(d.content is None or d.id != content_id(d.content) for d in docs),  # real ids
        )
        if docs and key > best_key:
            best, best_span, best_key = docs, span, key
    return best, best_span


def _retrieval_query(span: SpanRecord) -> str | None:
    attrs = span.attributes
    return (
        _text(attrs.get(sc.INPUT_VALUE), _QUESTION_KEYS)
        or _text(attrs.get(sc.GEN_AI_RETRIEVAL_QUERY_TEXT), _QUESTION_KEYS)
        or _text(attrs.get(sc.TRACELOOP_ENTITY_INPUT), _QUESTION_KEYS)
    )


def _span_documents(span: SpanRecord) -> list[Document]:
    attrs = span.attributes
    docs = _flattened_documents(attrs, sc.RETRIEVAL_DOCUMENTS_PREFIX)
    if docs:
        return docs
    docs = _documents_from_json(attrs.get(sc.GEN_AI_RETRIEVAL_DOCUMENTS))
    if docs:
        return docs
    docs = _event_documents(span)
    if docs:
        return docs
    for key in (sc.TRACELOOP_ENTITY_OUTPUT, sc.OUTPUT_VALUE):
        docs = _documents_from_json(attrs.get(key))
        if docs:
            return docs
    return []


def _reranker_documents(span: SpanRecord) -> list[Document]:
    return _flattened_documents(span.attributes, sc.RERANKER_OUTPUT_DOCUMENTS_PREFIX) or _span_documents(span)


def _flattened_documents(attrs: Mapping[str, AttrValue], prefix: str) -> list[Document]:
    """``{prefix}.{i}.document.{id,content,score,metadata}`` -> documents by index."""
    fields = _indexed_fields(attrs, prefix + ".", "document.")
    docs: list[Document] = []
    for index in sorted(fields):
        f = fields[index]
        content = _str(f.get(sc.DOCUMENT_CONTENT))
        metadata = _metadata(f.get(sc.DOCUMENT_METADATA))
        # OpenInference's LangChain instrumentor leaves document.id out; the store's id is
        # often in the metadata (as ragmon's SDK adapters also read it)
        doc_id = (_id(f.get(sc.DOCUMENT_ID)) or _first_id(metadata)
                  or (content_id(content) if content else None))
        if doc_id is None:
            continue
        docs.append(Document(id=doc_id, content=content, score=_float(f.get(sc.DOCUMENT_SCORE)),
                             rank=len(docs), metadata=metadata))
    return docs


def _indexed_fields(attrs: Mapping[str, AttrValue], prefix: str, field_prefix: str) -> dict[int, dict[str, Any]]:
    """Flattened list attributes ``{prefix}{i}.{field}`` -> ``{i: {field: value}}`` (string
    splitting, not a regex: this runs over every attribute of every data-carrying span)."""
    fields: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        index, dot, field = key[len(prefix):].partition(".")
        if dot and index.isdigit() and field.startswith(field_prefix):
            fields.setdefault(int(index), {})[field] = value
    return fields


def _event_documents(span: SpanRecord) -> list[Document]:
    """OpenLLMetry vector-DB instrumentations: one ``db.query.result`` event per result."""
    docs: list[Document] = []
    for event in span.events:
        if event.name != sc.DB_QUERY_RESULT_EVENT:
            continue
        a = event.attributes
        ids, contents = a.get(sc.DB_QUERY_RESULT_ID), a.get(sc.DB_QUERY_RESULT_DOCUMENT)
        scores, distances = a.get(sc.DB_QUERY_RESULT_SCORE), a.get(sc.DB_QUERY_RESULT_DISTANCE)
        metas = a.get(sc.DB_QUERY_RESULT_METADATA)
        if isinstance(ids, list) or isinstance(contents, list):  # one event with parallel arrays
            n = max(len(ids) if isinstance(ids, list) else 0, len(contents) if isinstance(contents, list) else 0)
            rows = [tuple(_at(v, i) for v in (ids, contents, scores, distances, metas)) for i in range(n)]
        else:
            rows = [(ids, contents, scores, distances, metas)]
        for doc_id_raw, content_raw, score_raw, distance_raw, meta_raw in rows:
            content = _str(content_raw)
            doc_id = _id(doc_id_raw) or (content_id(content) if content else None)
            if doc_id is None:
                continue
            metadata = dict(_metadata(meta_raw) or {})
            distance = _float(distance_raw)
            if distance is not None:
                metadata["distance"] = distance  # a distance is not a similarity score: kept apart
            docs.append(Document(id=doc_id, content=content, score=_float(score_raw), rank=len(docs),
                                 metadata=metadata or None))
    return docs


def _documents_from_json(value: AttrValue) -> list[Document]:
    """A list of documents in any of the JSON shapes frameworks produce (see module doc)."""
    parsed = _maybe_json(value)
    items = _find_document_list(parsed, 0)
    docs: list[Document] = []
    for item in items or []:
        doc = _document_from_obj(item, len(docs))
        if doc is not None:
            docs.append(doc)
    return docs


def _find_document_list(value: Any, depth: int) -> list[Any] | None:
    if depth > _MAX_DEPTH:
        return None
    value = _maybe_json(value)
    if isinstance(value, list):
        if value and all(isinstance(v, list) for v in value) and len(value) == 1:
            return _find_document_list(value[0], depth + 1)  # [[docs]] from batch APIs
        if any(_looks_like_document(v) for v in value):
            return value
        return None
    if isinstance(value, dict):
        for key in _DOC_LIST_KEYS:
            if key in value:
                found = _find_document_list(value[key], depth + 1)
                if found:
                    return found
    return None


def _looks_like_document(value: Any) -> bool:
    value = _maybe_json(value)
    if isinstance(value, str):
        return bool(value.strip())  # a retriever that returns plain strings
    if isinstance(value, dict):
        value = _unwrap_serialized(value)
        keys = set(value)
        return bool(keys & set(_CONTENT_KEYS) or keys & set(_ID_KEYS) or "node" in keys)
    if isinstance(value, list | tuple) and len(value) == 2 and isinstance(value[1], int | float):
        return _looks_like_document(value[0])  # (doc, score) pairs
    return False


def _unwrap_serialized(obj: dict[str, Any]) -> dict[str, Any]:
    """LangChain's ``{"lc": 1, "type": "constructor", "kwargs": {...}}`` -> kwargs."""
    kwargs = obj.get("kwargs")
    if obj.get("lc") is not None and isinstance(kwargs, dict):
        return kwargs
    return obj


def _document_from_obj(item: Any, rank: int) -> Document | None:
    item = _maybe_json(item)
    score: float | None = None
    if isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[1], int | float):
        item, score = _maybe_json(item[0]), _float(item[1])
    if isinstance(item, str):
        return Document(id=content_id(item), content=item, score=score, rank=rank) if item else None
    if not isinstance(item, dict):
        return None
    obj = _unwrap_serialized(item)
    node = obj.get("node")
    if isinstance(node, dict):  # LlamaIndex NodeWithScore
        score = _float(obj.get("score")) if score is None else score
        obj = node
    metadata = _metadata(obj.get("metadata"))
    content = None
    for key in _CONTENT_KEYS:
        content = _str(obj.get(key))
        if content:
            break
    doc_id = _first_id(obj) or _first_id(metadata)
    if score is None:
        for source in (obj, metadata or {}):
            for key in _SCORE_KEYS:
                score = _float(source.get(key))
                if score is not None:
                    break
            if score is not None:
                break
    if doc_id is None:
        if not content:
            return None
        doc_id = content_id(content)
    return Document(id=doc_id, content=content or None, score=score, rank=rank, metadata=metadata)


def _first_id(source: Mapping[str, Any] | None) -> str | None:
    for key in _ID_KEYS:
        doc_id = _id(source.get(key)) if source else None
        if doc_id:
            return doc_id
    return None


def _dedupe_and_rank(docs: list[Document]) -> list[Document]:
    seen: set[str] = set()
    out: list[Document] = []
    for doc in docs:
        if doc.id in seen:
            continue
        seen.add(doc.id)
        out.append(Document(id=doc.id, content=doc.content, score=doc.score, rank=len(out),
                            metadata=doc.metadata))
    return out


# --- generation and messages -------------------------------------------------------------------
def _choose_generator(groups: list[_Group]) -> tuple[_Group | None, SpanRecord | None]:
    """The last-ending group that produced text; its member holding the text."""
    if not groups:
        return None, None
    for group in sorted(groups, key=lambda g: g.head.end_time_ns, reverse=True):
        for member in sorted(group.members, key=lambda s: s.end_time_ns, reverse=True):
            if _generator_output(member):
                return group, member
    last = max(groups, key=lambda g: g.head.end_time_ns)
    return last, last.head


def _generator_output(span: SpanRecord) -> str | None:
    attrs = span.attributes
    out = _last_message(_flattened_messages(attrs, sc.LLM_OUTPUT_MESSAGES_PREFIX), ("assistant", "ai", "model", ""))
    out = out or _last_message(_genai_messages(attrs.get(sc.GEN_AI_OUTPUT_MESSAGES)), ("assistant", "model", ""))
    out = out or _last_message(_flattened_messages(attrs, sc.GEN_AI_COMPLETION_PREFIX), ("assistant", ""))
    return out or _span_output(span)


def _messages(span: SpanRecord) -> list[tuple[str, str, Any]]:
    """(role, text, structured payload or None) for every input message of a generator span."""
    attrs = span.attributes
    out: list[tuple[str, str, Any]] = []
    instructions = _genai_messages(attrs.get(sc.GEN_AI_SYSTEM_INSTRUCTIONS), default_role="system")
    out.extend(instructions)
    for reader in (
        lambda: _flattened_messages(attrs, sc.LLM_INPUT_MESSAGES_PREFIX),
        lambda: _genai_messages(attrs.get(sc.GEN_AI_INPUT_MESSAGES)),
        lambda: _flattened_messages(attrs, sc.GEN_AI_PROMPT_PREFIX),
    ):
        found = reader()
        if found:
            out.extend(found)
            break
    return out


def _flattened_messages(attrs: Mapping[str, AttrValue], prefix: str) -> list[tuple[str, str, Any]]:
    """``llm.input_messages.{i}.message.{role,content}`` and ``gen_ai.prompt.{i}.{role,content}``."""
    raw = _indexed_fields(attrs, prefix + ".", "")
    rows = {i: {k.removeprefix("message."): v for k, v in f.items()} for i, f in raw.items()}
    out: list[tuple[str, str, Any]] = []
    for index in sorted(rows):
        text = _str(rows[index].get("content"))
        if text:
            out.append(((_str(rows[index].get("role")) or "").lower(), text, _maybe_json(text)))
    return out


def _genai_messages(value: AttrValue, default_role: str = "") -> list[tuple[str, str, Any]]:
    """OTel GenAI ``[{"role", "parts": [{"type": "text", "content"}, ...]}]`` (or OpenAI-style
    ``{"role", "content"}``), as JSON text or a decoded list."""
    parsed = _maybe_json(value)
    if isinstance(parsed, dict):
        parsed = [parsed]
    if not isinstance(parsed, list):
        return []
    out: list[tuple[str, str, Any]] = []
    for message in parsed:
        if isinstance(message, str):
            out.append((default_role, message, None))
            continue
        if not isinstance(message, dict):
            continue
        if "type" in message and "role" not in message:  # a bare part (system_instructions)
            message = {"role": default_role, "parts": [message]}
        role = (_str(message.get("role")) or default_role).lower()
        parts = message.get("parts")
        if not isinstance(parts, list):
            content = message.get("content")
            parts = content if isinstance(content, list) else [{"type": "text", "content": content}]
        for part in parts:
            if isinstance(part, str):
                out.append((role, part, _maybe_json(part)))
                continue
            if not isinstance(part, dict):
                continue
            if "response" in part or "result" in part:  # tool_call_response
                payload = _maybe_json(part.get("response", part.get("result")))
                text = payload if isinstance(payload, str) else _json_text(payload)
                if text:
                    out.append(("tool", text, payload))
                continue
            text = _str(part.get("content")) or _str(part.get("text"))
            if text:
                out.append((role, text, _maybe_json(text)))
    return out


def _last_message(messages: list[tuple[str, str, Any]], roles: tuple[str, ...]) -> str | None:
    for role, text, _ in reversed(messages):
        if role in roles or (not role and "" in roles):
            return text
    return None


def _fill_from_messages(docs: list[Document], messages: list[tuple[str, str, Any]],
                        question: str | None) -> list[Document]:
    """Ids-only documents (OTel GenAI retrieval) get their text from the chat's messages."""
    by_id: dict[str, str] = {}
    for _, _, payload in messages:
        for found in _documents_from_json(payload) if payload is not None else []:
            if found.content:
                by_id.setdefault(found.id, found.content)
    if any(d.id in by_id for d in docs):
        return [_with_content(d, by_id.get(d.id)) for d in docs]
    chunks = _context_chunks(messages, question)
    if len(chunks) == len(docs):
        return [_with_content(d, text) for d, text in zip(docs, chunks, strict=True)]
    return docs


def _documents_from_messages(messages: list[tuple[str, str, Any]], question: str | None) -> list[Document]:
    """No retrieval span at all: documents passed to the model in tool results or context messages."""
    docs: list[Document] = []
    for role, _, payload in messages:
        if role == "tool" and payload is not None:
            docs.extend(_documents_from_json(payload))
    if not docs:
        docs = [Document(id=content_id(text), content=text) for text in _context_chunks(messages, question)
                if _looks_like_context(text)]
    return _dedupe_and_rank(docs)


def _looks_like_context(text: str) -> bool:
    # A one-line system prompt ("You are a helpful assistant.") is not retrieved context.
    return len(text) >= 200 or text.count("\n") >= 2


def _context_chunks(messages: list[tuple[str, str, Any]], question: str | None) -> list[str]:
    """Message texts that are neither the question nor the model's own turns."""
    chunks: list[str] = []
    last_user = _last_message(messages, ("user", "human"))
    for role, text, _ in messages:
        if role in ("assistant", "ai", "model"):
            continue
        if role in ("user", "human") and text == last_user and (question is None or text.strip() == question.strip()):
            continue
        chunks.append(text)
    return chunks


def _with_content(doc: Document, content: str | None) -> Document:
    if not content:
        return doc
    return Document(id=doc.id, content=content, score=doc.score, rank=doc.rank, metadata=doc.metadata)


# --- question / answer text ------------------------------------------------------------------------
def _span_input(span: SpanRecord) -> str | None:
    attrs = span.attributes
    return _text(attrs.get(sc.INPUT_VALUE), _QUESTION_KEYS) or _text(
        attrs.get(sc.TRACELOOP_ENTITY_INPUT), _QUESTION_KEYS)


def _span_output(span: SpanRecord) -> str | None:
    attrs = span.attributes
    return _text(attrs.get(sc.OUTPUT_VALUE), _ANSWER_KEYS) or _text(
        attrs.get(sc.TRACELOOP_ENTITY_OUTPUT), _ANSWER_KEYS)


def _first_text(values: Iterable[str | None]) -> str | None:
    for value in values:
        if value:
            return value
    return None


def _text(value: Any, keys: tuple[str, ...], depth: int = 0) -> str | None:
    """A human text from a value that may be JSON-wrapped: ``{"inputs": {"question": "..."}}``,
    ``{"choices": [{"message": {"content": "..."}}]}``, ``["query"]``, ..."""
    if depth > _MAX_DEPTH or value is None:
        return None
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "[") and len(stripped) <= _MAX_JSON_CHARS:
            try:
                parsed = json.loads(stripped)
            except (ValueError, RecursionError):
                return stripped or None
            return _text(parsed, keys, depth + 1)
        return stripped or None
    if isinstance(value, dict):
        value = _unwrap_serialized(value)
        if ("role" in value or "type" in value) and "content" in value:  # a chat message
            return _text(value["content"], keys, depth + 1)
        for key in keys:
            if key in value:
                found = _text(value[key], keys, depth + 1)
                if found:
                    return found
        if len(value) == 1:  # {"some_name": "..."}: the only value is the text
            return _text(next(iter(value.values())), keys, depth + 1)
        return None  # guessing among several unknown keys could return the question as the answer
    if isinstance(value, list):
        if not value:
            return None
        if all(isinstance(v, dict) and ("role" in v or "type" in v) and "content" in v for v in value):
            # chat messages (OpenAI "role", LangChain "type"): the last user / assistant turn
            wanted = ("user", "human") if keys is _QUESTION_KEYS else ("assistant", "ai", "model")
            for message in reversed(value):
                if str(message.get("role", message.get("type", ""))).lower() in wanted:
                    return _text(message.get("content"), keys, depth + 1)
            return None
        # question: the first positional argument; answer: the first choice/generation
        return _text(value[0], keys, depth + 1)
    return None


# --- errors and attributes ---------------------------------------------------------------------------
def _error_type(spans: Sequence[SpanRecord]) -> str | None:
    """``error.type`` (or the exception event's type) of the first-ending failed RAG span."""
    failed = sorted((s for s in spans if s.status_code == "ERROR"), key=lambda s: s.end_time_ns)
    for span in failed:
        value = _str(span.attributes.get(sc.ERROR_TYPE))
        if value:
            return value
        for event in span.events:
            if event.name == sc.EXCEPTION_EVENT:
                value = _str(event.attributes.get(sc.EXCEPTION_TYPE))
                if value:
                    return value
    return "_OTHER" if failed else None  # OTel's error.type fallback value


def _trace_attributes(view: _TraceView, generator: SpanRecord | None, doc_count: int) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def put(name: str, value: Any) -> None:
        if value not in (None, "", [], {}):
            out[name] = value

    model = _str(view.first_attr(sc.LLM_MODEL_NAME, sc.GEN_AI_RESPONSE_MODEL, sc.GEN_AI_REQUEST_MODEL,
                                 prefer=generator))
    if model is not None and model.lower() != sc.UNKNOWN_LABEL:  # OpenLLMetry writes "unknown"
        out[sc.LLM_MODEL_NAME] = model
    put(sc.LLM_PROMPT_TEMPLATE_VERSION, _str(view.first_attr(sc.LLM_PROMPT_TEMPLATE_VERSION)))
    put(sc.SESSION_ID, _str(view.first_attr(sc.SESSION_ID, sc.GEN_AI_CONVERSATION_ID,
                                            sc.TRACELOOP_ASSOCIATION_PREFIX + "session_id")))
    put(sc.USER_ID, _str(view.first_attr(sc.USER_ID, sc.ENDUSER_ID,
                                         sc.TRACELOOP_ASSOCIATION_PREFIX + "user_id")))
    tags = view.first_attr(sc.TAG_TAGS)
    put(sc.TAG_TAGS, [str(t) for t in tags] if isinstance(tags, list) else _str(tags))
    # feedback may come on a later span (a feedback call): the latest-ending one wins
    for span in sorted(view.spans, key=lambda s: s.end_time_ns, reverse=True):
        feedback = span.attributes.get(sc.RAGMON_FEEDBACK)
        if isinstance(feedback, str | int | float) and not isinstance(feedback, bool):
            put(sc.RAGMON_FEEDBACK, feedback)
            break
    truncated = view.first_attr(sc.RAGMON_TRUNCATED_FIELDS)
    if isinstance(truncated, list):
        put(sc.RAGMON_TRUNCATED_FIELDS, [str(t) for t in truncated])
    if any(_bool(s.attributes.get(sc.RAGMON_REDACTED)) for s in view.spans):
        out[sc.RAGMON_REDACTED] = True
    declared = _int(view.first_attr(sc.RAGMON_DOCUMENT_COUNT))
    if declared > 0:
        out[sc.RAGMON_DOCUMENT_COUNT] = declared  # > len(documents) means documents were lost on the way
    elif doc_count:
        out[sc.RAGMON_DOCUMENT_COUNT] = doc_count
    return out


# --- small, forgiving converters ----------------------------------------------------------------------
def _envelope_s(spans: Iterable[SpanRecord]) -> float:
    spans = list(spans)
    return max(0, max(s.end_time_ns for s in spans) - min(s.start_time_ns for s in spans)) / 1e9


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "[") and len(stripped) <= _MAX_JSON_CHARS:
            try:
                return json.loads(stripped)
            except (ValueError, RecursionError):
                return value
    return value


def _json_text(value: Any) -> str | None:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return None


def _str(value: Any) -> str | None:
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace") or None
    return None


def _id(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str | int | bytes) or (isinstance(value, float) and math.isfinite(value)):
        text = _str(value)
        return text.strip() if text else None
    return None


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        result = float(value)
    except (TypeError, ValueError):
        return None
    return result if math.isfinite(result) else None


def _int(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return 0


def _bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
    if isinstance(value, int):
        return bool(value)
    return None


def _metadata(value: Any) -> Mapping[str, Any] | None:
    parsed = _maybe_json(value)
    if isinstance(parsed, dict) and parsed:
        return parsed
    return None


def _at(value: Any, index: int) -> Any:
    return value[index] if isinstance(value, list) and index < len(value) else None
