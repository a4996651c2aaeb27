"""``build_rag_trace``: the readers of this package put together into one ``RagTrace``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

from ... import semconv as sc
from ...doc_ids import SOURCE_HASH_CHARS, SOURCE_MARK, content_id
from ...types import Document, RagTrace, SpanRecord
from ._documents import Keys, dedupe_and_rank, reranker_documents, span_documents
from ._messages import (
    Message,
    documents_from_messages,
    fill_from_messages,
    generator_output,
    input_messages,
    last_message,
)
from ._settings import DEFAULT_SETTINGS, ExtractSettings
from ._text import QUESTION_KEYS, find_text, first_text, span_input, span_output
from ._values import to_bool, to_int, to_str
from ._view import ROLE_GENERATOR, ROLE_RERANKER, ROLE_RETRIEVER, Group, TraceView


def build_rag_trace(spans: Sequence[SpanRecord], *, complete: bool,
                    settings: ExtractSettings | None = None) -> RagTrace:
    """Assemble one ``RagTrace`` from all spans of one trace (any order).

    ``settings`` (pipeline naming, document-id keys) default to :data:`DEFAULT_SETTINGS`."""
    if not spans:
        raise ValueError("build_rag_trace needs at least one span")
    settings = settings or DEFAULT_SETTINGS
    keys = settings.doc_id_keys
    view = TraceView(spans)
    trace_id = spans[0].trace_id

    pipeline_spans = view.pipeline_candidates()
    retriever_groups = view.groups(ROLE_RETRIEVER)
    reranker_groups = view.groups(ROLE_RERANKER)
    generator_groups = view.groups(ROLE_GENERATOR)

    documents, retrieval_query = _retrieval_documents(retriever_groups, reranker_groups, keys)
    retrieval_heads = [g.head for g in retriever_groups + reranker_groups]
    retrieval_latency = _envelope_s(retrieval_heads) if retrieval_heads else None

    generator, generator_data = _choose_generator(generator_groups)
    messages: list[Message] = []
    if generator is not None and generator_data is not None:
        # the prompt may sit on another member of the group than the answer (a framework's LLM
        # span around the client library's span): first the data span, then the others
        for member in [generator_data, *generator.members]:
            messages = input_messages(member)
            if messages:
                break

    question = first_text(span_input(s) for s in pipeline_spans) or retrieval_query
    if not question:
        question = last_message(messages, ("user", "human"))
    answer = first_text(span_output(s) for s in pipeline_spans)
    if not answer and generator_data is not None:
        answer = generator_output(generator_data)
    contexts_source = sc.CONTEXTS_RETRIEVAL if any(d.content for d in documents) else sc.CONTEXTS_NONE
    if documents and all(d.content is None for d in documents) and messages:
        documents, contexts_source = fill_from_messages(documents, messages, question, keys)
    elif not documents and messages and not retriever_groups:
        documents, contexts_source = documents_from_messages(messages, question, keys)

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
    attributes = _trace_attributes(view, generator_data, len(documents))
    attributes[sc.RAGMON_CONTEXTS_SOURCE] = contexts_source
    for name, text in ((sc.RAGMON_QUESTION_FROM, question), (sc.RAGMON_ANSWER_FROM, answer)):
        origin = _read_from(rag_spans or spans, text)
        if origin is not None:
            attributes[name] = origin
    # Only RAG requests are judged: index building, embedding batches, a late feedback span ...
    # hold no retrieval, reranking, generation or ragmon pipeline span.
    if not (retriever_groups or reranker_groups or generator_groups or documents or view.declares_pipeline()):
        attributes[sc.RAGMON_NOT_RAG] = True
    return RagTrace(
        trace_id=trace_id,
        service=view.service(),
        pipeline=settings.rename_pipeline(view.pipeline_name(settings.pipeline_attribute)),
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
        attribute_limit_hit=any(to_int(s.dropped_attributes_count) > 0 for s in spans),
        span_count=len(spans),
        attributes=attributes,
    )


def _retrieval_documents(
    retriever_groups: list[Group], reranker_groups: list[Group], keys: Keys
) -> tuple[list[Document], str | None]:
    query: str | None = None
    found: list[Document] = []
    for group in retriever_groups:
        docs, data_span = best_documents(group, partial(span_documents, keys=keys))
        found.extend(docs)
        if query is None:
            for span in ([data_span] if data_span else []) + group.members:
                query = _retrieval_query(span)
                if query:
                    break
    for group in reranker_groups:
        reranked, data_span = best_documents(group, partial(reranker_documents, keys=keys))
        if reranked:
            found = reranked  # what the generator actually saw
        if query is None and data_span is not None:
            query = find_text(data_span.attributes.get(sc.RERANKER_QUERY), QUESTION_KEYS)
    return dedupe_and_rank(found), query


def best_documents(
    group: Group, reader: Callable[[SpanRecord], list[Document]]
) -> tuple[list[Document], SpanRecord | None]:
    best: list[Document] = []
    best_span: SpanRecord | None = None
    best_key: tuple[int, ...] = (-1,)
    for span in group.members:
        docs = reader(span)
        key = (
            len(docs),
            sum(d.content is not None for d in docs),
            sum(d.score is not None for d in docs),
            sum(not _derived_id(d) for d in docs),  # the store's own ids
        )
        if docs and key > best_key:
            best, best_span, best_key = docs, span, key
    return best, best_span


def _derived_id(doc: Document) -> bool:
    """The id was made up from the text (a content hash, or ``source#<hash8>``)."""
    if doc.content is None:
        return False
    digest = content_id(doc.content)
    return doc.id == digest or doc.id.endswith(SOURCE_MARK + digest[:SOURCE_HASH_CHARS])


def _retrieval_query(span: SpanRecord) -> str | None:
    attrs = span.attributes
    return (
        find_text(attrs.get(sc.INPUT_VALUE), QUESTION_KEYS)
        or find_text(attrs.get(sc.GEN_AI_RETRIEVAL_QUERY_TEXT), QUESTION_KEYS)
        or find_text(attrs.get(sc.TRACELOOP_ENTITY_INPUT), QUESTION_KEYS)
    )


def _choose_generator(groups: list[Group]) -> tuple[Group | None, SpanRecord | None]:
    """The last-ending group that produced text; its member holding the text."""
    if not groups:
        return None, None
    for group in sorted(groups, key=lambda g: g.head.end_time_ns, reverse=True):
        for member in sorted(group.members, key=lambda s: s.end_time_ns, reverse=True):
            if generator_output(member):
                return group, member
    last = max(groups, key=lambda g: g.head.end_time_ns)
    return last, last.head


def _error_type(spans: Sequence[SpanRecord]) -> str | None:
    """``error.type`` (or the exception event's type) of the first-ending failed RAG span."""
    failed = sorted((s for s in spans if s.status_code == "ERROR"), key=lambda s: s.end_time_ns)
    for span in failed:
        value = to_str(span.attributes.get(sc.ERROR_TYPE))
        if value:
            return value
        for event in span.events:
            if event.name == sc.EXCEPTION_EVENT:
                value = to_str(event.attributes.get(sc.EXCEPTION_TYPE))
                if value:
                    return value
    return "_OTHER" if failed else None  # OTel's error.type fallback value


def _trace_attributes(view: TraceView, generator: SpanRecord | None, doc_count: int) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def put(name: str, value: Any) -> None:
        if value not in (None, "", [], {}):
            out[name] = value

    model = to_str(view.first_attr(sc.LLM_MODEL_NAME, sc.GEN_AI_RESPONSE_MODEL, sc.GEN_AI_REQUEST_MODEL,
                                   prefer=generator))
    if model is not None and model.lower() != sc.UNKNOWN_LABEL:  # OpenLLMetry writes "unknown"
        out[sc.LLM_MODEL_NAME] = model
    put(sc.LLM_PROMPT_TEMPLATE_VERSION, to_str(view.first_attr(sc.LLM_PROMPT_TEMPLATE_VERSION)))
    put(sc.SESSION_ID, to_str(view.first_attr(sc.SESSION_ID, sc.GEN_AI_CONVERSATION_ID,
                                              sc.TRACELOOP_ASSOCIATION_PREFIX + "session_id")))
    put(sc.USER_ID, to_str(view.first_attr(sc.USER_ID, sc.ENDUSER_ID,
                                           sc.TRACELOOP_ASSOCIATION_PREFIX + "user_id")))
    tags = view.first_attr(sc.TAG_TAGS)
    put(sc.TAG_TAGS, [str(t) for t in tags] if isinstance(tags, list) else to_str(tags))
    # feedback may come on a later span (a feedback call): the latest-ending one wins
    for span in sorted(view.spans, key=lambda s: s.end_time_ns, reverse=True):
        feedback = span.attributes.get(sc.RAGMON_FEEDBACK)
        if isinstance(feedback, str | int | float) and not isinstance(feedback, bool):
            put(sc.RAGMON_FEEDBACK, feedback)
            break
    truncated = view.first_attr(sc.RAGMON_TRUNCATED_FIELDS)
    if isinstance(truncated, list):
        put(sc.RAGMON_TRUNCATED_FIELDS, [str(t) for t in truncated])
    if any(to_bool(s.attributes.get(sc.RAGMON_REDACTED)) for s in view.spans):
        out[sc.RAGMON_REDACTED] = True
    declared = to_int(view.first_attr(sc.RAGMON_DOCUMENT_COUNT))
    if declared > 0:
        out[sc.RAGMON_DOCUMENT_COUNT] = declared  # > len(documents) means documents were lost on the way
    elif doc_count:
        out[sc.RAGMON_DOCUMENT_COUNT] = doc_count
    return out


def _read_from(spans: Sequence[SpanRecord], text: str | None) -> str | None:
    """``"<span name>: <attribute>"`` of the first string attribute holding ``text`` (the trace
    inspector's provenance); None when not found. Long values are not searched (bounded cost)."""
    if not text:
        return None
    for span in spans:
        for key, value in span.attributes.items():
            if isinstance(value, str) and (value == text or (len(value) <= _MAX_SEARCHED_CHARS and text in value)):
                return f"{span.name}: {key}"
    return None


_MAX_SEARCHED_CHARS = 64 * 1024


def _envelope_s(spans: Iterable[SpanRecord]) -> float:
    spans = list(spans)
    return max(0, max(s.end_time_ns for s in spans) - min(s.start_time_ns for s in spans)) / 1e9
