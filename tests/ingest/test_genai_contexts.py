"""OTel GenAI conventions written by hand with the real OpenTelemetry SDK (real OTLP protobuf
round trip): the retrieval span carries document ids and scores only; the text sits in the chat
span's input messages — here one user message with ``[doc-id] text`` lines, then the question —
next to the system instructions (issue 13, item 1)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.trace import SpanKind
from prometheus_client import CollectorRegistry

from ragmon import semconv as sc
from ragmon.agent import Agent
from ragmon.config import load_agent_config
from ragmon.ingest.extract import build_rag_trace, content_id
from ragmon.testing import InMemorySource, StaticJudge
from ragmon.types import RagTrace, SpanRecord
from tests.ingest.otel_helpers import SpanFactory

QUESTION = "How do I reset my password?"
ANSWER = "Open the account page and use the reset link within 24 hours."
DOCS = {"kb-1": "Passwords are reset from the account page.",
        "kb-2": "Reset links expire after 24 hours.\nThey can be requested again at any time."}
INSTRUCTIONS = "You are the support assistant. Answer only from the documents, cite their ids."
IDS_ONLY = [{"id": "kb-1", "score": 0.91}, {"id": "kb-2", "score": 0.72}]


def genai_records(user_text: str, *, documents: list[dict[str, Any]] | None = None,
                  instructions: str | None = INSTRUCTIONS, service: str = "genai-app") -> list[SpanRecord]:
    factory = SpanFactory(service)
    tracer = factory.tracer
    with tracer.start_as_current_span("handle_request"):
        with tracer.start_as_current_span("retrieval kb", kind=SpanKind.CLIENT, attributes={
                sc.GEN_AI_OPERATION_NAME: sc.GEN_AI_OP_RETRIEVAL, "gen_ai.data_source.id": "kb",
                sc.GEN_AI_RETRIEVAL_QUERY_TEXT: QUESTION,
                sc.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps(IDS_ONLY if documents is None else documents)}):
            pass
        attributes = {
            sc.GEN_AI_OPERATION_NAME: sc.GEN_AI_OP_CHAT, sc.GEN_AI_REQUEST_MODEL: "gpt-4o",
            sc.GEN_AI_INPUT_MESSAGES: json.dumps([{"role": "user", "parts": [{"type": "text", "content": user_text}]}]),
            sc.GEN_AI_OUTPUT_MESSAGES: json.dumps([{"role": "assistant", "finish_reason": "stop",
                                                    "parts": [{"type": "text", "content": ANSWER}]}]),
        }
        if instructions is not None:
            attributes[sc.GEN_AI_SYSTEM_INSTRUCTIONS] = json.dumps([{"type": "text", "content": instructions}])
        with tracer.start_as_current_span("chat gpt-4o", kind=SpanKind.CLIENT, attributes=attributes):
            pass
    return factory.records()


def genai_trace(user_text: str, **kw: Any) -> RagTrace:
    return build_rag_trace(genai_records(user_text, **kw), complete=True)


LABELLED = {
    "brackets": "[kb-1] {0}\n[kb-2] {1}\n\nQuestion: {q}",
    "colon": "Documents:\nkb-1: {0}\nkb-2: {1}\n\n{q}",
    "xml": '<doc id="kb-1">{0}</doc>\n<doc id="kb-2">{1}</doc>\n\n{q}',
    "numbered-own-line": "1. Document kb-1\n{0}\n2. Document kb-2\n{1}\n\nUser question: {q}",
    "reversed-order": "[kb-2] {1}\n[kb-1] {0}\n\nQuestion: {q}",
}


@pytest.mark.parametrize("layout", sorted(LABELLED))
def test_texts_are_recovered_by_id_from_the_user_message(layout: str) -> None:
    user = LABELLED[layout].format(DOCS["kb-1"], DOCS["kb-2"], q=QUESTION)
    t = genai_trace(user)
    assert [(d.id, d.content, d.score) for d in t.documents] == [
        ("kb-1", DOCS["kb-1"], 0.91), ("kb-2", DOCS["kb-2"], 0.72)]  # retrieval order, ids, scores kept
    assert t.contexts == [DOCS["kb-1"], DOCS["kb-2"]]
    assert not any(INSTRUCTIONS in c or QUESTION in c for c in t.contexts)
    assert (t.question, t.answer) == (QUESTION, ANSWER)
    assert t.attributes[sc.RAGMON_CONTEXTS_SOURCE] == sc.CONTEXTS_MESSAGE_ID


def test_a_document_whose_id_is_not_in_the_prompt_keeps_no_text() -> None:
    t = genai_trace(f"[kb-1] {DOCS['kb-1']}\n\n{QUESTION}")
    assert [(d.id, d.content) for d in t.documents] == [("kb-1", DOCS["kb-1"]), ("kb-2", None)]
    assert t.attributes[sc.RAGMON_CONTEXTS_SOURCE] == sc.CONTEXTS_MESSAGE_ID


def test_an_id_mentioned_inside_a_sentence_is_not_a_label() -> None:
    user = f"Please answer; the ticket mentions kb-1 and kb-2 as related.\n\n{QUESTION}"
    t = genai_trace(user)
    assert t.attributes[sc.RAGMON_CONTEXTS_SOURCE] == sc.CONTEXTS_USER_MESSAGE  # no labelled passage


def test_fallback_is_the_user_message_minus_the_question_marked_and_never_the_instructions() -> None:
    notes = f"{DOCS['kb-1']}\n{DOCS['kb-2']}"
    t = genai_trace(f"Use these notes:\n{notes}\n\nQuestion: {QUESTION}")  # labels dropped too
    # the retrieved documents keep ids and scores (no text could be attributed to them) ...
    assert [(d.id, d.content, d.score) for d in t.documents[:2]] == [("kb-1", None, 0.91), ("kb-2", None, 0.72)]
    # ... and the user message minus the question is one context, marked as such
    fallback = t.documents[2]
    assert fallback.content == notes and fallback.id == content_id(notes)
    assert fallback.metadata == {sc.RAGMON_CONTEXTS_SOURCE: sc.CONTEXTS_USER_MESSAGE}
    assert t.contexts == [notes]
    assert QUESTION not in t.contexts[0] and INSTRUCTIONS not in t.contexts[0]
    assert t.attributes[sc.RAGMON_CONTEXTS_SOURCE] == sc.CONTEXTS_USER_MESSAGE


def test_system_instructions_are_never_a_context() -> None:
    # one document, the user message is just the question: the instructions must not become it
    t = genai_trace(QUESTION, documents=[{"id": "kb-1", "score": 0.9}])
    assert [(d.id, d.content) for d in t.documents] == [("kb-1", None)]
    assert t.contexts == []
    assert t.attributes[sc.RAGMON_CONTEXTS_SOURCE] == sc.CONTEXTS_NONE


def test_text_on_the_retrieval_span_wins() -> None:
    documents = [{"id": k, "content": v, "score": 0.5} for k, v in DOCS.items()]
    t = genai_trace(f"[kb-1] something else\n\n{QUESTION}", documents=documents)
    assert t.contexts == list(DOCS.values())
    assert t.attributes[sc.RAGMON_CONTEXTS_SOURCE] == sc.CONTEXTS_RETRIEVAL


async def test_the_agent_counts_where_contexts_came_from() -> None:
    registry = CollectorRegistry()
    source = InMemorySource()
    judge = StaticJudge({sc.METRIC_FAITHFULNESS: 1.0})
    config = load_agent_config({"metrics_port": 0}, environ={})
    async with Agent(config, registry=registry, judge=judge, source=source) as agent:
        source.push(genai_records(f"[kb-1] {DOCS['kb-1']}\n[kb-2] {DOCS['kb-2']}\n\n{QUESTION}"))
        source.push(genai_records(f"Notes:\n{DOCS['kb-1']}\n\n{QUESTION}"))
        source.push(genai_records(QUESTION))
        assert await agent.wait_idle(20)

    def count(source_label: str) -> float:
        return registry.get_sample_value(f"{sc.M_CONTEXTS_SOURCE}_total", {
            "service": "genai-app", "pipeline": "handle_request", "source": source_label}) or 0.0

    assert (count(sc.CONTEXTS_MESSAGE_ID), count(sc.CONTEXTS_USER_MESSAGE), count(sc.CONTEXTS_NONE)) == (1, 1, 1)
    assert len(judge.seen) == 3  # every one is a RAG request with a question and an answer
