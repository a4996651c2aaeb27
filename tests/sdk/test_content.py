"""Content sampling, size caps, redaction and the attribute-count limit."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import pytest

import ragmon
from ragmon import semconv as sc
from ragmon.errors import ConfigError
from ragmon.sampling import in_sample
from ragmon.sdk import _runtime

from .conftest import Spans, init_memory

EMAIL = re.compile(r"[\w.]+@[\w.]+")


def run_rag(question: str = "Where does alice@example.com live?", docs: Any = None, answer: str = "In Paris.") -> str:
    docs = docs if docs is not None else [
        {"id": "d1", "text": "alice@example.com lives in Paris.", "score": 0.8,
         "metadata": {"owner": "bob@example.com"}},
    ]

    @ragmon.retriever
    def search(query: str) -> Any:
        return docs

    @ragmon.generator
    def generate(query: str, context: Any) -> str:
        return answer

    @ragmon.pipeline
    def rag(query: str) -> str:
        return generate(query, search(query))

    return rag(question)


# --- content rate ----------------------------------------------------------------------------------
def test_content_rate_zero_keeps_ids_scores_and_timings_only() -> None:
    spans = init_memory(content_rate=0.0)
    assert run_rag() == "In Paris."
    for span in spans.all():
        a = span.attributes
        assert a[sc.RAGMON_CONTENT_SAMPLED] is False
        assert sc.INPUT_VALUE not in a and sc.OUTPUT_VALUE not in a
        assert not [k for k in a if k.endswith(sc.DOCUMENT_CONTENT) or k.endswith(sc.DOCUMENT_METADATA)]
        assert span.end_time > span.start_time
    retr = spans.one("search").attributes
    assert retr[sc.retrieval_document_attr(0, sc.DOCUMENT_ID)] == "d1"
    assert retr[sc.retrieval_document_attr(0, sc.DOCUMENT_SCORE)] == 0.8
    assert retr[sc.RAGMON_DOCUMENT_COUNT] == 1


def test_content_rate_follows_the_shared_sampling_function() -> None:
    spans = init_memory(content_rate=0.5)
    for i in range(40):
        run_rag(question=f"question {i}")
    roots = [s for s in spans.all() if s.name == "rag"]
    decisions = {s.attributes[sc.RAGMON_CONTENT_SAMPLED] for s in roots}
    assert decisions == {True, False}  # 40 traces at 50 %: both outcomes occur
    for root in roots:
        expected = in_sample(root.context.trace_id, 0.5)
        assert root.attributes[sc.RAGMON_CONTENT_SAMPLED] is expected
        assert (sc.INPUT_VALUE in root.attributes) is expected
        # one decision per trace, on every span of it
        same_trace = [s for s in spans.all() if s.context.trace_id == root.context.trace_id]
        assert len(same_trace) == 3
        assert {s.attributes[sc.RAGMON_CONTENT_SAMPLED] for s in same_trace} == {expected}


def test_content_rate_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_runtime.ENV_CONTENT_RATE, "0")
    spans = init_memory()
    run_rag()
    assert spans.one("rag").attributes[sc.RAGMON_CONTENT_SAMPLED] is False


def test_bad_env_value_is_logged_and_default_used(monkeypatch: pytest.MonkeyPatch,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv(_runtime.ENV_CONTENT_RATE, "lots")
    with caplog.at_level(logging.WARNING, logger="ragmon.sdk"):
        spans = init_memory()
    run_rag()
    assert spans.one("rag").attributes[sc.RAGMON_CONTENT_SAMPLED] is True
    assert _runtime.ENV_CONTENT_RATE in caplog.text


# --- truncation --------------------------------------------------------------------------------------
def test_long_fields_are_cut_and_marked() -> None:
    spans = init_memory(max_field_chars=100)
    long_doc = "x" * 500
    run_rag(question="q" * 150, docs=[{"id": "big", "text": long_doc}, {"id": "small", "text": "short"}],
            answer="a" * 101)
    retr = spans.one("search").attributes
    content = retr[sc.retrieval_document_attr(0, sc.DOCUMENT_CONTENT)]
    assert len(content) == 100 and content.endswith(sc.TRUNCATION_MARKER)
    assert content.startswith("x" * (100 - len(sc.TRUNCATION_MARKER)))
    assert retr[sc.retrieval_document_attr(1, sc.DOCUMENT_CONTENT)] == "short"
    assert retr[sc.RAGMON_TRUNCATED_FIELDS] == (sc.INPUT_VALUE, sc.retrieval_document_attr(0, sc.DOCUMENT_CONTENT))
    gen = spans.one("generate").attributes
    assert gen[sc.OUTPUT_VALUE].endswith(sc.TRUNCATION_MARKER) and len(gen[sc.OUTPUT_VALUE]) == 100
    assert gen[sc.RAGMON_TRUNCATED_FIELDS] == (sc.INPUT_VALUE, sc.OUTPUT_VALUE)
    assert isinstance(gen[sc.RAGMON_TRUNCATED_FIELDS], tuple)


def test_untruncated_span_has_no_truncated_fields(spans: Spans) -> None:
    run_rag()
    assert all(sc.RAGMON_TRUNCATED_FIELDS not in s.attributes for s in spans.all())


def test_sdk_value_length_limit_lowers_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    # The SDK would cut silently at OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT; ragmon cuts first, with a marker.
    monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "80")
    spans = init_memory()
    run_rag(answer="b" * 300)
    out = spans.one("generate").attributes[sc.OUTPUT_VALUE]
    assert len(out) == 80 and out.endswith(sc.TRUNCATION_MARKER)


def test_max_field_chars_validation() -> None:
    with pytest.raises(ConfigError, match="max_field_chars"):
        ragmon.init(exporter="none", max_field_chars=3, set_global=False)


# --- redaction ------------------------------------------------------------------------------------
def test_redaction_hook_replaces_text_everywhere() -> None:
    calls: list[str] = []

    def redact(field: str, text: str) -> str | None:
        calls.append(field)
        return EMAIL.sub("[email]", text)

    spans = init_memory(redact=redact)
    run_rag()
    retr = spans.one("search").attributes
    assert retr[sc.INPUT_VALUE] == "Where does [email] live?"
    assert retr[sc.retrieval_document_attr(0, sc.DOCUMENT_CONTENT)] == "[email] lives in Paris."
    assert json.loads(retr[sc.retrieval_document_attr(0, sc.DOCUMENT_METADATA)]) == {"owner": "[email]"}
    assert retr[sc.RAGMON_REDACTED] is True
    gen = spans.one("generate").attributes
    assert gen[sc.OUTPUT_VALUE] == "In Paris."
    assert gen[sc.RAGMON_REDACTED] is True  # its question had an address
    assert not any("@" in str(v) for s in spans.all() for v in s.attributes.values())
    assert sc.retrieval_document_attr(0, sc.DOCUMENT_CONTENT) in calls and sc.OUTPUT_VALUE in calls
    assert retr[sc.retrieval_document_attr(0, sc.DOCUMENT_ID)] == "d1"  # ids are not text


def test_redaction_hook_drops_text() -> None:
    spans = init_memory(redact=lambda field, text: None if field == sc.OUTPUT_VALUE else text)
    run_rag()
    gen = spans.one("generate").attributes
    assert sc.OUTPUT_VALUE not in gen and gen[sc.RAGMON_REDACTED] is True
    assert gen[sc.INPUT_VALUE] == "Where does alice@example.com live?"
    assert spans.one("search").attributes[sc.RAGMON_REDACTED] is False


def test_redaction_hook_that_raises_fails_closed(caplog: pytest.LogCaptureFixture) -> None:
    def broken(field: str, text: str) -> str:
        raise KeyError("regex table missing")

    spans = init_memory(redact=broken)
    before = _runtime.internal_error_counts().get("redact_hook", 0)
    with caplog.at_level(logging.WARNING, logger="ragmon.sdk"):
        assert run_rag() == "In Paris."  # the app is unaffected
        run_rag()
    for span in spans.all():
        a = span.attributes
        assert sc.INPUT_VALUE not in a and sc.OUTPUT_VALUE not in a
        assert not [k for k in a if k.endswith(sc.DOCUMENT_CONTENT)]
        assert a[sc.RAGMON_REDACTED] is True
    assert _runtime.internal_error_counts()["redact_hook"] > before
    assert caplog.text.count("redact_hook") == 1  # logged once, then only counted


def test_redaction_hook_returning_a_non_string_drops() -> None:
    spans = init_memory(redact=lambda field, text: 42)
    run_rag()
    assert sc.OUTPUT_VALUE not in spans.one("generate").attributes


def test_redact_must_be_callable() -> None:
    with pytest.raises(ConfigError, match="redact"):
        ragmon.init(exporter="none", redact="yes", set_global=False)  # type: ignore[arg-type]


# --- attribute-count limit --------------------------------------------------------------------------
def forty_docs() -> list[dict[str, Any]]:
    return [{"id": f"doc-{i}", "text": f"text {i}", "score": 1.0 - i / 100, "metadata": {"chunk": i}}
            for i in range(40)]


def check_forty(attrs: Any) -> None:
    assert attrs[sc.RAGMON_DOCUMENT_COUNT] == 40
    for i in range(40):
        assert attrs[sc.retrieval_document_attr(i, sc.DOCUMENT_ID)] == f"doc-{i}"
        assert attrs[sc.retrieval_document_attr(i, sc.DOCUMENT_CONTENT)] == f"text {i}"
        assert attrs[sc.retrieval_document_attr(i, sc.DOCUMENT_SCORE)] == pytest.approx(1.0 - i / 100)
        assert json.loads(attrs[sc.retrieval_document_attr(i, sc.DOCUMENT_METADATA)]) == {"chunk": i}


def test_forty_documents_are_not_lost(spans: Spans) -> None:
    run_rag(docs=forty_docs())
    retr = spans.one("search")
    assert len(retr.attributes) > 128  # more than the SDK's default limit
    assert retr.dropped_attributes == 0
    check_forty(retr.attributes)


def test_forty_documents_survive_a_low_env_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "32")
    spans = init_memory()
    run_rag(docs=forty_docs())
    retr = spans.one("search")
    assert retr.dropped_attributes == 0
    check_forty(retr.attributes)


def test_max_documents_caps_and_marks() -> None:
    spans = init_memory(max_documents=5)
    run_rag(docs=forty_docs())
    a = spans.one("search").attributes
    assert a[sc.RAGMON_DOCUMENT_COUNT] == 40  # the true count
    assert sc.retrieval_document_attr(4, sc.DOCUMENT_ID) in a
    assert sc.retrieval_document_attr(5, sc.DOCUMENT_ID) not in a
    assert sc.RETRIEVAL_DOCUMENTS_PREFIX in a[sc.RAGMON_TRUNCATED_FIELDS]


def test_redaction_applies_to_exception_messages_and_stack_traces() -> None:
    spans = init_memory(redact=lambda field, text: EMAIL.sub("[email]", text))
    boom = LookupError("no profile for alice@example.com")

    @ragmon.retriever
    def search(query: str) -> list[str]:
        raise boom

    with pytest.raises(LookupError) as info:
        search("q")
    assert info.value is boom and "alice@example.com" in str(info.value)  # the app's exception is untouched
    span = spans.one("search")
    event = next(e for e in span.events if e.name == sc.EXCEPTION_EVENT)
    assert event.attributes[sc.EXCEPTION_MESSAGE] == "no profile for [email]"
    assert "[email]" in event.attributes["exception.stacktrace"]
    assert "@" not in event.attributes["exception.stacktrace"]
    assert span.status.description == "LookupError: no profile for [email]"
    assert span.attributes[sc.ERROR_TYPE] == "LookupError"


def test_streamed_answer_is_capped_and_marked() -> None:
    spans = init_memory(max_field_chars=100)

    @ragmon.generator
    def stream(query: str) -> Any:
        for _ in range(1000):
            yield "token "

    assert len(list(stream("q"))) == 1000
    out = spans.one("stream").attributes[sc.OUTPUT_VALUE]
    assert len(out) == 100 and out.endswith(sc.TRUNCATION_MARKER)
    assert spans.one("stream").attributes[sc.RAGMON_TRUNCATED_FIELDS] == (sc.OUTPUT_VALUE,)
