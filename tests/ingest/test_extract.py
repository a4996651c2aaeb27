"""RagTrace extraction from what real instrumentation sends. Every trace here is made with the
real OpenTelemetry SDK (attribute sets as each convention family writes them), encoded to OTLP
protobuf and decoded by ragmon before extraction."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from opentelemetry import trace as trace_api
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from ragmon import semconv as sc
from ragmon.doc_ids import source_chunk_id
from ragmon.ingest.extract import build_rag_trace, content_id
from ragmon.types import RagTrace
from tests.ingest.otel_helpers import SpanFactory

MS = 1_000_000
T0 = 1_750_000_000_000 * MS  # a fixed epoch in ns so latencies are exact


class TraceBuilder:
    """Spans with explicit start/end times (ms after T0), parented explicitly."""

    def __init__(self, service: str = "support-bot", **kw: Any) -> None:
        self.factory = SpanFactory(service, **kw)

    @contextmanager
    def span(self, name: str, start_ms: float, end_ms: float, parent: Span | None = None,
             kind: SpanKind = SpanKind.INTERNAL, **attributes: Any) -> Iterator[Span]:
        context = trace_api.set_span_in_context(parent) if parent is not None else None
        span = self.factory.tracer.start_span(name, context=context, kind=kind, attributes=attributes,
                                              start_time=T0 + int(start_ms * MS))
        try:
            yield span
        finally:
            span.end(end_time=T0 + int(end_ms * MS))

    def build(self, *, complete: bool = True, drop: tuple[str, ...] = ()) -> RagTrace:
        records = [r for r in self.factory.records() if r.name not in drop]
        return build_rag_trace(records, complete=complete)


def oi_docs(docs: list[tuple[str, str, float]], prefix: str = "retrieval.documents") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, (doc_id, content, score) in enumerate(docs):
        out[f"{prefix}.{i}.document.id"] = doc_id
        out[f"{prefix}.{i}.document.content"] = content
        out[f"{prefix}.{i}.document.score"] = score
        out[f"{prefix}.{i}.document.metadata"] = json.dumps({"source": f"{doc_id}.md"})
    return out


DOCS = [("kb-1", "Passwords are reset from the account page.", 0.91),
        ("kb-2", "Reset links expire after 24 hours.", 0.72),
        ("kb-3", "Billing questions go to finance.", 0.15)]
QUESTION = "How do I reset my password?"
ANSWER = "Open the account page and use the reset link within 24 hours."


# --- ragmon's own SDK (OpenInference + ragmon.*) -----------------------------------------------
def test_ragmon_sdk_trace() -> None:
    b = TraceBuilder()
    with b.span("rag", 0, 900, **{sc.SPAN_KIND: "CHAIN", sc.RAGMON_STAGE: "pipeline",
                                  sc.RAGMON_PIPELINE: "faq", sc.INPUT_VALUE: QUESTION,
                                  sc.OUTPUT_VALUE: ANSWER, sc.SESSION_ID: "s-1", sc.USER_ID: "u-9",
                                  sc.RAGMON_CONTENT_SAMPLED: True, sc.TAG_TAGS: ["beta"]}) as root:
        with b.span("search", 10, 130, root, **{sc.SPAN_KIND: "RETRIEVER", sc.RAGMON_STAGE: "retriever",
                                                sc.INPUT_VALUE: QUESTION, sc.RAGMON_DOCUMENT_COUNT: 3,
                                                **oi_docs(DOCS)}):
            pass
        with b.span("answer", 140, 880, root, **{sc.SPAN_KIND: "LLM", sc.RAGMON_STAGE: "generator",
                                                 sc.LLM_MODEL_NAME: "gpt-4o-mini",
                                                 sc.LLM_PROMPT_TEMPLATE_VERSION: "v7",
                                                 sc.OUTPUT_VALUE: ANSWER}):
            pass
    t = b.build()
    assert (t.service, t.pipeline) == ("support-bot", "faq")
    assert (t.question, t.answer) == (QUESTION, ANSWER)
    assert [(d.id, d.content, d.score, d.rank) for d in t.documents] == [
        (doc_id, content, score, rank) for rank, (doc_id, content, score) in enumerate(DOCS)]
    assert t.documents[0].metadata == {"source": "kb-1.md"}
    assert t.retrieval_latency_s == pytest.approx(0.120)
    assert t.generation_latency_s == pytest.approx(0.740)
    assert t.pipeline_latency_s == pytest.approx(0.900)
    assert t.start_time_ns == T0
    assert t.complete and t.content_sampled and not t.attribute_limit_hit
    assert t.error_type is None
    assert t.span_count == 3
    assert t.top_retrieval_score == pytest.approx(0.91)
    assert dict(t.attributes) == {
        sc.LLM_MODEL_NAME: "gpt-4o-mini", sc.LLM_PROMPT_TEMPLATE_VERSION: "v7", sc.SESSION_ID: "s-1",
        sc.USER_ID: "u-9", sc.TAG_TAGS: ["beta"], sc.RAGMON_DOCUMENT_COUNT: 3,
        sc.RAGMON_CONTEXTS_SOURCE: sc.CONTEXTS_RETRIEVAL,
        # where the question and answer were read from (the trace inspector's "sources")
        sc.RAGMON_QUESTION_FROM: f"rag: {sc.INPUT_VALUE}", sc.RAGMON_ANSWER_FROM: f"rag: {sc.OUTPUT_VALUE}"}


def test_content_rate_left_text_off() -> None:
    b = TraceBuilder()
    with b.span("rag", 0, 500, **{sc.RAGMON_STAGE: "pipeline", sc.RAGMON_PIPELINE: "faq",
                                  sc.RAGMON_CONTENT_SAMPLED: False}) as root, \
            b.span("search", 5, 55, root, **{sc.RAGMON_STAGE: "retriever", sc.SPAN_KIND: "RETRIEVER",
                                            "retrieval.documents.0.document.id": "kb-1",
                                            "retrieval.documents.0.document.score": 0.4}):
        pass
    t = b.build()
    assert t.content_sampled is False
    assert t.question is None and t.answer is None
    assert [(d.id, d.content, d.score) for d in t.documents] == [("kb-1", None, 0.4)]
    assert t.retrieval_latency_s == pytest.approx(0.05)
    assert t.contexts == []


def test_feedback_and_errors_from_ragmon_spans() -> None:
    b = TraceBuilder()
    with b.span("rag", 0, 300, **{sc.RAGMON_STAGE: "pipeline", sc.INPUT_VALUE: QUESTION}) as root:
        with b.span("search", 5, 250, root, **{sc.RAGMON_STAGE: "retriever", sc.SPAN_KIND: "RETRIEVER"}) as s:
            s.record_exception(TimeoutError("vector store timed out"))
            s.set_status(Status(StatusCode.ERROR, "vector store timed out"))
        root.set_status(Status(StatusCode.ERROR))
        root.set_attribute(sc.ERROR_TYPE, "RetrievalFailed")
    with b.span("feedback", 400, 401, root, **{sc.RAGMON_FEEDBACK: "negative"}):
        pass
    t = b.build()
    assert t.error_type == "TimeoutError"  # the first-ending failed RAG span is the cause
    assert t.attributes[sc.RAGMON_FEEDBACK] == "negative"
    assert t.documents == () and t.answer is None
    assert t.retrieval_latency_s == pytest.approx(0.245)


def test_error_type_attribute_wins_and_non_rag_errors_are_ignored() -> None:
    b = TraceBuilder()
    with b.span("rag", 0, 300, **{sc.RAGMON_STAGE: "pipeline", sc.INPUT_VALUE: QUESTION}) as root:
        with b.span("http GET", 1, 2, root) as http:  # an auxiliary span, not a RAG stage
            http.set_status(Status(StatusCode.ERROR))
        with b.span("answer", 10, 200, root, **{sc.SPAN_KIND: "LLM", sc.ERROR_TYPE: "RateLimitError"}) as llm:
            llm.record_exception(ValueError("wrapped"))
            llm.set_status(Status(StatusCode.ERROR))
    assert b.build().error_type == "RateLimitError"

    ok = TraceBuilder()
    with ok.span("rag", 0, 300, **{sc.RAGMON_STAGE: "pipeline"}) as root, \
            ok.span("http GET", 1, 2, root) as http:
        http.set_status(Status(StatusCode.ERROR))
    assert ok.build().error_type is None


def test_attribute_limit_is_noticed() -> None:
    b = TraceBuilder(max_attributes=128)  # the SDK default OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT
    many = [(f"kb-{i}", f"document number {i}", 1 - i / 100) for i in range(40)]
    with b.span("rag", 0, 100, **{sc.RAGMON_STAGE: "pipeline", sc.INPUT_VALUE: QUESTION}) as root, \
            b.span("search", 1, 50, root, **{sc.SPAN_KIND: "RETRIEVER", **oi_docs(many)}) as search:
        search.set_attribute(sc.RAGMON_DOCUMENT_COUNT, 40)  # newest attribute: survives eviction
    t = b.build()
    assert t.attribute_limit_hit is True
    # The SDK evicts the oldest attributes first, the span kind among them: the retriever is
    # still recognised by its documents, and the survivors are kept.
    assert 0 < len(t.documents) < 40
    assert t.documents[-1].id == "kb-39"
    assert t.retrieval_latency_s == pytest.approx(0.049)
    assert t.attributes[sc.RAGMON_DOCUMENT_COUNT] == 40  # what was retrieved, not what survived


# --- OpenInference framework instrumentors ---------------------------------------------------------
def test_openinference_langchain_nested_retrievers_and_llms() -> None:
    b = TraceBuilder()
    with b.span("RetrievalQA", 0, 2000, **{sc.SPAN_KIND: "CHAIN",
                                           sc.INPUT_VALUE: json.dumps({"query": QUESTION}),
                                           sc.INPUT_MIME_TYPE: "application/json",
                                           sc.OUTPUT_VALUE: json.dumps({"query": QUESTION, "result": ANSWER}),
                                           sc.OUTPUT_MIME_TYPE: "application/json"}) as root:
        with b.span("VectorStoreRetriever", 10, 310, root, **{sc.SPAN_KIND: "RETRIEVER",  # noqa: SIM117 (the span tree)
                                                               sc.INPUT_VALUE: QUESTION}) as outer:
            with b.span("retrieve", 20, 300, outer, **{sc.SPAN_KIND: "RETRIEVER", sc.INPUT_VALUE: QUESTION,
                                                       **oi_docs(DOCS)}):
                pass
        with b.span("StuffDocumentsChain", 320, 1990, root, **{sc.SPAN_KIND: "CHAIN"}) as stuff:  # noqa: SIM117 (the span tree)
            with b.span("ChatOpenAI", 330, 1980, stuff, **{
                sc.SPAN_KIND: "LLM", sc.LLM_MODEL_NAME: "gpt-4o",
                "llm.input_messages.0.message.role": "system",
                "llm.input_messages.0.message.content": "Use the context: ...",
                "llm.input_messages.1.message.role": "user",
                "llm.input_messages.1.message.content": QUESTION}) as llm:
                with b.span("openai.chat", 340, 1970, llm, **{
                    sc.SPAN_KIND: "LLM", sc.LLM_MODEL_NAME: "gpt-4o-2024-08-06",
                    "llm.output_messages.0.message.role": "assistant",
                    "llm.output_messages.0.message.content": ANSWER}):
                    pass
    t = b.build()
    assert len(t.documents) == 3  # one retriever group: the documents are not counted twice
    assert [d.id for d in t.documents] == ["kb-1", "kb-2", "kb-3"]
    assert t.retrieval_latency_s == pytest.approx(0.300)  # outermost retriever
    assert t.generation_latency_s == pytest.approx(1.650)  # outermost LLM
    assert t.question == QUESTION and t.answer == ANSWER  # unwrapped from the root's JSON
    assert t.pipeline == "RetrievalQA"
    assert t.attributes[sc.LLM_MODEL_NAME] == "gpt-4o-2024-08-06"  # from the span that answered


def test_nested_retrievers_both_carrying_documents_count_once() -> None:
    b = TraceBuilder()
    with b.span("query", 0, 500, **{sc.SPAN_KIND: "CHAIN", sc.INPUT_VALUE: QUESTION}) as root, \
            b.span("retriever", 0, 200, root, **{sc.SPAN_KIND: "RETRIEVER", **oi_docs(DOCS[:2])}) as outer, \
            b.span("retriever.inner", 5, 190, outer, **{sc.SPAN_KIND: "RETRIEVER", **oi_docs(DOCS)}):
        pass
    t = b.build()
    assert [d.id for d in t.documents] == ["kb-1", "kb-2", "kb-3"]  # the member holding the most
    assert t.retrieval_latency_s == pytest.approx(0.2)


def test_reranker_documents_replace_retrieved_ones() -> None:
    b = TraceBuilder()
    with b.span("query", 0, 1000, **{sc.SPAN_KIND: "CHAIN", sc.INPUT_VALUE: QUESTION,
                                     sc.OUTPUT_VALUE: ANSWER}) as root:
        with b.span("retrieve", 0, 100, root, **{sc.SPAN_KIND: "RETRIEVER", **oi_docs(DOCS)}):
            pass
        with b.span("rerank", 100, 180, root, **{
                sc.SPAN_KIND: "RERANKER", sc.RERANKER_QUERY: QUESTION,
                **oi_docs(DOCS, prefix="reranker.input_documents"),
                **oi_docs([("kb-2", DOCS[1][1], 0.99), ("kb-1", DOCS[0][1], 0.97)],
                          prefix="reranker.output_documents")}):
            pass
    t = b.build()
    assert [(d.id, d.score, d.rank) for d in t.documents] == [("kb-2", 0.99, 0), ("kb-1", 0.97, 1)]
    assert t.retrieval_latency_s == pytest.approx(0.180)  # retrieval + reranking


def test_hybrid_retrievers_are_merged_without_duplicates() -> None:
    b = TraceBuilder()
    with b.span("query", 0, 1000, **{sc.SPAN_KIND: "CHAIN", sc.INPUT_VALUE: QUESTION}) as root:
        with b.span("bm25", 10, 60, root, **{sc.SPAN_KIND: "RETRIEVER", **oi_docs(DOCS[:2])}):
            pass
        with b.span("dense", 10, 140, root, **{sc.SPAN_KIND: "RETRIEVER", **oi_docs(DOCS[1:])}):
            pass
    t = b.build()
    assert [(d.id, d.rank) for d in t.documents] == [("kb-1", 0), ("kb-2", 1), ("kb-3", 2)]
    assert t.retrieval_latency_s == pytest.approx(0.130)  # envelope: parallel retrievers once


def test_query_rewriting_llm_is_not_the_generator() -> None:
    b = TraceBuilder()
    with b.span("query", 0, 1500, **{sc.SPAN_KIND: "CHAIN", sc.INPUT_VALUE: QUESTION}) as root:
        with b.span("rewrite", 0, 200, root, **{sc.SPAN_KIND: "LLM",
                                                sc.OUTPUT_VALUE: "password reset procedure"}):
            pass
        with b.span("retrieve", 200, 300, root, **{sc.SPAN_KIND: "RETRIEVER",
                                                   sc.INPUT_VALUE: "password reset procedure",
                                                   **oi_docs(DOCS)}):
            pass
        with b.span("answer", 300, 1400, root, **{
                sc.SPAN_KIND: "LLM",
                sc.OUTPUT_VALUE: json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": ANSWER}}]}),
                sc.OUTPUT_MIME_TYPE: "application/json"}):
            pass
    t = b.build()
    assert t.question == QUESTION  # the user's question, not the rewritten query
    assert t.answer == ANSWER  # unwrapped from the chat completion JSON
    assert t.generation_latency_s == pytest.approx(1.1)


def test_root_internal_unset_with_text_only_on_children() -> None:
    b = TraceBuilder()
    with b.span("POST /ask", 0, 1200, kind=SpanKind.SERVER, **{"http.route": "/ask"}) as root:  # noqa: SIM117 (the span tree)
        with b.span("rag_chain", 5, 1190, root, **{sc.SPAN_KIND: "CHAIN"}) as chain:
            with b.span("search", 10, 100, chain, **{sc.SPAN_KIND: "RETRIEVER", sc.INPUT_VALUE: QUESTION,
                                                     **oi_docs(DOCS)}):
                pass
            with b.span("llm", 110, 1100, chain, **{sc.SPAN_KIND: "LLM",
                                                    "llm.output_messages.0.message.role": "assistant",
                                                    "llm.output_messages.0.message.content": ANSWER}):
                pass
    t = b.build()
    assert t.question == QUESTION  # from the retriever's input
    assert t.answer == ANSWER  # from the LLM's output messages
    assert t.pipeline == "POST /ask"
    assert t.pipeline_latency_s == pytest.approx(1.2)
    assert t.error_type is None


def test_retriever_without_generator_still_yields_documents_and_latency() -> None:
    b = TraceBuilder()
    with b.span("search_api", 0, 90, **{sc.RAGMON_STAGE: "pipeline", sc.RAGMON_PIPELINE: "search",
                                        sc.INPUT_VALUE: QUESTION}) as root, \
            b.span("search", 5, 85, root, **{sc.SPAN_KIND: "RETRIEVER", **oi_docs(DOCS)}):
        pass
    t = b.build()
    assert len(t.documents) == 3 and t.retrieval_latency_s == pytest.approx(0.08)
    assert t.answer is None and t.generation_latency_s is None
    assert t.content_sampled is True


def test_missing_root_uses_the_span_envelope() -> None:
    b = TraceBuilder()
    with b.span("rag", 0, 2000, **{sc.SPAN_KIND: "CHAIN"}) as root:
        with b.span("search", 100, 300, root, **{sc.SPAN_KIND: "RETRIEVER", sc.INPUT_VALUE: QUESTION,
                                                 **oi_docs(DOCS)}):
            pass
        with b.span("llm", 400, 900, root, **{sc.SPAN_KIND: "LLM", sc.OUTPUT_VALUE: ANSWER}):
            pass
    t = b.build(complete=False, drop=("rag",))
    assert t.complete is False
    assert t.pipeline_latency_s == pytest.approx(0.8)  # first start -> last end of what arrived
    assert t.start_time_ns == T0 + 100 * MS
    assert t.pipeline == "search"  # the earliest top-level span that arrived
    assert (t.question, t.answer) == (QUESTION, ANSWER)


# --- OpenLLMetry (Traceloop) -----------------------------------------------------------------------
LC_DOCS = [{"page_content": DOCS[0][1], "metadata": {"source": "account.md"}, "type": "Document"},
           {"page_content": DOCS[1][1], "metadata": {"source": "links.md"}, "type": "Document"}]


@pytest.mark.parametrize("output", [
    json.dumps({"outputs": LC_DOCS, "kwargs": {"tags": []}}),
    json.dumps(LC_DOCS),
    json.dumps({"outputs": [{"lc": 1, "type": "constructor", "id": ["langchain", "schema", "Document"],
                             "kwargs": d} for d in LC_DOCS]}),
], ids=["outputs-wrapper", "bare-list", "lc-serialized"])
def test_openllmetry_langchain(output: str) -> None:
    b = TraceBuilder()
    with b.span("qa_chain.workflow", 0, 1500, **{
            sc.TRACELOOP_SPAN_KIND: "workflow", sc.TRACELOOP_WORKFLOW_NAME: "qa_chain",
            sc.TRACELOOP_ENTITY_NAME: "qa_chain",
            sc.TRACELOOP_ENTITY_INPUT: json.dumps({"inputs": {"question": QUESTION}, "tags": [],
                                                   "metadata": {}, "kwargs": {"name": "qa_chain"}}),
            sc.TRACELOOP_ENTITY_OUTPUT: json.dumps({"outputs": {"answer": ANSWER}, "kwargs": {}}),
            "traceloop.association.properties.session_id": "sess-42"}) as root:
        with b.span("VectorStoreRetriever.task", 10, 210, root, **{
                sc.TRACELOOP_SPAN_KIND: "task", sc.TRACELOOP_WORKFLOW_NAME: "qa_chain",
                sc.GEN_AI_OPERATION_NAME: "vector_db_retrieve",
                sc.TRACELOOP_ENTITY_INPUT: json.dumps({"args": [QUESTION], "kwargs": {}}),
                sc.TRACELOOP_ENTITY_OUTPUT: output}):
            pass
        with b.span("openai.chat", 220, 1490, root, kind=SpanKind.CLIENT, **{
                sc.LLM_REQUEST_TYPE: "chat", "gen_ai.system": "openai",
                sc.GEN_AI_REQUEST_MODEL: "gpt-4o-mini", sc.GEN_AI_RESPONSE_MODEL: "gpt-4o-mini-2024-07-18",
                "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": "Context: ...",
                "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": QUESTION,
                "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": ANSWER}):
            pass
    t = b.build()
    assert t.pipeline == "qa_chain"
    assert (t.question, t.answer) == (QUESTION, ANSWER)
    # no ids: the source file names each chunk, made distinct by its text (ragmon.doc_ids)
    assert [(d.id, d.content, d.score) for d in t.documents] == [
        (source_chunk_id("account.md", DOCS[0][1]), DOCS[0][1], None),
        (source_chunk_id("links.md", DOCS[1][1]), DOCS[1][1], None)]
    assert t.documents[0].id == "account.md#" + content_id(DOCS[0][1])[:8]
    assert t.documents[0].metadata == {"source": "account.md"}
    assert t.retrieval_latency_s == pytest.approx(0.2)
    assert t.generation_latency_s == pytest.approx(1.27)
    assert t.attributes[sc.LLM_MODEL_NAME] == "gpt-4o-mini-2024-07-18"
    assert t.attributes[sc.SESSION_ID] == "sess-42"


def test_openllmetry_with_content_tracing_off() -> None:
    b = TraceBuilder()
    with b.span("qa_chain.workflow", 0, 1000, **{sc.TRACELOOP_SPAN_KIND: "workflow",
                                                 sc.TRACELOOP_WORKFLOW_NAME: "qa_chain"}) as root:
        with b.span("VectorStoreRetriever.task", 10, 110, root, **{
                sc.TRACELOOP_SPAN_KIND: "task", sc.GEN_AI_OPERATION_NAME: "vector_db_retrieve"}):
            pass
        with b.span("openai.chat", 120, 990, root, **{sc.LLM_REQUEST_TYPE: "chat",
                                                      sc.GEN_AI_REQUEST_MODEL: "gpt-4o-mini"}):
            pass
    t = b.build()
    assert t.content_sampled is False  # no text at all
    assert t.documents == () and t.question is None and t.answer is None
    assert t.retrieval_latency_s == pytest.approx(0.1)
    assert t.generation_latency_s == pytest.approx(0.87)
    assert t.pipeline_latency_s == pytest.approx(1.0)


def test_openllmetry_vector_db_events_with_real_ids_win_a_tie() -> None:
    b = TraceBuilder()
    with b.span("qa.workflow", 0, 600, **{sc.TRACELOOP_SPAN_KIND: "workflow", sc.TRACELOOP_WORKFLOW_NAME: "qa",  # noqa: SIM117 (the span tree)
                                          sc.TRACELOOP_ENTITY_INPUT: json.dumps({"inputs": {"question": QUESTION}})
                                          }) as root:
        with b.span("retriever.task", 10, 300, root, **{
                sc.GEN_AI_OPERATION_NAME: "vector_db_retrieve",
                sc.TRACELOOP_ENTITY_OUTPUT: json.dumps(LC_DOCS)}) as task:
            with b.span("chroma.query", 20, 280, task, kind=SpanKind.CLIENT, **{"db.system": "chroma"}) as db:
                for doc_id, content, _ in DOCS[:2]:
                    db.add_event(sc.DB_QUERY_RESULT_EVENT, {sc.DB_QUERY_RESULT_ID: doc_id,
                                                            sc.DB_QUERY_RESULT_DISTANCE: 0.3,
                                                            sc.DB_QUERY_RESULT_DOCUMENT: content,
                                                            sc.DB_QUERY_RESULT_METADATA: '{"page": 2}'})
    t = b.build()
    assert [d.id for d in t.documents] == ["kb-1", "kb-2"]
    assert t.documents[0].score is None  # a distance is not a similarity
    assert t.documents[0].metadata == {"page": 2, "distance": 0.3}
    assert t.retrieval_latency_s == pytest.approx(0.29)  # the outermost retrieval span
    assert t.question == QUESTION


# --- OTel GenAI semantic conventions --------------------------------------------------------------
def _genai_trace(input_messages: list[dict[str, Any]], documents: Any) -> RagTrace:
    b = TraceBuilder()
    with b.span("handle_request", 0, 1000) as root:  # INTERNAL, status UNSET, no attributes
        with b.span("retrieval kb", 10, 60, root, kind=SpanKind.CLIENT, **{
                sc.GEN_AI_OPERATION_NAME: "retrieval", "gen_ai.data_source.id": "kb",
                sc.GEN_AI_RETRIEVAL_QUERY_TEXT: QUESTION, sc.GEN_AI_RETRIEVAL_DOCUMENTS: documents}):
            pass
        with b.span("chat gpt-4o", 70, 990, root, kind=SpanKind.CLIENT, **{
                sc.GEN_AI_OPERATION_NAME: "chat", sc.GEN_AI_REQUEST_MODEL: "gpt-4o",
                "gen_ai.conversation.id": "conv-7",
                sc.GEN_AI_INPUT_MESSAGES: json.dumps(input_messages),
                sc.GEN_AI_OUTPUT_MESSAGES: json.dumps([{"role": "assistant", "finish_reason": "stop",
                                                        "parts": [{"type": "text", "content": ANSWER}]}])}):
            pass
    return b.build()


IDS_ONLY = json.dumps([{"id": "kb-1", "score": 0.91}, {"id": "kb-2", "score": 0.72}])


def test_genai_ids_only_retrieval_with_texts_in_tool_results() -> None:
    messages = [
        {"role": "system", "parts": [{"type": "text", "content": "Answer from the search results."}]},
        {"role": "user", "parts": [{"type": "text", "content": QUESTION}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "search",
                                         "arguments": {"q": QUESTION}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": [
            {"id": "kb-2", "content": DOCS[1][1]}, {"id": "kb-1", "content": DOCS[0][1]}]}]},
    ]
    t = _genai_trace(messages, IDS_ONLY)
    assert [(d.id, d.content, d.score) for d in t.documents] == [
        ("kb-1", DOCS[0][1], 0.91), ("kb-2", DOCS[1][1], 0.72)]  # matched by id, retrieval order kept
    assert (t.question, t.answer) == (QUESTION, ANSWER)
    assert t.retrieval_latency_s == pytest.approx(0.05)
    assert t.generation_latency_s == pytest.approx(0.92)
    assert t.pipeline == "handle_request"
    assert t.attributes[sc.LLM_MODEL_NAME] == "gpt-4o" and t.attributes[sc.SESSION_ID] == "conv-7"


def test_genai_ids_only_retrieval_with_one_context_message_per_document() -> None:
    messages = [
        {"role": "system", "parts": [{"type": "text", "content": DOCS[0][1]},
                                     {"type": "text", "content": DOCS[1][1]}]},
        {"role": "user", "parts": [{"type": "text", "content": QUESTION}]},
    ]
    documents = [json.dumps({"id": "kb-1", "score": 0.91}), json.dumps({"id": "kb-2", "score": 0.72})]
    t = _genai_trace(messages, documents)  # documents as a string array attribute this time
    assert [(d.id, d.content) for d in t.documents] == [("kb-1", DOCS[0][1]), ("kb-2", DOCS[1][1])]


def test_genai_ids_only_without_any_context_text_keeps_ids_and_scores() -> None:
    messages = [{"role": "system", "parts": [{"type": "text", "content": "Answer briefly."}]},
                {"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]
    t = _genai_trace(messages, IDS_ONLY)
    assert [(d.id, d.content, d.score) for d in t.documents] == [("kb-1", None, 0.91), ("kb-2", None, 0.72)]
    assert t.question == QUESTION and t.answer == ANSWER
    assert t.content_sampled is True
    assert t.attributes[sc.RAGMON_CONTEXTS_SOURCE] == sc.CONTEXTS_NONE


def test_genai_chat_only_trace_takes_context_from_messages() -> None:
    context = "\n".join(DOCS[i][1] for i in range(3)) + "\nMore policy text follows here."
    b = TraceBuilder()
    with b.span("chat gpt-4o", 0, 800, **{
            sc.GEN_AI_OPERATION_NAME: "chat",
            sc.GEN_AI_SYSTEM_INSTRUCTIONS: json.dumps([{"type": "text", "content": "Be brief."}]),
            sc.GEN_AI_INPUT_MESSAGES: json.dumps([
                {"role": "system", "parts": [{"type": "text", "content": context}]},
                {"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]),
            sc.GEN_AI_OUTPUT_MESSAGES: json.dumps([{"role": "assistant", "parts": [
                {"type": "text", "content": ANSWER}]}])}):
        pass
    t = b.build()
    assert t.question == QUESTION and t.answer == ANSWER
    assert [d.content for d in t.documents] == [context]  # "Be brief." is not context
    assert t.retrieval_latency_s is None


# --- robustness -------------------------------------------------------------------------------------
@pytest.mark.parametrize("attributes", [
    {sc.SPAN_KIND: "RETRIEVER", "retrieval.documents.0.document.score": "high",
     "retrieval.documents.0.document.content": "x", "retrieval.documents.0.document.metadata": "{broken"},
    {sc.SPAN_KIND: "RETRIEVER", sc.GEN_AI_RETRIEVAL_DOCUMENTS: "[1, 2, null]"},
    {sc.GEN_AI_OPERATION_NAME: "retrieval", sc.GEN_AI_RETRIEVAL_DOCUMENTS: '[{"id": {"nested": 1}}]'},
    {sc.SPAN_KIND: "LLM", sc.GEN_AI_INPUT_MESSAGES: '{"role": 5, "parts": "no"}', sc.OUTPUT_VALUE: "[]"},
    {sc.SPAN_KIND: "LLM", sc.GEN_AI_OUTPUT_MESSAGES: "[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]"},
    {sc.RAGMON_STAGE: "generator", sc.TRACELOOP_ENTITY_OUTPUT: '{"generations": [[{"text": 5}]]}'},
    {sc.SPAN_KIND: 7, sc.RAGMON_STAGE: True, sc.RAGMON_FEEDBACK: True, sc.TAG_TAGS: "single"},
], ids=["bad-score", "non-docs", "dict-id", "odd-messages", "deep-json", "non-text", "wrong-types"])
def test_odd_attribute_values_never_raise(attributes: dict[str, Any]) -> None:
    b = TraceBuilder()
    with b.span("rag", 0, 100, **{sc.INPUT_VALUE: QUESTION}) as root, b.span("odd", 1, 50, root, **attributes):
        pass
    t = b.build()
    assert t.question == QUESTION and t.span_count == 2


def test_openllmetry_generations_output_is_unwrapped() -> None:
    b = TraceBuilder()
    with b.span("rag", 0, 100, **{sc.INPUT_VALUE: QUESTION}) as root, \
            b.span("ChatOpenAI.task", 1, 90, root, **{
                sc.LLM_REQUEST_TYPE: "chat",
                sc.TRACELOOP_ENTITY_OUTPUT: json.dumps({"generations": [[{"text": ANSWER, "type": "Generation"}]],
                                                        "llm_output": None})}):
        pass
    assert b.build().answer == ANSWER


def test_needs_at_least_one_span() -> None:
    with pytest.raises(ValueError):
        build_rag_trace([], complete=True)


def test_genai_structured_attributes_not_json_strings() -> None:
    """Newer GenAI instrumentations may send documents and messages as OTLP structured values
    (arrays of key-value lists) instead of JSON strings."""
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList

    from ragmon.ingest.decode.otlp import decode_export_request

    def kv(**fields: Any) -> AnyValue:
        values = []
        for key, value in fields.items():
            if isinstance(value, float):
                values.append(KeyValue(key=key, value=AnyValue(double_value=value)))
            elif isinstance(value, list):
                values.append(KeyValue(key=key, value=AnyValue(array_value=ArrayValue(values=value))))
            else:
                values.append(KeyValue(key=key, value=AnyValue(string_value=value)))
        return AnyValue(kvlist_value=KeyValueList(values=values))

    b = TraceBuilder()
    with b.span("rag", 0, 500) as root:
        with b.span("retrieval", 1, 50, root, **{sc.GEN_AI_OPERATION_NAME: "retrieval",
                                                 sc.GEN_AI_RETRIEVAL_QUERY_TEXT: QUESTION}):
            pass
        with b.span("chat", 60, 490, root, **{sc.GEN_AI_OPERATION_NAME: "chat"}):
            pass
    request = b.factory.request()
    for span in request.resource_spans[0].scope_spans[0].spans:
        if span.name == "retrieval":
            span.attributes.append(KeyValue(key=sc.GEN_AI_RETRIEVAL_DOCUMENTS, value=AnyValue(
                array_value=ArrayValue(values=[kv(id="kb-1", score=0.9), kv(id="kb-2", score=0.8)]))))
        if span.name == "chat":
            span.attributes.append(KeyValue(key=sc.GEN_AI_INPUT_MESSAGES, value=AnyValue(array_value=ArrayValue(
                values=[kv(role="system", parts=[kv(type="text", content=DOCS[0][1]),
                                                 kv(type="text", content=DOCS[1][1])]),
                        kv(role="user", parts=[kv(type="text", content=QUESTION)])]))))
            span.attributes.append(KeyValue(key=sc.GEN_AI_OUTPUT_MESSAGES, value=AnyValue(array_value=ArrayValue(
                values=[kv(role="assistant", parts=[kv(type="text", content=ANSWER)])]))))
    spans = decode_export_request(request.SerializeToString(), content_type="application/x-protobuf").spans
    t = build_rag_trace(spans, complete=True)
    assert [(d.id, d.score, d.content) for d in t.documents] == [
        ("kb-1", 0.9, DOCS[0][1]), ("kb-2", 0.8, DOCS[1][1])]
    assert (t.question, t.answer) == (QUESTION, ANSWER)


def test_langgraph_message_state_and_outputs_without_an_answer_key() -> None:
    b = TraceBuilder()
    state_in = {"messages": [{"type": "human", "content": QUESTION}]}
    state_out = {"messages": [{"type": "human", "content": QUESTION}, {"type": "ai", "content": ANSWER}]}
    with b.span("LangGraph", 0, 900, **{sc.SPAN_KIND: "CHAIN", sc.INPUT_VALUE: json.dumps(state_in),
                                        sc.OUTPUT_VALUE: json.dumps(state_out)}):
        pass
    t = b.build()
    assert (t.question, t.answer) == (QUESTION, ANSWER)

    # a chain whose output holds the question and the contexts but no answer: the answer must
    # come from the LLM, never be guessed from the other strings
    b = TraceBuilder()
    no_answer = json.dumps({"question": QUESTION, "context": "kb text"})
    with b.span("chain", 0, 900, **{sc.SPAN_KIND: "CHAIN", sc.INPUT_VALUE: QUESTION,
                                    sc.OUTPUT_VALUE: no_answer}) as root, \
            b.span("llm", 10, 800, root, **{sc.SPAN_KIND: "LLM", sc.OUTPUT_VALUE: ANSWER}):
        pass
    assert b.build().answer == ANSWER


_ODD: list[Any] = [None, "", " ", "{", "[1,", "null", "[]", "{}", '{"a": {"b": []}}', '[{"id": null}]',
                   '{"outputs": [{"page_content": 5}]}', 0, -1, 2**70, float("nan"), float("inf"), True,
                   b"\xff", [], [None], [1, "a"], {"x": {"y": [1]}}, ["{\"role\": 1}"], "\x00" * 3]


def test_random_attribute_values_never_break_extraction() -> None:
    """Deterministic fuzzing over realistic attribute sets of every convention family."""
    import random

    from ragmon.types import SpanRecord

    keys = [sc.SPAN_KIND, sc.RAGMON_STAGE, sc.INPUT_VALUE, sc.OUTPUT_VALUE, sc.GEN_AI_OPERATION_NAME,
            sc.GEN_AI_RETRIEVAL_DOCUMENTS, sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES,
            sc.GEN_AI_SYSTEM_INSTRUCTIONS, sc.TRACELOOP_ENTITY_INPUT, sc.TRACELOOP_ENTITY_OUTPUT,
            sc.TRACELOOP_SPAN_KIND, sc.LLM_REQUEST_TYPE, sc.RAGMON_CONTENT_SAMPLED, sc.RAGMON_FEEDBACK,
            sc.RAGMON_DOCUMENT_COUNT, sc.TAG_TAGS, sc.ERROR_TYPE, sc.RERANKER_QUERY,
            "retrieval.documents.0.document.id", "retrieval.documents.0.document.content",
            "retrieval.documents.0.document.score", "retrieval.documents.1.document.metadata",
            "reranker.output_documents.0.document.id", "llm.output_messages.0.message.content",
            "llm.input_messages.0.message.role", "gen_ai.prompt.0.content", "gen_ai.completion.0.content"]
    good = {sc.SPAN_KIND: ["RETRIEVER", "LLM", "CHAIN", "RERANKER"], sc.RAGMON_STAGE: ["pipeline", "retriever"],
            sc.GEN_AI_OPERATION_NAME: ["retrieval", "chat", "vector_db_retrieve"]}
    rng = random.Random(99)
    for _ in range(300):
        spans = []
        for i in range(rng.randint(1, 5)):
            attrs: dict[str, Any] = {}
            for key in rng.sample(keys, rng.randint(0, 8)):
                attrs[key] = rng.choice(good.get(key, []) + _ODD)
            parent = None if i == 0 or rng.random() < 0.2 else f"{rng.randint(1, i):016x}"
            events = ()
            if rng.random() < 0.3:
                from ragmon.types import SpanEvent

                events = (SpanEvent(name=rng.choice([sc.DB_QUERY_RESULT_EVENT, sc.EXCEPTION_EVENT]), time_ns=1,
                                    attributes={sc.DB_QUERY_RESULT_ID: rng.choice(_ODD),
                                                sc.DB_QUERY_RESULT_DOCUMENT: rng.choice(_ODD),
                                                sc.EXCEPTION_TYPE: rng.choice(_ODD)}),)
            spans.append(SpanRecord(
                trace_id="ab" * 16, span_id=f"{i + 1:016x}", parent_span_id=parent, name=f"s{i}",
                start_time_ns=rng.randint(0, 10**9), end_time_ns=rng.randint(0, 2 * 10**9), attributes=attrs,
                resource={"service.name": rng.choice(["svc", 5, None, ""])}, events=events,
                status_code=rng.choice(["UNSET", "ERROR"]), dropped_attributes_count=rng.choice([0, 3])))
        trace = build_rag_trace(spans, complete=True)
        assert [d.rank for d in trace.documents] == list(range(len(trace.documents)))
        assert len({d.id for d in trace.documents}) == len(trace.documents)
        assert all(isinstance(d.id, str) and d.id for d in trace.documents)
        assert trace.question is None or isinstance(trace.question, str)
        assert trace.answer is None or isinstance(trace.answer, str)
        assert isinstance(trace.service, str) and isinstance(trace.pipeline, str)
        for latency in (trace.retrieval_latency_s, trace.generation_latency_s, trace.pipeline_latency_s):
            assert latency is None or latency >= 0


def test_prompt_and_answer_on_different_members_of_a_nested_llm_group() -> None:
    b = TraceBuilder()
    with b.span("handler", 0, 1000) as root:  # no input on the root: the question must come from the prompt
        with b.span("retrieval", 1, 50, root, **{sc.GEN_AI_OPERATION_NAME: "retrieval",
                                                 sc.GEN_AI_RETRIEVAL_DOCUMENTS: IDS_ONLY}):
            pass
        with b.span("ChatModel", 60, 990, root, **{  # noqa: SIM117 (the span tree)
                sc.SPAN_KIND: "LLM",
                "llm.input_messages.0.message.role": "system",
                "llm.input_messages.0.message.content": DOCS[0][1],
                "llm.input_messages.1.message.role": "system",
                "llm.input_messages.1.message.content": DOCS[1][1],
                "llm.input_messages.2.message.role": "user",
                "llm.input_messages.2.message.content": QUESTION}) as outer:
            with b.span("openai.chat", 70, 980, outer, **{
                    sc.SPAN_KIND: "LLM", "llm.output_messages.0.message.role": "assistant",
                    "llm.output_messages.0.message.content": ANSWER}):
                pass
    t = b.build()
    assert (t.question, t.answer) == (QUESTION, ANSWER)
    assert [(d.id, d.content) for d in t.documents] == [("kb-1", DOCS[0][1]), ("kb-2", DOCS[1][1])]
    assert t.generation_latency_s == pytest.approx(0.93)


# --- hostile keys (issue 17, item 11) ---------------------------------------------------------------
@pytest.mark.parametrize("index", ["²", "①", "٣", "𝟘", "-1", "1e3", " 1"])
def test_non_ascii_digit_indexes_are_ignored_not_fatal(index: str) -> None:
    """``"²".isdigit()`` is True but ``int("²")`` raises: one such key crashed the extraction and the
    assembler's fallback trace (no text) was skipped as no_content."""
    from ragmon.ingest.assembler import TraceAssembler
    from ragmon.sampling.sampler import judgeable_skip_reason

    b = TraceBuilder()
    with b.span("rag", 0, 900, **{sc.INPUT_VALUE: QUESTION, sc.OUTPUT_VALUE: ANSWER}) as root:
        with b.span("retrieve", 10, 100, root, **{
                sc.SPAN_KIND: "RETRIEVER", **oi_docs(DOCS[:2]),
                f"retrieval.documents.{index}.document.content": "hostile",
                f"retrieval.documents.{index}.document.id": "evil"}):
            pass
        with b.span("llm", 110, 800, root, **{
                sc.SPAN_KIND: "LLM", f"llm.input_messages.{index}.message.content": "x",
                f"llm.output_messages.{index}.message.content": "y",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": ANSWER}):
            pass
    t = b.build()
    assert [d.id for d in t.documents] == ["kb-1", "kb-2"]
    assert (t.question, t.answer) == (QUESTION, ANSWER)

    assembler = TraceAssembler(trace_timeout_s=5, max_open_traces=10, max_spans_per_trace=10)
    closed = [c for span in b.factory.records() for c in assembler.add(span)]
    assert len(closed) == 1
    trace = closed[0].trace
    assert [d.id for d in trace.documents] == ["kb-1", "kb-2"] and trace.content_sampled
    assert judgeable_skip_reason(trace) is None  # judged, not skipped as no_content


# --- only RAG requests (issue 13, item 2) -------------------------------------------------------------
@pytest.mark.parametrize(("spans", "is_rag"), [
    ([("GET /health", {"http.route": "/health"}), ("SELECT users", {"db.system": "postgresql"})], False),
    ([("ragmon.feedback", {sc.RAGMON_FEEDBACK: "negative", sc.RAGMON_PIPELINE: "faq"})], False),  # late feedback
    ([("embed", {sc.SPAN_KIND: sc.KIND_EMBEDDING, sc.INPUT_VALUE: "text"})], False),
    ([("faq", {sc.RAGMON_PIPELINE: "faq", sc.INPUT_VALUE: QUESTION, sc.OUTPUT_VALUE: ANSWER})], True),
    ([("rag", {sc.RAGMON_STAGE: sc.STAGE_PIPELINE})], True),
    ([("retrieve", {sc.SPAN_KIND: "RETRIEVER", **oi_docs(DOCS[:1])})], True),
    ([("chat", {sc.GEN_AI_OPERATION_NAME: "chat"})], True),
], ids=["http-and-db", "late-feedback", "embedding", "ragmon-pipeline-name", "ragmon-stage", "retriever", "chat"])
def test_traces_that_are_not_rag_requests_are_marked(spans: list[tuple[str, dict[str, Any]]], is_rag: bool) -> None:
    b = TraceBuilder()
    with b.span(spans[0][0], 0, 100, **spans[0][1]) as root:
        for name, attributes in spans[1:]:
            with b.span(name, 10, 90, root, **attributes):
                pass
    t = b.build()
    assert (sc.RAGMON_NOT_RAG not in t.attributes) is is_rag
    if not is_rag:
        assert t.attributes[sc.RAGMON_NOT_RAG] is True
