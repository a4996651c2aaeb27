"""The manual span form, current span helpers, and feedback."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.trace import StatusCode

import ragmon
from ragmon import semconv as sc
from ragmon.sdk import _runtime

from .conftest import Spans, init_memory


def test_manual_spans_nest_and_record(spans: Spans) -> None:
    with ragmon.span("pipeline", name="support", question="How do refunds work?", tags=["manual"]) as p:
        with ragmon.span("retriever", name="kb-search") as r:
            r.set_question("How do refunds work?")
            r.set_documents([{"id": "r1", "text": "Refunds take 5 days.", "score": 0.7}])
        with ragmon.span("LLM", name="llm", model="local-7b") as g:
            g.set_answer("Within 5 days.")
        p.set_answer("Within 5 days.")
        p.set_attributes(session_id="sess-1", **{"deployment.environment": "test"})
    root, retr, gen = spans.one("support"), spans.one("kb-search"), spans.one("llm")
    assert root.attributes[sc.SPAN_KIND] == sc.KIND_CHAIN
    assert root.attributes[sc.INPUT_VALUE] == "How do refunds work?"
    assert root.attributes[sc.OUTPUT_VALUE] == "Within 5 days."
    assert root.attributes[sc.SESSION_ID] == "sess-1"
    assert root.attributes["deployment.environment"] == "test"
    assert root.attributes[sc.TAG_TAGS] == ("manual",)
    assert retr.attributes[sc.SPAN_KIND] == sc.KIND_RETRIEVER
    assert retr.attributes[sc.retrieval_document_attr(0, sc.DOCUMENT_ID)] == "r1"
    assert retr.attributes[sc.RAGMON_DOCUMENT_COUNT] == 1
    assert gen.attributes[sc.SPAN_KIND] == sc.KIND_LLM and gen.attributes[sc.LLM_MODEL_NAME] == "local-7b"
    for child in (retr, gen):
        assert child.parent.span_id == root.context.span_id
        assert child.attributes[sc.RAGMON_PIPELINE] == "support"


async def test_manual_span_async_with_and_error(spans: Spans) -> None:
    boom = ConnectionError("vector db down")
    with pytest.raises(ConnectionError) as info:
        async with ragmon.span("retriever", name="remote") as r:
            r.set_question("q")
            raise boom
    assert info.value is boom
    span = spans.one("remote")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes[sc.ERROR_TYPE] == "ConnectionError"


def test_manual_span_bad_kind() -> None:
    with pytest.raises(ValueError, match="pipeline, retriever, generator"):
        ragmon.span("embedding")


def test_set_documents_twice_replaces(spans: Spans) -> None:
    with ragmon.span("retriever", name="r") as r:
        r.set_documents(["a", "b", "c"])
        r.set_documents(["z"])
    a = spans.one("r").attributes
    assert a[sc.RAGMON_DOCUMENT_COUNT] == 1
    assert a[sc.retrieval_document_attr(0, sc.DOCUMENT_CONTENT)] == "z"
    assert sc.retrieval_document_attr(1, sc.DOCUMENT_ID) not in a


def test_explicit_documents_inside_a_decorated_retriever_win(spans: Spans) -> None:
    @ragmon.retriever
    def search(query: str) -> dict[str, Any]:
        hits = {"matches": [{"id": "m1", "text": "matched"}], "took_ms": 3}
        ragmon.current_span().set_documents(hits["matches"])
        return hits  # not a list: without set_documents nothing would be recorded

    search("q")
    a = spans.one("search").attributes
    assert a[sc.retrieval_document_attr(0, sc.DOCUMENT_ID)] == "m1"


def test_current_span_and_trace_id(spans: Spans) -> None:
    seen: dict[str, Any] = {}

    @ragmon.generator
    def gen(query: str) -> str:
        seen["trace_id"] = ragmon.current_trace_id()
        seen["stage"] = ragmon.current_span().stage
        ragmon.current_span().set_attributes(user_id="u-1", prompt_version="p2")
        return "a"

    gen("q")
    span = spans.one("gen")
    assert seen == {"trace_id": format(span.context.trace_id, "032x"), "stage": sc.STAGE_GENERATOR}
    assert span.attributes[sc.USER_ID] == "u-1" and span.attributes[sc.LLM_PROMPT_TEMPLATE_VERSION] == "p2"
    assert ragmon.current_trace_id() is None
    ragmon.current_span().set_answer("outside any span: ignored")  # must not raise


def test_feedback_on_the_current_pipeline(spans: Spans) -> None:
    @ragmon.generator
    def gen(query: str) -> str:
        assert ragmon.record_feedback("Negative") is True
        return "a"

    @ragmon.pipeline
    def rag(query: str) -> str:
        return gen(query)

    rag("q")
    assert spans.one("rag").attributes[sc.RAGMON_FEEDBACK] == "negative"
    assert sc.RAGMON_FEEDBACK not in spans.one("gen").attributes


def test_feedback_later_by_trace_id(spans: Spans) -> None:
    @ragmon.pipeline
    def rag(query: str) -> str:
        return "a"

    rag("q")
    root = spans.one("rag")
    trace_id = format(root.context.trace_id, "032x")
    assert ragmon.record_feedback(0.25, trace_id=trace_id, span_id=format(root.context.span_id, "016x"),
                                  pipeline="rag") is True
    assert ragmon.record_feedback(False, trace_id=root.context.trace_id) is True
    fb = [s for s in spans.all() if s.name == "ragmon.feedback"]
    assert len(fb) == 2
    assert all(s.context.trace_id == root.context.trace_id for s in fb)
    assert fb[0].parent.span_id == root.context.span_id
    assert fb[0].attributes[sc.RAGMON_FEEDBACK] == 0.25 and fb[0].attributes[sc.RAGMON_PIPELINE] == "rag"
    assert fb[1].attributes[sc.RAGMON_FEEDBACK] == "negative"


def test_feedback_without_a_target_or_with_bad_input_is_refused() -> None:
    init_memory()
    before = _runtime.internal_error_counts()
    assert ragmon.record_feedback("negative") is False
    assert ragmon.record_feedback(object()) is False  # type: ignore[arg-type]
    assert ragmon.record_feedback("negative", trace_id="not-hex") is False
    assert ragmon.record_feedback("negative", trace_id="0" * 32) is False
    after = _runtime.internal_error_counts()
    assert after.get("feedback_no_span", 0) == before.get("feedback_no_span", 0) + 1
    assert after.get("feedback", 0) == before.get("feedback", 0) + 2
