"""The contract with the agent: OTLP bytes the SDK sends over real HTTP decode (ragmon.ingest)
into a RagTrace with the question, documents, answer, pipeline and flags the SDK recorded."""

from __future__ import annotations

from typing import Any

import pytest

import ragmon
from ragmon import semconv as sc
from ragmon.ingest.decode.otlp import decode_export_request
from ragmon.ingest.extract import build_rag_trace


def send_and_decode(endpoint: str, received: list[Any], run: Any, **init: Any) -> Any:
    ragmon.init(service_name="contract", endpoint=endpoint, set_global=False, **init)
    run()
    assert ragmon.shutdown() is True
    spans = []
    for _, headers, body in received:
        batch = decode_export_request(body, content_type=headers["content-type"],
                                      content_encoding=headers.get("content-encoding"))
        assert batch.rejected_spans == 0
        spans.extend(batch.spans)
    return spans


@ragmon.retriever(name="kb-search")
def search(query: str) -> list[dict[str, Any]]:
    return [{"id": f"kb-{i}", "text": f"Refunds take {i + 3} days.", "score": 0.9 - i / 50,
             "metadata": {"source": "policy.md"}} for i in range(35)]


@ragmon.generator(model="tmpl-1", prompt_version="v2")
def answer(query: str, docs: list[dict[str, Any]]) -> Any:
    yield "Refunds take "
    yield "3 days."


@ragmon.pipeline(name="refunds", session_id="s-42")
def rag(query: str) -> str:
    out = "".join(answer(query, search(query)))
    ragmon.record_feedback("negative")
    return out


def test_agent_reads_what_the_sdk_wrote(collector: tuple[str, list[Any]]) -> None:
    endpoint, received = collector
    spans = send_and_decode(endpoint, received, lambda: rag("How long do refunds take?"))
    assert {s.name for s in spans} == {"refunds", "kb-search", "answer"}
    assert all(s.dropped_attributes_count == 0 for s in spans)
    trace = build_rag_trace(spans, complete=True)
    assert trace.service == "contract"
    assert trace.pipeline == "refunds"
    assert trace.question == "How long do refunds take?"
    assert trace.answer == "Refunds take 3 days."
    assert trace.content_sampled is True
    assert len(trace.documents) == 35
    first, last = trace.documents[0], trace.documents[-1]
    assert (first.id, first.content, first.rank) == ("kb-0", "Refunds take 3 days.", 0)
    assert first.score == pytest.approx(0.9)
    assert (last.id, last.rank) == ("kb-34", 34)
    assert first.metadata == {"source": "policy.md"}
    assert trace.retrieval_latency_s is not None and trace.pipeline_latency_s is not None
    assert trace.attributes[sc.RAGMON_FEEDBACK] == "negative"
    assert trace.attributes[sc.LLM_MODEL_NAME] == "tmpl-1"
    assert trace.attributes[sc.SESSION_ID] == "s-42"


def test_agent_sees_no_content_at_rate_zero(collector: tuple[str, list[Any]]) -> None:
    endpoint, received = collector
    spans = send_and_decode(endpoint, received, lambda: rag("How long do refunds take?"), content_rate=0.0)
    trace = build_rag_trace(spans, complete=True)
    assert trace.content_sampled is False
    assert trace.question is None and trace.answer is None
    assert [d.id for d in trace.documents][:2] == ["kb-0", "kb-1"] and len(trace.documents) == 35
    assert all(d.content is None for d in trace.documents)
    assert trace.documents[0].score == pytest.approx(0.9)


def test_agent_sees_the_error_type(collector: tuple[str, list[Any]]) -> None:
    endpoint, received = collector

    @ragmon.pipeline(name="broken")
    def broken(query: str) -> str:
        raise TimeoutError("vector store timed out")

    def run() -> None:
        with pytest.raises(TimeoutError):
            broken("q")

    trace = build_rag_trace(send_and_decode(endpoint, received, run), complete=True)
    assert trace.error_type == "TimeoutError"
    assert trace.pipeline == "broken"
